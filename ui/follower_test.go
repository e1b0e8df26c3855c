package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/docketdb/docket/engine"
)

// followerAPI answers reads as a follower of a cluster does: only those
// whose context allows stale reads; the others fail with ErrNotLeader, as
// do writes.
type followerAPI struct{ engine.API }

func notLeader(ctx context.Context) error {
	if engine.StaleReads(ctx) {
		return nil
	}
	return fmt.Errorf("%w: n1 leads", engine.ErrNotLeader)
}

func (f followerAPI) Queues(ctx context.Context) ([]engine.QueueInfo, error) {
	if err := notLeader(ctx); err != nil {
		return nil, err
	}
	return f.API.Queues(ctx)
}

func (f followerAPI) Queue(ns engine.Namespace, name string) engine.Queue {
	return followerQueue{f.API.Queue(ns, name)}
}

type followerQueue struct{ engine.Queue }

func (q followerQueue) Counts(ctx context.Context) (engine.Counts, error) {
	if err := notLeader(ctx); err != nil {
		return engine.Counts{}, err
	}
	return q.Queue.Counts(ctx)
}

func (q followerQueue) Settings(ctx context.Context) (engine.QueueSettings, error) {
	if err := notLeader(ctx); err != nil {
		return engine.QueueSettings{}, err
	}
	return q.Queue.Settings(ctx)
}

func (q followerQueue) Partitions(ctx context.Context, o engine.PartitionListOptions) (engine.PartitionPage, error) {
	if err := notLeader(ctx); err != nil {
		return engine.PartitionPage{}, err
	}
	return q.Queue.Partitions(ctx, o)
}

func (q followerQueue) List(ctx context.Context, o engine.ListOptions) (engine.Page, error) {
	if err := notLeader(ctx); err != nil {
		return engine.Page{}, err
	}
	return q.Queue.List(ctx, o)
}

func (q followerQueue) Get(ctx context.Context, id uint64) (engine.TaskInfo, error) {
	if err := notLeader(ctx); err != nil {
		return engine.TaskInfo{}, err
	}
	return q.Queue.Get(ctx, id)
}

func (q followerQueue) Redrive(ctx context.Context, id uint64) error {
	return fmt.Errorf("%w: n1 leads", engine.ErrNotLeader)
}

// On a node that is not the leader, the pages read its own state (stale
// reads) and say so in a banner naming the leader and linking its
// dashboard; they offer no actions, and an action is refused with the
// leader named.
func TestFollowerServesStaleReadsWithBanner(t *testing.T) {
	status := ClusterStatus{Self: "n2", Leader: "n1", Members: []Member{
		{ID: "n1", Address: "http://10.0.0.1:7070", Voter: true, State: "leader"},
		{ID: "n2", Address: "http://10.0.0.2:7070", Voter: true, State: "follower"},
	}}
	cl := clusterFunc(func(context.Context) (ClusterStatus, error) { return status, nil })
	e := newEnv(t, Options{})
	id := e.kill(e.queue("jobs"), "boom")
	e.serve(followerAPI{e.db}, Options{AllowActions: true, Cluster: cl})
	banner := `This node is a follower: pages show its own copy of the state, which may trail the leader by a moment. Actions are taken on the leader, node <strong>n1</strong> (<a href="http://10.0.0.1:7070/docket/">its dashboard</a>).`
	for _, path := range []string{
		"/docket/",
		"/docket/queue?p=acme&s=prod&q=jobs&state=dead",
		fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", id),
		fmt.Sprintf("/docket/task?id=%d", id),
		"/docket/dead?p=acme&s=prod&q=jobs",
	} {
		st, body := e.get(path)
		if path == fmt.Sprintf("/docket/task?id=%d", id) {
			if st != http.StatusSeeOther {
				t.Fatalf("%s: %d\n%s", path, st, body)
			}
			continue
		}
		if st != http.StatusOK {
			t.Fatalf("%s on a follower: %d\n%s", path, st, body)
		}
		mustContain(t, body, banner, `title="This node is not the leader: actions are taken on the leader&#39;s dashboard">read-only</span>`)
		mustNotContain(t, body, `action="/docket/action"`)
	}
	mustContain(t, e.mustGet("/docket/"), ">jobs</a>")
	mustContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=dead"), fmt.Sprintf(">%d</a>", id))

	form := url.Values{"csrf": {e.csrf()}, "op": {"redrive"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "id": {fmt.Sprint(id)}, "confirm": {"yes"}}
	st, body := e.post("/docket/action", form)
	if st != http.StatusConflict {
		t.Fatalf("an action on a follower: %d\n%s", st, body)
	}
	mustContain(t, body, "this node is not the leader: take the action on the leader, node n1 (http://10.0.0.1:7070/docket/). Nothing changed.")

	// During an election: the same, without a leader to name.
	status.Leader = ""
	body = e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=dead")
	mustContain(t, body, "This node knows no leader: pages show its own copy of the state, which may be behind.")

	// On the leader: no banner, reads as usual, actions offered.
	status.Self, status.Leader = "n1", "n1"
	e.serve(e.db, Options{AllowActions: true, Cluster: cl})
	body = e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=dead")
	mustNotContain(t, body, `id="follower"`, ">read-only</span>")
	mustContain(t, body, `value="redrive"`)
}
