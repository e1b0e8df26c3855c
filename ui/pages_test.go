package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// A queue's pause state shows on the overview and the queue page, with the
// button that changes it; the action goes through the confirmation, pauses
// the engine's queue (its claims lease nothing) and reports what it did.
// Limits show too.
func TestPauseAndResume(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	e.enqueue(q, engine.Task{})
	paused := func() bool {
		t.Helper()
		s, err := q.Settings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s.Paused
	}
	mustNotContain(t, e.mustGet("/docket/"), `<span class="pill paused">`)
	page := e.mustGet("/docket/queue?p=acme&s=prod&q=jobs")
	mustContain(t, page, `value="pause">Pause queue</button>`)
	mustNotContain(t, page, `value="resume"`)
	form := url.Values{"csrf": {e.csrf()}, "op": {"pause"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}}
	mustContain(t, e.mustGetPost(form), "stop workers from claiming tasks of this queue", `id="confirm-form"`)
	if paused() {
		t.Fatal("the confirmation page paused the queue")
	}
	form.Set("confirm", "yes")
	mustContain(t, e.mustGetPost(form), "Paused the queue.")
	if !paused() {
		t.Fatal("the engine's queue is not paused")
	}
	if ls, err := q.Claim(ctx, "w", time.Minute, 1); err != nil || len(ls) != 0 {
		t.Fatalf("a claim on the paused queue: %v %v", ls, err)
	}
	mustContain(t, e.mustGet("/docket/"), `<span class="pill paused">paused</span>`)
	page = e.mustGet("/docket/queue?p=acme&s=prod&q=jobs")
	mustContain(t, page, `<span class="pill paused">paused</span>`, `value="resume">Resume queue</button>`)
	mustNotContain(t, page, `value="pause"`)
	form.Set("op", "resume")
	mustContain(t, e.mustGetPost(form), "Resumed the queue.")
	if paused() {
		t.Fatal("still paused after resume")
	}
	// Limits show on both pages.
	if err := q.SetLimits(ctx, engine.Limits{MaxInFlight: 3, Rate: 10, Per: time.Second, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, e.mustGet("/docket/"), `title="Limits: at most 3 in flight; 10 per 1s, bursts of 2">limited</span>`)
	mustContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs"), "Limits: at most 3 in flight; 10 per 1s, bursts of 2")
	// Read-only: the state shows, the button does not.
	if err := q.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	e.serve(e.db, Options{})
	page = e.mustGet("/docket/queue?p=acme&s=prod&q=jobs")
	mustContain(t, page, `<span class="pill paused">paused</span>`)
	mustNotContain(t, page, `value="pause"`, `value="resume"`)
}

// A caller without PermAdmin cannot pause: the report says so, with 403,
// and the queue is not paused.
func TestPauseNeedsAdmin(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	e.enqueue(e.queue("jobs"), engine.Task{})
	reader := e.db.As(engine.Caller{ID: "reader"})
	e.serve(reader, Options{AllowActions: true})
	form := url.Values{"csrf": {e.csrf()}, "op": {"pause"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "confirm": {"yes"}}
	st, body := e.post("/docket/action", form)
	if st != http.StatusForbidden || !strings.Contains(body, "Nothing changed.") {
		t.Fatalf("pause without admin: %d\n%s", st, body)
	}
	if s, _ := e.queue("jobs").Settings(ctx); s.Paused {
		t.Fatal("paused by a caller without PermAdmin")
	}
}

// A task is found by its id alone (the header's search box, links to
// follow-ups on other queues), in every queue or in one namespace.
func TestFindTaskByID(t *testing.T) {
	e := newEnv(t, Options{})
	e.enqueue(e.queue("a"), engine.Task{})
	id := e.enqueue(e.queue("b"), engine.Task{})
	if _, err := e.db.Queue(engine.NS("other", "x"), "c").Enqueue(ctx, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	r, err := e.c.Get(fmt.Sprintf("%s/docket/task?id=%d", e.srv.URL, id))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if want := fmt.Sprintf("/docket/task?p=acme&q=b&s=prod&id=%d", id); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != want {
		t.Fatalf("find %d: %d %q, want %q", id, r.StatusCode, r.Header.Get("Location"), want)
	}
	st, body := e.get(fmt.Sprintf("/docket/task?id=%d&p=other&s=x", id))
	if st != http.StatusNotFound || !strings.Contains(body, fmt.Sprintf("no task %d in any queue of other/x", id)) {
		t.Fatalf("in another namespace: %d\n%s", st, body)
	}
	if st, body := e.get("/docket/task?id=999"); st != http.StatusNotFound || !strings.Contains(body, "no task 999 in any queue you can see") {
		t.Fatalf("unknown id: %d\n%s", st, body)
	}
	if st, _ := e.get("/docket/task?id=x"); st != http.StatusBadRequest {
		t.Fatalf("bad id: %d", st)
	}
}

// The task page links the task that created it and the follow-ups it
// created, by id within the namespace.
func TestTaskPageRendersLineage(t *testing.T) {
	d := build(nil, Options{Prefix: "/docket/"})
	rec := httptest.NewRecorder()
	d.renderAs(rec, httptest.NewRequest("GET", "/docket/task", nil), http.StatusOK, "task", "Task 5", "queue", chrome{}, taskPage{
		Ref: queueRef{ns, "jobs"}, T: engine.TaskInfo{ID: 5, State: engine.Completed, Namespace: ns, Queue: "jobs"},
		Lineage: lineage{Parent: 3, FollowUps: []uint64{6, 7}}, Now: t0,
	})
	body := rec.Body.String()
	mustContain(t, body, `<dt>Created by</dt><dd><a href="/docket/task?p=acme&amp;s=prod&amp;id=3">task 3</a>`,
		`<dt>Follow-ups</dt><dd class="ids"><a href="/docket/task?p=acme&amp;s=prod&amp;id=6">6</a> <a href="/docket/task?p=acme&amp;s=prod&amp;id=7">7</a>`)
	rec = httptest.NewRecorder()
	d.renderAs(rec, httptest.NewRequest("GET", "/docket/task", nil), http.StatusOK, "task", "Task 5", "queue", chrome{}, taskPage{
		Ref: queueRef{ns, "jobs"}, T: engine.TaskInfo{ID: 5, State: engine.Ready}, Now: t0})
	mustNotContain(t, rec.Body.String(), "Created by", "Follow-ups")
}

// A follow-up's page links
// the task whose completion enqueued it, and that task's page (kept by
// RetainCompleted) links the follow-up.
func TestTaskPageShowsEngineLineage(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.queue("jobs")
	parent := e.enqueue(q, engine.Task{})
	ls, err := q.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 {
		t.Fatal(ls, err)
	}
	res, err := q.Complete(ctx, ls[0], engine.Done{FollowUps: []engine.FollowUp{{Queue: "next", Task: engine.Task{}}}})
	if err != nil {
		t.Fatal(err)
	}
	child := res.Enqueued[0].ID
	mustContain(t, e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=next&id=%d", child)),
		fmt.Sprintf(`<a href="/docket/task?p=acme&amp;s=prod&amp;id=%d">task %d</a>`, parent, parent))
	mustContain(t, e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", parent)),
		fmt.Sprintf(`<a href="/docket/task?p=acme&amp;s=prod&amp;id=%d">%d</a>`, child, child))
}

// A task with a last error but no attempt history says where the error is
// rather than claiming there were no failures.
func TestAttemptsWithoutHistory(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.queue("jobs")
	dead := e.kill(q, "boom")
	ready := e.enqueue(q, engine.Task{})
	body := e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", dead))
	if info, _ := q.Get(ctx, dead); len(info.Errors) == 0 {
		mustContain(t, body, "kept no history of the attempts")
	} else {
		mustContain(t, body, "attempt 1, ", "boom")
	}
	mustContain(t, e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", ready)), "<p class=\"muted\">None.</p>")
}

// Dead tasks are redriven or deleted by their last error: every dead task
// with exactly that error, not others, reported with its count.
func TestRedriveAndDeleteByError(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	x1, x2, y := e.kill(q, "x failed"), e.kill(q, "x failed"), e.kill(q, "y failed")
	xy := e.kill(q, "x failed, then y")
	tok := e.csrf()
	form := url.Values{"csrf": {tok}, "op": {"redrive-error"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "err": {"x failed"}}
	mustContain(t, e.mustGet("/docket/dead?p=acme&s=prod&q=jobs"), `<input type="hidden" name="err" value="x failed">`, `value="redrive-error"`, `value="delete-error"`)
	mustContain(t, e.mustGetPost(form), "whose last error has this shape ready again", `<pre class="err">x failed</pre>`, `name="err" value="x failed"`)
	if e.state(q, x1) != "dead" {
		t.Fatal("the confirmation page redrove")
	}
	form.Set("confirm", "yes")
	mustContain(t, e.mustGetPost(form), "Redrove 2 tasks.")
	if e.state(q, x1) != "ready" || e.state(q, x2) != "ready" || e.state(q, y) != "dead" || e.state(q, xy) != "dead" {
		t.Fatalf("states %s %s %s %s", e.state(q, x1), e.state(q, x2), e.state(q, y), e.state(q, xy))
	}
	form.Set("op", "delete-error")
	form.Set("err", "y failed")
	mustContain(t, e.mustGetPost(form), "Deleted 1 task.")
	if s := e.state(q, y); !strings.Contains(s, "not found") || e.state(q, xy) != "dead" {
		t.Fatalf("after delete: %s, %s", s, e.state(q, xy))
	}
	form.Del("err")
	if st, body := e.post("/docket/action", form); st != http.StatusBadRequest || !strings.Contains(body, "no error text") {
		t.Fatalf("without an error: %d\n%s", st, body)
	}
}

// The confirmation of a whole-queue action says how many tasks it would
// touch now.
func TestConfirmSaysHowMany(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	for range 3 {
		e.kill(q, "boom")
	}
	form := url.Values{"csrf": {e.csrf()}, "op": {"redrive-all"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}}
	mustContain(t, e.mustGetPost(form), "make every dead task of the queue ready again (acme/prod · jobs): 3 tasks now.")
	form.Set("op", "delete-completed-all")
	mustContain(t, e.mustGetPost(form), "delete every retained completed task of the queue (acme/prod · jobs): 0 tasks now.")
}

type clusterFunc func(context.Context) (ClusterStatus, error)

func (f clusterFunc) ClusterStatus(ctx context.Context) (ClusterStatus, error) { return f(ctx) }

// The cluster page shows each member's indexes and lag from the provider,
// flags a member far behind, and still renders when the node cannot say.
func TestClusterPage(t *testing.T) {
	st := ClusterStatus{Self: "n2", Leader: "n1", Term: 4, CommitIndex: 5000, Members: []Member{
		{ID: "n1", Address: "10.0.0.1:7000", Voter: true, State: "leader", CommitIndex: 5000, AppliedIndex: 5000},
		{ID: "n2", Address: "10.0.0.2:7000", Voter: true, State: "follower", CommitIndex: 4990, AppliedIndex: 4980, Lag: 20, LastContact: 15 * time.Millisecond},
		{ID: "n3", Address: "10.0.0.3:7000", Voter: false, State: "unreachable", CommitIndex: 1200, AppliedIndex: 1200, Lag: 3800, LastContact: 9 * time.Second},
	}}
	var fail error
	e := newEnv(t, Options{Cluster: clusterFunc(func(context.Context) (ClusterStatus, error) { return st, fail })})
	body := e.mustGet("/docket/cluster")
	mustContain(t, body, `<span class="n">n1</span> <span class="l">leader</span>`, "5,000", "term 4", "as node n2 sees them",
		"n2 <span class=\"muted\">(this node)</span>", "4,990", "4,980", `<td class="num alarm">3,800</td>`, "non-voter", "9 s",
		`<span class="n">2/3</span> <span class="l">members in step</span>`, `<span class="n">3,800</span> <span class="l">largest lag</span>`)
	st.Leader = ""
	fail = errors.New("raft: leadership lost while committing")
	code, body := e.get("/docket/cluster")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("status %d", code)
	}
	mustContain(t, body, "This node could not report the cluster: raft: leadership lost while committing",
		`<span class="n">none</span> <span class="l">leader</span><span class="sub">election under way</span>`, `data-refresh="1500"`)
}

func TestFormatting(t *testing.T) {
	for in, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := group(fmt.Sprint(in)); got != want {
			t.Errorf("group(%d) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{-1: "—", 0: "0%", 0.05: "<0.1%", 2.345: "2.3%", 17.4: "17%"} {
		if got := share(in); got != want {
			t.Errorf("share(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{0: "0.00", 0.0833: "0.08", 2.5: "2.50", 12.34: "12.3", 1234.5: "1,234"} {
		if got := rate(in); got != want {
			t.Errorf("rate(%v) = %q, want %q", in, got, want)
		}
	}
	if got := compact([]byte("{\n  \"a\": [1, 2]\n}")); got != `{"a":[1,2]}` {
		t.Errorf("compact: %q", got)
	}
	if got := compact([]byte("not json")); got != "not json" {
		t.Errorf("compact of text: %q", got)
	}
	if got := lagBar(1, 1000); got != 2 {
		t.Errorf("a small lag shows as a sliver: %v", got)
	}
	if got := stateBar(engine.Counts{Ready: 3, Dead: 1, Completed: 100}); len(got) != 2 || got[0].Len != 75 || got[1].X != 75 || got[1].State != "dead" {
		t.Errorf("state bar %+v", got)
	}
}

// TestPartitions: the queue page lists the queue's partitions with their
// counts and shows the partition bound among the limits; the task page
// and the task list show a task's partition; a queue without partitioned
// tasks lists none.
func TestPartitions(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.queue("reports")
	id := e.enqueue(q, engine.Task{Partition: "tenant-7"})
	e.enqueue(q, engine.Task{Partition: "tenant-7"})
	e.enqueue(q, engine.Task{})
	if err := q.SetLimits(ctx, engine.Limits{PartitionMaxInFlight: 2, PartitionRate: 5, PartitionPer: time.Minute, PartitionBurst: 10}); err != nil {
		t.Fatal(err)
	}
	page := e.mustGet("/docket/queue?p=acme&s=prod&q=reports")
	mustContain(t, page, "Limits: at most 2 in flight per partition; 5 per 1m0s per partition, bursts of 10")
	mustContain(t, page, `<summary>2 partitions`)
	mustContain(t, page, `<th scope="row"><code>tenant-7</code></th><td class="num">2</td>`)
	mustContain(t, page, `<th scope="row"><span class="muted">none</span></th><td class="num">1</td>`)
	mustContain(t, page, `<span class="part" title="partition">tenant-7</span>`)
	mustContain(t, e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=reports&id=%d", id)),
		`<dd id="task-partition"><code>tenant-7</code></dd>`)
	other := e.queue("plain")
	e.enqueue(other, engine.Task{})
	if page := e.mustGet("/docket/queue?p=acme&s=prod&q=plain"); strings.Contains(page, `id="partitions"`) {
		t.Fatal("a queue without partitioned tasks lists partitions")
	}
}
