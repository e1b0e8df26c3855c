package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// pipelineStub is a connect client of the Pipeline service sending token.
func pipelineStub(url, token string) docketv1connect.PipelineClient {
	var opts []connect.ClientOption
	if token != "" {
		opts = append(opts, connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", "Bearer "+token)
				return next(ctx, req)
			}
		})))
	}
	return docketv1connect.NewPipelineClient(http.DefaultClient, url, opts...)
}

// sameAnswer fails the test unless the item error carries what the single
// call's error did: code, message, sentinel and the headers that say the
// server did not take it.
func sameAnswer(t *testing.T, what string, item *v1.ItemError, single error) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(single, &ce) {
		t.Fatalf("%s alone: %v is not an answer", what, single)
	}
	if item == nil {
		t.Fatalf("%s: the item succeeded; alone it got %v", what, single)
	}
	got := wire.ItemError(item)
	if got.Code() != ce.Code() || got.Message() != ce.Message() ||
		wire.Detail(got).GetSentinel() != wire.Detail(ce).GetSentinel() || (wire.Detail(got) == nil) != (wire.Detail(ce) == nil) ||
		got.Meta().Get(wire.UnavailableHeader) != ce.Meta().Get(wire.UnavailableHeader) ||
		got.Meta().Get(wire.LeaderHeader) != ce.Meta().Get(wire.LeaderHeader) {
		t.Fatalf("%s: the item got %v (detail %v, meta %v); alone: %v (detail %v, meta %v)",
			what, got, wire.Detail(got), got.Meta(), ce, wire.Detail(ce), ce.Meta())
	}
}

// TestEnqueueEachRunsEachItemAlone: every item of EnqueueEach is checked,
// authorized and committed on its own: an invalid item and one in a
// namespace the caller may not enqueue in fail with exactly the single
// call's answer, the others are enqueued, and a repeated idempotency key
// is deduplicated as a second Enqueue would be.
func TestEnqueueEachRunsEachItemAlone(t *testing.T) {
	t.Parallel()
	_, db, url, tok := tokenServer(t, Options{})
	ctx := context.Background()
	other := &v1.Namespace{Project: "elsewhere", Scope: "prod"}
	badDelay := &v1.Task{Delay: &durationpb.Duration{Seconds: 1, Nanos: -5}}
	items := []*v1.EnqueueRequest{
		{Namespace: acme, Queue: "q", Task: &v1.Task{Payload: []byte(`{"n":0}`)}},
		{Namespace: acme, Queue: "q", Task: badDelay},
		{Namespace: other, Queue: "q", Task: &v1.Task{}},
		{Namespace: acme, Queue: "q", Task: &v1.Task{Payload: []byte(`{"n":3}`), IdempotencyKey: "k"}},
		{Namespace: acme, Queue: "", Task: &v1.Task{}},
		{Namespace: acme, Queue: "q", Task: &v1.Task{Payload: []byte(`{"n":5}`), IdempotencyKey: "k"}},
	}
	res, err := pipelineStub(url, tok["acmeAdmin"]).EnqueueEach(ctx, connect.NewRequest(&v1.EnqueueEachRequest{Items: items}))
	if err != nil {
		t.Fatal(err)
	}
	rs := res.Msg.GetResults()
	if len(rs) != len(items) {
		t.Fatalf("%d results for %d items", len(rs), len(items))
	}
	single := newStubs(url, tok["acmeAdmin"])
	for _, i := range []int{1, 2, 4} {
		_, err := single.q.Enqueue(ctx, connect.NewRequest(items[i]))
		sameAnswer(t, fmt.Sprintf("item %d", i), rs[i].GetError(), err)
		if rs[i].GetEnqueued() != nil {
			t.Errorf("item %d failed and has a result", i)
		}
	}
	if connect.CodeOf(wire.ItemError(rs[2].GetError())) != connect.CodePermissionDenied {
		t.Fatalf("the forbidden item: %v", rs[2].GetError())
	}
	for _, i := range []int{0, 3, 5} {
		if rs[i].GetError() != nil || rs[i].GetEnqueued().GetId() == 0 {
			t.Fatalf("item %d: %v", i, rs[i])
		}
	}
	if rs[3].GetEnqueued().GetDeduplicated() || !rs[5].GetEnqueued().GetDeduplicated() || rs[5].GetEnqueued().GetId() != rs[3].GetEnqueued().GetId() {
		t.Fatalf("two items with one key: %v, %v; want the second deduplicated to the first", rs[3], rs[5])
	}
	q := db.As(engine.Caller{ID: "root"}).Queue(engine.NS("acme", "prod"), "q")
	if n, err := q.Counts(ctx); err != nil || n.Ready != 2 {
		t.Fatalf("counts %+v %v; want the 2 tasks of items 0 and 3", n, err)
	}
	if task, err := q.Get(ctx, rs[0].GetEnqueued().GetId()); err != nil || string(task.Payload) != `{"n":0}` {
		t.Fatalf("item 0's task: %+v %v", task, err)
	}
}

