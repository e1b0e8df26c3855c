package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// testLog is a replicated log of one node for the server's side of a
// cluster: as the leader it applies each command at once; as a follower
// (notLeader set) it refuses writes and linearizable reads as raft's Node
// does; fail, when set, is what a write gets instead.
type testLog struct {
	mu        sync.Mutex
	db        *engine.DB
	notLeader bool
	fail      error
	submits   atomic.Int64
}

func (l *testLog) Submit(_ context.Context, cmd []byte) (*engine.Applied, error) {
	l.submits.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.notLeader:
		return nil, fmt.Errorf("%w: a follower", engine.ErrNotLeader)
	case l.fail != nil:
		return nil, l.fail
	}
	return l.db.ApplyCommand(cmd), nil
}

func (l *testLog) ReadBarrier(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.notLeader {
		return fmt.Errorf("%w: a follower", engine.ErrNotLeader)
	}
	return nil
}

// testCluster is the Cluster of a test node.
type testCluster struct {
	mu        sync.Mutex
	leaderURL string
	changed   chan struct{}
	joined    []string
	status    ClusterStatus
}

func (c *testCluster) Status(context.Context) (ClusterStatus, error) { return c.status, nil }
func (c *testCluster) Join(_ context.Context, id, raftAddr, url string) error {
	switch {
	case url == "":
		return fmt.Errorf("%w: no url", engine.ErrInvalid)
	case id == "late":
		return fmt.Errorf("%w: %s has not acknowledged entry 7: %w", engine.ErrNotCaughtUp, id, context.DeadlineExceeded)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joined = append(c.joined, id+" "+raftAddr+" "+url)
	return nil
}
func (c *testCluster) Remove(context.Context, string) error {
	return fmt.Errorf("%w: the leader is elsewhere", engine.ErrNotLeader)
}
func (c *testCluster) TransferLeadership(_ context.Context, id string) (string, error) {
	return id, nil
}
func (c *testCluster) LeaderURL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaderURL
}
func (c *testCluster) LeaderChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// bump reports a change of leader to the server.
func (c *testCluster) bump(leaderURL string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaderURL = leaderURL
	close(c.changed)
	c.changed = make(chan struct{})
}

// nodeServer serves a replicated DB over log with cluster c, and returns
// the server, the DB and its URL.
func nodeServer(t *testing.T, log *testLog, c *testCluster, opts Options) (*Server, *engine.DB, string) {
	t.Helper()
	db, err := engine.OpenReplicated(engine.Options{Authorizer: opts.Tokens, Secure: opts.Tokens != nil}, log)
	if err != nil {
		t.Fatal(err)
	}
	log.db = db
	t.Cleanup(func() { db.Close() })
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	opts.Cluster = c
	opts.Logger = slog.New(slog.DiscardHandler)
	s := New(db, opts)
	return s, db, rpcServer(t, s)
}

func clusterCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestFollowerSendsTheClientToTheLeader: a write or a linearizable read on
// a follower answers Unavailable, saying nothing was taken and naming the
// leader's URL, and the client, given only the follower, moves to the
// leader and is served there.
func TestFollowerSendsTheClientToTheLeader(t *testing.T) {
	t.Parallel()
	_, leaderDB, leaderURL := nodeServer(t, &testLog{}, &testCluster{}, Options{})
	_, _, followerURL := nodeServer(t, &testLog{notLeader: true}, &testCluster{leaderURL: leaderURL}, Options{})

	st := newStubs(followerURL, "")
	_, err := st.q.Enqueue(clusterCtx(t), connect.NewRequest(&v1.EnqueueRequest{Namespace: acme, Queue: "jobs", Task: &v1.Task{}}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable || ce.Meta().Get(wire.LeaderHeader) != leaderURL ||
		ce.Meta().Get(wire.UnavailableHeader) == "" || wire.Detail(ce) != nil {
		t.Fatalf("a write on a follower: %v %v", err, ce.Meta())
	}
	_, err = st.q.Counts(clusterCtx(t), connect.NewRequest(&v1.CountsRequest{Namespace: acme, Queue: "jobs"}))
	if !errors.As(err, &ce) || ce.Meta().Get(wire.LeaderHeader) != leaderURL {
		t.Fatalf("a linearizable read on a follower: %v", err)
	}

	c, err := client.Dial(clusterCtx(t), followerURL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Queue(engine.NS("acme", "prod"), "jobs").Enqueue(clusterCtx(t), engine.Task{Payload: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatalf("an enqueue through the follower: %v", err)
	}
	if tk, err := leaderDB.Queue(engine.NS("acme", "prod"), "jobs").Get(clusterCtx(t), res.ID); err != nil || string(tk.Payload) != `{"n":1}` {
		t.Fatalf("the leader's DB: %+v %v", tk, err)
	}
}

// TestStaleReadsAreServedByAFollower: with the client's StaleReads (or
// engine.WithStaleReads on the call) the follower answers a read from its
// own state; without, the read goes to the leader.
func TestStaleReadsAreServedByAFollower(t *testing.T) {
	t.Parallel()
	log := &testLog{}
	_, db, url := nodeServer(t, log, &testCluster{}, Options{})
	q := db.Queue(engine.NS("acme", "prod"), "jobs")
	if _, err := q.Enqueue(clusterCtx(t), engine.Task{}); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	log.notLeader = true // now a follower that knows no leader
	log.mu.Unlock()

	for _, tc := range []struct {
		name  string
		opts  client.Options
		ctx   func(context.Context) context.Context
		stale bool
	}{
		{"linearizable", client.Options{MaxRetries: 1}, func(c context.Context) context.Context { return c }, false},
		{"Options.StaleReads", client.Options{StaleReads: true}, func(c context.Context) context.Context { return c }, true},
		{"engine.WithStaleReads", client.Options{}, engine.WithStaleReads, true},
	} {
		c, err := client.Dial(clusterCtx(t), url, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.Queue(engine.NS("acme", "prod"), "jobs").Counts(tc.ctx(clusterCtx(t)))
		switch {
		case tc.stale && (err != nil || n.Ready != 1):
			t.Errorf("%s: %+v %v, want the follower's count", tc.name, n, err)
		case !tc.stale && !errors.Is(err, client.ErrUnavailable):
			t.Errorf("%s: %+v %v, want ErrUnavailable (no leader to go to)", tc.name, n, err)
		}
		c.Close()
	}
	if staleReads("yes") || staleReads("") || !staleReads("1") {
		t.Error("staleReads takes what strconv.ParseBool takes")
	}
}

// TestUnknownOutcomeIsNotAClosedNode: a write whose fate the node does not
// know (leadership lost, or the node closing, after it was submitted) is
// answered as a call sent without an answer, so the client repeats only a
// call whose repeat is harmless and reports an unknown outcome for others.
func TestUnknownOutcomeIsNotAClosedNode(t *testing.T) {
	t.Parallel()
	log := &testLog{fail: fmt.Errorf("%w: %w: raft is shutting down", engine.ErrOutcomeUnknown, engine.ErrClosed)}
	_, _, url := nodeServer(t, log, &testCluster{}, Options{})
	c, err := client.Dial(clusterCtx(t), url, client.Options{MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := c.Queue(engine.NS("acme", "prod"), "jobs")

	_, err = q.Claim(clusterCtx(t), "w", time.Minute, 1)
	if !errors.Is(err, client.ErrOutcomeUnknown) || log.submits.Load() != 1 {
		t.Fatalf("a claim of unknown outcome: %v after %d submits, want ErrOutcomeUnknown after 1", err, log.submits.Load())
	}
	log.submits.Store(0)
	_, err = q.Enqueue(clusterCtx(t), engine.Task{IdempotencyKey: "k1"})
	if !errors.Is(err, client.ErrOutcomeUnknown) || log.submits.Load() != 3 {
		t.Fatalf("an idempotent enqueue of unknown outcome: %v after %d submits, want it repeated (3 tries)", err, log.submits.Load())
	}
}

// TestClaimWaitEndsWhenTheLeadershipChanges: a claim parked on a leader
// that stops leading returns at once, naming the new leader, instead of
// waiting for a commit that may never reach it.
func TestClaimWaitEndsWhenTheLeadershipChanges(t *testing.T) {
	t.Parallel()
	tc := &testCluster{}
	s, _, url := nodeServer(t, &testLog{}, tc, Options{MaxWait: time.Hour})
	parked := make(chan struct{}, 1)
	s.onPark = func() { parked <- struct{}{} }
	got := make(chan error, 1)
	go func() {
		_, err := newStubs(url, "").q.ClaimWait(clusterCtx(t), connect.NewRequest(&v1.ClaimWaitRequest{
			Namespace: acme, Queue: "jobs", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1}))
		got <- err
	}()
	<-parked
	tc.bump("http://127.0.0.1:1")
	err := <-got
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable || ce.Meta().Get(wire.LeaderHeader) != "http://127.0.0.1:1" {
		t.Fatalf("a parked claim when the leadership changed: %v", err)
	}
}

// TestClusterService: Status, Join, Remove and TransferLeadership reach
// the node's Cluster; a refusal for not being the leader names the leader;
// with tokens Status needs read on */* and the changes admin on */*; a
// standalone server does not serve the service.
func TestClusterService(t *testing.T) {
	t.Parallel()
	tokens, tok := tokensFor(t, map[string]string{"ops": "*/*:read+admin", "viewer": "*/*:read", "app": "acme/prod:all"})
	tc := &testCluster{leaderURL: "http://leader.test:7070", status: ClusterStatus{ID: "n2", State: "Follower", Term: 3, CommitIndex: 9,
		LastContact: 1500 * time.Millisecond, Members: []ClusterMember{{ID: "n1", RaftAddr: "a:1", URL: "http://leader.test:7070", Voter: true, Leader: true}}}}
	_, _, url := nodeServer(t, &testLog{}, tc, Options{Tokens: tokens})
	cl := func(token string) *client.Client {
		c, err := client.Dial(clusterCtx(t), url, client.Options{Token: token, MaxRetries: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	st, err := cl(tok["viewer"]).ClusterStatus(clusterCtx(t))
	if err != nil || st.ID != "n2" || st.Term != 3 || st.CommitIndex != 9 || st.LastContact != 1500*time.Millisecond ||
		len(st.Members) != 1 || st.Members[0].URL != "http://leader.test:7070" || !st.Members[0].Leader {
		t.Fatalf("status: %+v %v", st, err)
	}
	if _, err := cl(tok["app"]).ClusterStatus(clusterCtx(t)); !errors.Is(err, engine.ErrPermission) || !strings.Contains(err.Error(), "read on */*") {
		t.Fatalf("status without read on */*: %v", err)
	}
	if err := cl(tok["viewer"]).Join(clusterCtx(t), "n3", "c:3", "http://n3:7070"); !errors.Is(err, engine.ErrPermission) {
		t.Fatalf("join without admin: %v", err)
	}
	if err := cl(tok["ops"]).Join(clusterCtx(t), "n3", "c:3", "http://n3:7070"); err != nil || len(tc.joined) != 1 || tc.joined[0] != "n3 c:3 http://n3:7070" {
		t.Fatalf("join: %v %v", err, tc.joined)
	}
	if err := cl(tok["ops"]).Join(clusterCtx(t), "n4", "d:4", ""); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a join the node refuses: %v", err)
	}
	// A join that made the node a member but ended before it caught up
	// is told from a failure (one whose leader changed is followed to the
	// new leader: TestNotCaughtUpCrossesWithItsCause).
	if err := cl(tok["ops"]).Join(clusterCtx(t), "late", "e:5", "http://e:7070"); !errors.Is(err, engine.ErrNotCaughtUp) ||
		!strings.Contains(err.Error(), "late has not acknowledged entry 7") {
		t.Fatalf("a join whose node has not caught up: %v", err)
	}
	if leader, err := cl(tok["ops"]).TransferLeadership(clusterCtx(t), "n1"); err != nil || leader != "n1" {
		t.Fatalf("transfer: %q %v", leader, err)
	}
	_, err = newStubsCluster(url, tok["ops"]).Remove(clusterCtx(t), connect.NewRequest(&v1.RemoveRequest{Id: "n1"}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Meta().Get(wire.LeaderHeader) != "http://leader.test:7070" {
		t.Fatalf("remove on a follower: %v", err)
	}

	s, _ := newTestServer(t, nil, Options{})
	_, err = newStubsCluster(rpcServer(t, s), "").Status(clusterCtx(t), connect.NewRequest(&v1.ClusterStatusRequest{}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("Cluster on a standalone server: %v", err)
	}
}

// tokensFor writes a tokens file granting each caller its grants and
// returns the table and each caller's token.
func tokensFor(t *testing.T, grants map[string]string) (*Tokens, map[string]string) {
	t.Helper()
	var lines []string
	tok := map[string]string{}
	for caller, g := range grants {
		token, line, err := NewToken(caller, g)
		if err != nil {
			t.Fatal(err)
		}
		tok[caller] = token
		lines = append(lines, line)
	}
	path := t.TempDir() + "/tokens"
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	return tokens, tok
}

func newStubsCluster(url, token string) docketv1connect.ClusterClient {
	var opts []connect.ClientOption
	if token != "" {
		opts = append(opts, connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", "Bearer "+token)
				return next(ctx, req)
			}
		})))
	}
	return docketv1connect.NewClusterClient(http.DefaultClient, url, opts...)
}