// TestEachCallsOnLeasesRunEachItemAlone: CompleteEach, FailEach,
// HeartbeatEach and CompleteAndClaimEach fence each lease on its own: a
// forged lease fails with the single call's answer, the others take
// effect.
func TestEachCallsOnLeasesRunEachItemAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := newTestServer(t, nil, Options{})
	url := rpcServer(t, s)
	q := db.Queue(engine.NS("acme", "prod"), "q")
	for range 10 {
		if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := q.Claim(ctx, "w", time.Minute, 9)
	if err != nil {
		t.Fatal(err)
	}
	ref := func(l engine.Lease) *v1.LeaseRef { return wire.PBLeaseRef(l) }
	forged := ref(ls[8])
	forged.Token++
	p, single := pipelineStub(url, ""), newStubs(url, "")
	gone := func(id uint64) bool {
		_, err := q.Get(ctx, id)
		return errors.Is(err, engine.ErrNotFound)
	}

	// Complete: leases 0 and 1.
	cr, err := p.CompleteEach(ctx, connect.NewRequest(&v1.CompleteEachRequest{Items: []*v1.CompleteRequest{
		{Namespace: acme, Queue: "q", Lease: ref(ls[0])}, {Namespace: acme, Queue: "q", Lease: forged},
		{Namespace: acme, Queue: "q", Lease: ref(ls[1])}}}))
	if err != nil {
		t.Fatal(err)
	}
	_, aloneErr := single.q.Complete(ctx, connect.NewRequest(&v1.CompleteRequest{Namespace: acme, Queue: "q", Lease: forged}))
	sameAnswer(t, "a forged completion", cr.Msg.Results[1].GetError(), aloneErr)
	if cr.Msg.Results[0].GetError() != nil || cr.Msg.Results[2].GetError() != nil || !gone(ls[0].ID) || !gone(ls[1].ID) {
		t.Fatalf("completions: %v", cr.Msg.Results)
	}

	// Fail: lease 2.
	fr, err := p.FailEach(ctx, connect.NewRequest(&v1.FailEachRequest{Items: []*v1.FailRequest{
		{Namespace: acme, Queue: "q", Lease: forged, Failure: &v1.Failure{Error: "x"}},
		{Namespace: acme, Queue: "q", Lease: ref(ls[2]), Failure: &v1.Failure{Error: "boom", Permanent: true}}}}))
	if err != nil {
		t.Fatal(err)
	}
	_, aloneErr = single.q.Fail(ctx, connect.NewRequest(&v1.FailRequest{Namespace: acme, Queue: "q", Lease: forged, Failure: &v1.Failure{Error: "x"}}))
	sameAnswer(t, "a forged failure", fr.Msg.Results[0].GetError(), aloneErr)
	if info, err := q.Get(ctx, ls[2].ID); err != nil || fr.Msg.Results[1].GetError() != nil || info.State != engine.Dead || info.LastError != "boom" {
		t.Fatalf("a failure: %v %+v %v", fr.Msg.Results, info, err)
	}

	// Heartbeat: lease 3.
	hr, err := p.HeartbeatEach(ctx, connect.NewRequest(&v1.HeartbeatEachRequest{Items: []*v1.HeartbeatRequest{
		{Namespace: acme, Queue: "q", Lease: ref(ls[3]), Extend: durationpb.New(time.Hour), Progress: []byte(`{"p":1}`)},
		{Namespace: acme, Queue: "q", Lease: forged, Extend: durationpb.New(time.Hour)}}}))
	if err != nil {
		t.Fatal(err)
	}
	_, aloneErr = single.q.Heartbeat(ctx, connect.NewRequest(&v1.HeartbeatRequest{Namespace: acme, Queue: "q", Lease: forged, Extend: durationpb.New(time.Hour)}))
	sameAnswer(t, "a forged heartbeat", hr.Msg.Results[1].GetError(), aloneErr)
	info, err := q.Get(ctx, ls[3].ID)
	if err != nil || hr.Msg.Results[0].GetError() != nil || !info.LeaseUntil.Equal(hr.Msg.Results[0].GetDeadline().AsTime()) ||
		!info.LeaseUntil.After(ls[3].Deadline.Add(30*time.Minute)) || string(info.Progress) != `{"p":1}` {
		t.Fatalf("a heartbeat: %v %+v %v", hr.Msg.Results, info, err)
	}

	// CompleteAndClaim: leases 4 and 5, each claiming the one task left
	// at most: one gets it.
	ccr, err := p.CompleteAndClaimEach(ctx, connect.NewRequest(&v1.CompleteAndClaimEachRequest{Items: []*v1.CompleteAndClaimRequest{
		{Namespace: acme, Queue: "q", Lease: ref(ls[4]), Owner: "w2", ClaimLease: durationpb.New(time.Minute), Max: 1},
		{Namespace: acme, Queue: "q", Lease: forged, Owner: "w2", ClaimLease: durationpb.New(time.Minute), Max: 1},
		{Namespace: acme, Queue: "q", Lease: ref(ls[5]), Owner: "w2", ClaimLease: durationpb.New(time.Minute), Max: 1}}}))
	if err != nil {
		t.Fatal(err)
	}
	_, aloneErr = single.q.Complete(ctx, connect.NewRequest(&v1.CompleteRequest{Namespace: acme, Queue: "q", Lease: forged}))
	sameAnswer(t, "a forged completion that claims", ccr.Msg.Results[1].GetError(), aloneErr)
	r0, r2 := ccr.Msg.Results[0], ccr.Msg.Results[2]
	if r0.GetError() != nil || r2.GetError() != nil || len(r0.GetLeases())+len(r2.GetLeases()) != 1 || !gone(ls[4].ID) || !gone(ls[5].ID) {
		t.Fatalf("completions that claim: %v", ccr.Msg.Results)
	}
	// Invalid arguments of one item: its own refusal.
	bad := &v1.CompleteAndClaimRequest{Namespace: acme, Queue: "q", Lease: ref(ls[6]), Owner: "w2", ClaimLease: &durationpb.Duration{Nanos: -1}, Max: 1}
	ccr, err = p.CompleteAndClaimEach(ctx, connect.NewRequest(&v1.CompleteAndClaimEachRequest{Items: []*v1.CompleteAndClaimRequest{bad}}))
	if err != nil {
		t.Fatal(err)
	}
	_, aloneErr = p.CompleteAndClaim(ctx, connect.NewRequest(bad))
	sameAnswer(t, "a completion that claims with a malformed lease", ccr.Msg.Results[0].GetError(), aloneErr)
}

// TestEachRefusesTooManyItems: an Each call of more than MaxEachItems
// items is refused whole before any runs; one of a million empty items
// (2 bytes each) is refused by the codec before it is decoded, in
// protobuf and in JSON.
func TestEachRefusesTooManyItems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := newTestServer(t, nil, Options{})
	url := rpcServer(t, s)
	p := pipelineStub(url, "")
	items := func(n int) []*v1.EnqueueRequest {
		out := make([]*v1.EnqueueRequest, n)
		for i := range out {
			out[i] = &v1.EnqueueRequest{Namespace: acme, Queue: "q", Task: &v1.Task{}}
		}
		return out
	}
	_, err := p.EnqueueEach(ctx, connect.NewRequest(&v1.EnqueueEachRequest{Items: items(MaxEachItems + 1)}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !errors.Is(wire.FromConnect(err), engine.ErrInvalid) ||
		!strings.Contains(err.Error(), fmt.Sprint(MaxEachItems+1)) {
		t.Fatalf("%d items: %v", MaxEachItems+1, err)
	}
	refs := make([]*v1.CompleteRequest, MaxEachItems+1)
	for i := range refs {
		refs[i] = &v1.CompleteRequest{Namespace: acme, Queue: "q", Lease: &v1.LeaseRef{Id: uint64(i + 1)}}
	}
	if _, err := p.CompleteEach(ctx, connect.NewRequest(&v1.CompleteEachRequest{Items: refs})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("%d completions: %v", len(refs), err)
	}
	if st := db.Stats(); st.Commits != 0 {
		t.Fatalf("a refused call committed: %+v", st)
	}
	res, err := p.EnqueueEach(ctx, connect.NewRequest(&v1.EnqueueEachRequest{Items: items(MaxEachItems)}))
	if err != nil || len(res.Msg.Results) != MaxEachItems {
		t.Fatalf("%d items: %v", MaxEachItems, err)
	}

	const million = 1_000_000
	var pb []byte
	for range million {
		pb = protowire.AppendTag(pb, 1, protowire.BytesType)
		pb = protowire.AppendVarint(pb, 0)
	}
	js := []byte(`{"items":[` + strings.Repeat(`{},`, million-1) + `{}]}`)
	for _, body := range []struct {
		contentType string
		b           []byte
	}{{"application/proto", pb}, {"application/json", js}} {
		code, out, _ := post(t, url+"/docket.v1.Pipeline/EnqueueEach", body.contentType, bytes.NewReader(body.b))
		if code != http.StatusBadRequest || !strings.Contains(out, "invalid_argument") {
			t.Fatalf("a million items in %s: %d %.200s", body.contentType, code, out)
		}
	}
	if n, err := db.Queue(engine.NS("acme", "prod"), "q").Counts(ctx); err != nil || n.Ready != MaxEachItems {
		t.Fatalf("counts %+v %v; want the %d of the accepted call", n, err, MaxEachItems)
	}
}

// TestEnqueueEachOverJSON: a JSON caller (curl) gets one result per item,
// the payloads kept as JSON, an error as connect names its code.
func TestEnqueueEachOverJSON(t *testing.T) {
	t.Parallel()
	s, db := newTestServer(t, nil, Options{})
	url := rpcServer(t, s)
	code, body, _ := post(t, url+"/docket.v1.Pipeline/EnqueueEach", "application/json", strings.NewReader(
		`{"items":[{"namespace":{"project":"acme","scope":"prod"},"queue":"emails","task":{"payload":{"to":"a@b"}}},`+
			`{"namespace":{"project":"acme","scope":"prod"},"queue":"","task":{}}]}`))
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var out struct {
		Results []struct {
			Enqueued *struct{ ID string }
			Error    *struct {
				Code, Message string
				Detail        *struct{ Sentinel string }
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(out.Results) != 2 || out.Results[0].Enqueued == nil || out.Results[0].Error != nil || out.Results[1].Error == nil ||
		out.Results[1].Error.Code != "invalid_argument" || out.Results[1].Error.Detail == nil || out.Results[1].Error.Detail.Sentinel != "SENTINEL_INVALID" {
		t.Fatalf("answer %s", body)
	}
	task, err := db.Queue(engine.NS("acme", "prod"), "emails").Get(context.Background(), 1)
	if err != nil || string(task.Payload) != `{"to":"a@b"}` || out.Results[0].Enqueued.ID != "1" {
		t.Fatalf("the task: %+v %v (answer %s)", task, err, body)
	}
}

// TestEachItemOnAFollowerNamesTheLeader: on a follower each item is
// refused as the single call is, saying nothing was taken and naming the
// leader, so that the client sends it there.
func TestEachItemOnAFollowerNamesTheLeader(t *testing.T) {
	t.Parallel()
	_, _, leaderURL := nodeServer(t, &testLog{}, &testCluster{}, Options{})
	_, _, followerURL := nodeServer(t, &testLog{notLeader: true}, &testCluster{leaderURL: leaderURL}, Options{})
	item := &v1.EnqueueRequest{Namespace: acme, Queue: "jobs", Task: &v1.Task{}}
	res, err := pipelineStub(followerURL, "").EnqueueEach(clusterCtx(t), connect.NewRequest(&v1.EnqueueEachRequest{Items: []*v1.EnqueueRequest{item, item}}))
	if err != nil {
		t.Fatal(err)
	}
	_, alone := newStubs(followerURL, "").q.Enqueue(clusterCtx(t), connect.NewRequest(item))
	for i, r := range res.Msg.Results {
		sameAnswer(t, fmt.Sprintf("item %d on a follower", i), r.GetError(), alone)
		if r.GetError().GetLeader() != leaderURL || r.GetError().GetUnavailable() == "" {
			t.Fatalf("item %d: %v", i, r.GetError())
		}
	}
}

// TestEachItemThatPanicsFailsAlone: a panic while one item runs is that
// item's Internal error, logged; the others run.
func TestEachItemThatPanicsFailsAlone(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	s, _ := newTestServer(t, nil, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	var mu sync.Mutex
	ran := map[int]bool{}
	failed := map[int]error{}
	s.eachParallelDo(context.Background(), "/p", 100, func(i int) error {
		if i == 42 {
			panic("boom")
		}
		mu.Lock()
		defer mu.Unlock()
		ran[i] = true
		return nil
	}, func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed[i] = err
	})
	if len(ran) != 99 || len(failed) != 1 || connect.CodeOf(failed[42]) != connect.CodeInternal {
		t.Fatalf("ran %d, failed %v", len(ran), failed)
	}
	lines := logs.lines(t)
	if len(lines) != 1 || lines[0]["panic"] != "boom" || lines[0]["item"] != float64(42) {
		t.Fatalf("the panic was not logged with its item: %v", lines)
	}
}

// durableServer serves a DB with a directory, syncing every commit, whose
// fsyncs fail once failSyncs is set.
func durableServer(t *testing.T) (url string, db *engine.DB, failSyncs *atomic.Bool) {
	t.Helper()
	failSyncs = new(atomic.Bool)
	opts := engine.Options{Logger: slog.New(slog.DiscardHandler)}
	enginetest.FS(&opts, errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpSync && strings.Contains(op.Path, "wal") && failSyncs.Load() {
			return errors.New("disk gone")
		}
		return nil
	})))
	db, err := engine.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return rpcServer(t, New(db, Options{Logger: slog.New(slog.DiscardHandler)})), db, failSyncs
}

// claimRefs enqueues n tasks on q and claims them, as lease references.
func claimRefs(t *testing.T, q engine.Queue, n int) []*v1.LeaseRef {
	t.Helper()
	ctx := context.Background()
	for range n {
		if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := q.Claim(ctx, "w", time.Minute, n)
	if err != nil || len(ls) != n {
		t.Fatalf("claim: %d leases, %v", len(ls), err)
	}
	refs := make([]*v1.LeaseRef, n)
	for i, l := range ls {
		refs[i] = wire.PBLeaseRef(l)
	}
	return refs
}

// TestEachCallsOnLeasesShareOneSync: the items of one CompleteEach or
// CompleteAndClaimEach request commit one by one but wait for the log
// together, so one fsync makes the whole request durable.
func TestEachCallsOnLeasesShareOneSync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, db, _ := durableServer(t)
	q := db.Queue(engine.NS("acme", "prod"), "q")
	const n = 40
	refs := claimRefs(t, q, n)
	p := pipelineStub(url, "")

	syncs := db.Stats().LogSyncs
	items := make([]*v1.CompleteRequest, n/2)
	for i := range items {
		items[i] = &v1.CompleteRequest{Namespace: acme, Queue: "q", Lease: refs[i]}
	}
	cr, err := p.CompleteEach(ctx, connect.NewRequest(&v1.CompleteEachRequest{Items: items}))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range cr.Msg.Results {
		if r.GetError() != nil {
			t.Fatalf("completion %d: %v", i, r.GetError())
		}
	}
	if got := db.Stats().LogSyncs - syncs; got != 1 {
		t.Fatalf("%d fsyncs for %d completions in one request, want 1", got, n/2)
	}

	syncs = db.Stats().LogSyncs
	ccItems := make([]*v1.CompleteAndClaimRequest, n/2)
	for i := range ccItems {
		ccItems[i] = &v1.CompleteAndClaimRequest{Namespace: acme, Queue: "q", Lease: refs[n/2+i], Owner: "w2",
			ClaimLease: durationpb.New(time.Minute), Max: 1}
	}
	ccr, err := p.CompleteAndClaimEach(ctx, connect.NewRequest(&v1.CompleteAndClaimEachRequest{Items: ccItems}))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range ccr.Msg.Results {
		if r.GetError() != nil {
			t.Fatalf("completion that claims %d: %v", i, r.GetError())
		}
	}
	if got := db.Stats().LogSyncs - syncs; got != 1 {
		t.Fatalf("%d fsyncs for %d completions that claim in one request, want 1", got, n/2)
	}
	if c, err := q.Counts(ctx); err != nil || c.Ready+c.InFlight != 0 {
		t.Fatalf("after every completion: %+v %v", c, err)
	}
}

// TestEachCallsOnLeasesWhenTheSyncFails: when the one sync of a request
// fails, every item whose answer rested on it (a success, a refusal) gets
// the failure, an item refused for its arguments keeps its own answer, and
// none is reported done.
func TestEachCallsOnLeasesWhenTheSyncFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, db, failSyncs := durableServer(t)
	q := db.Queue(engine.NS("acme", "prod"), "q")
	refs := claimRefs(t, q, 2)
	forged := proto.Clone(refs[1]).(*v1.LeaseRef)
	forged.Token++
	p := pipelineStub(url, "")
	failSyncs.Store(true)
	cr, err := p.CompleteEach(ctx, connect.NewRequest(&v1.CompleteEachRequest{Items: []*v1.CompleteRequest{
		{Namespace: acme, Queue: "q", Lease: refs[0]},
		{Namespace: acme, Queue: "q", Lease: forged},
		{Namespace: acme, Queue: "", Lease: refs[1]},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	rs := cr.Msg.Results
	wantSyncFailure(t, len(rs), func(i int) (*v1.ItemError, bool) { return rs[i].GetError(), rs[i].GetResult() != nil })
}

// TestEnqueueEachSharesOneSync: the items of one EnqueueEach are made
// durable by one fsync, led once every item is logged; when it fails,
// every item that was enqueued (and one deduplicated to it, whose answer
// rested on the same batch) gets the failure and no ID, and an item
// refused for its arguments keeps its own answer.
func TestEnqueueEachSharesOneSync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, db, failSyncs := durableServer(t)
	p := pipelineStub(url, "")
	const n = 20
	items := make([]*v1.EnqueueRequest, n)
	for i := range items {
		items[i] = &v1.EnqueueRequest{Namespace: acme, Queue: "q", Task: &v1.Task{Payload: []byte(`1`)}}
	}
	syncs := db.Stats().LogSyncs
	res, err := p.EnqueueEach(ctx, connect.NewRequest(&v1.EnqueueEachRequest{Items: items}))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Msg.Results {
		if r.GetError() != nil || r.GetEnqueued().GetId() == 0 {
			t.Fatalf("item %d: %v", i, r)
		}
	}
	if got := db.Stats().LogSyncs - syncs; got != 1 {
		t.Fatalf("%d fsyncs for %d enqueues in one request, want 1", got, n)
	}

	failSyncs.Store(true)
	res, err = p.EnqueueEach(ctx, connect.NewRequest(&v1.EnqueueEachRequest{Items: []*v1.EnqueueRequest{
		{Namespace: acme, Queue: "q", Task: &v1.Task{IdempotencyKey: "k"}},
		{Namespace: acme, Queue: "q", Task: &v1.Task{IdempotencyKey: "k"}},
		{Namespace: acme, Queue: "", Task: &v1.Task{}},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	rs := res.Msg.Results
	wantSyncFailure(t, len(rs), func(i int) (*v1.ItemError, bool) { return rs[i].GetError(), rs[i].GetEnqueued() != nil })
}

// wantSyncFailure checks the n = 3 results of a request whose one sync
// failed, item(i) giving result i's error and whether it carries an answer:
// the first two rested on the log and get its failure and no answer, the
// third, made without a queue, keeps its own InvalidArgument.
func wantSyncFailure(t *testing.T, n int, item func(i int) (*v1.ItemError, bool)) {
	t.Helper()
	if n != 3 {
		t.Fatalf("%d results for 3 items", n)
	}
	for i := range 2 {
		e, answered := item(i)
		if got := wire.ItemError(e); !errors.Is(wire.FromConnect(got), engine.ErrFailed) || answered {
			t.Fatalf("item %d: %v (answered %v), want the log's failure alone", i, got, answered)
		}
	}
	if e, _ := item(2); wire.ItemError(e) == nil || wire.ItemError(e).Code() != connect.CodeInvalidArgument {
		t.Fatalf("item without a queue: %v, want its own InvalidArgument", wire.ItemError(e))
	}
}
