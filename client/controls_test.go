package client

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// exerciseControls runs the queue controls and a unique enqueue on api,
// for exercise: a paused queue leases nothing, limits hold, bad input is
// the engine's ErrInvalid.
func exerciseControls(t *testing.T, api engine.API, note func(string, ...any)) {
	ctx := context.Background()
	q := api.Queue(engine.NS("acme", "prod"), "controlled")
	if err := q.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	u := engine.Task{Kind: "mail", Payload: []byte(`{"to":"a","n":1}`), Unique: &engine.Unique{Window: time.Hour,
		States: []engine.State{engine.Ready, engine.Scheduled, engine.InFlight, engine.Dead}}}
	first := must(q.Enqueue(ctx, u))(t)
	u.Payload = []byte(`{ "n": 1, "to": "a" }`)
	dup := must(q.Enqueue(ctx, u))(t)
	if !dup.Deduplicated || dup.ID != first.ID {
		t.Fatalf("unique: %+v after %+v", dup, first)
	}
	must(q.EnqueueBatch(ctx, []engine.Task{{}, {}, {}}))(t)
	if ls := must(q.Claim(ctx, "w", time.Minute, 5))(t); len(ls) != 0 {
		t.Fatalf("a paused queue leased %+v", ls)
	}
	if err := q.SetLimits(ctx, engine.Limits{MaxInFlight: 3, Rate: 2, Per: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s := must(q.Settings(ctx))(t)
	note("settings %+v", s)
	if !s.Paused || s.Limits != (engine.Limits{MaxInFlight: 3, Rate: 2, Per: time.Hour, Burst: 2}) {
		t.Fatalf("settings %+v", s)
	}
	if err := q.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	ls := must(q.Claim(ctx, "w", time.Minute, 5))(t)
	note("claimed %d under the rate limit", len(ls))
	if len(ls) != 2 {
		t.Fatalf("under the rate limit: %+v", ls)
	}
	for _, c := range []struct {
		what string
		err  error
	}{
		{"limits", q.SetLimits(ctx, engine.Limits{Rate: 1})},
		{"unique states", second(q.Enqueue(ctx, engine.Task{Unique: &engine.Unique{Window: time.Hour, States: []engine.State{engine.Ready}}}))},
		{"unique window", second(q.Enqueue(ctx, engine.Task{Unique: &engine.Unique{}}))},
	} {
		wantErr(t, c.what, c.err, engine.ErrInvalid)
		note("%s: %v", c.what, c.err)
	}
	for _, qi := range must(api.Queues(ctx))(t) {
		if qi.Name == "controlled" {
			note("queue %s paused=%v limits=%+v", qi.Name, qi.Paused, qi.Limits)
		}
	}
	if err := q.SetLimits(ctx, engine.Limits{}); err != nil {
		t.Fatal(err)
	}
}

// TestPausedQueueOverTheClient: a client's ClaimWait on a paused queue
// waits (the server holds the poll in the engine's wait, which the
// queue's work does not wake) until a Resume sent through the client.
func TestPausedQueueOverTheClient(t *testing.T) {
	t.Parallel()
	db := memDB(t, engine.Options{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
	c := dial(t, srv.url, Options{})
	ns := engine.NS("acme", "prod")
	q := c.Queue(ns, "q")
	if err := q.Pause(ctx0); err != nil {
		t.Fatal(err)
	}
	task := must(q.Enqueue(ctx0, engine.Task{}))(t)
	got := make(chan []engine.Lease, 1)
	go func() {
		ls, err := q.ClaimWait(ctx0, "w", time.Minute, 1)
		if err != nil {
			t.Error(err)
		}
		got <- ls
	}()
	wctx, cancel := context.WithTimeout(ctx0, 10*time.Second)
	defer cancel()
	if err := db.WaitParked(wctx, ns, "q", 1); err != nil {
		t.Fatal(err)
	}
	must(q.Enqueue(ctx0, engine.Task{}))(t)
	// A commit that wakes a parked claim marks it awake before it returns.
	if n, _ := db.Parked(ns, "q"); n != 1 {
		t.Fatal("work on a paused queue woke the parked claim")
	}
	if err := q.Resume(ctx0); err != nil {
		t.Fatal(err)
	}
	select {
	case ls := <-got:
		if len(ls) != 1 || ls[0].ID != task.ID {
			t.Fatalf("after resume: %+v", ls)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Resume did not wake the claim")
	}
}

var ctx0 = context.Background()

// exercisePartitions runs partitioned tasks and the partition bound on
// api, for exercise: leases and Get name the partition, claims rotate and
// keep to the bound, Partitions pages through the partitions.
func exercisePartitions(t *testing.T, api engine.API, note func(string, ...any)) {
	ctx := context.Background()
	q := api.Queue(engine.NS("acme", "prod"), "parted")
	var ts []engine.Task
	for _, p := range []string{"big", "big", "big", "big", "a", "b", ""} {
		ts = append(ts, engine.Task{Partition: p})
	}
	must(q.EnqueueBatch(ctx, ts))(t)
	if err := q.SetLimits(ctx, engine.Limits{PartitionMaxInFlight: 2}); err != nil {
		t.Fatal(err)
	}
	note("partition limits %+v", must(q.Settings(ctx))(t).Limits)
	ls := must(q.Claim(ctx, "w", time.Minute, 10))(t)
	var got []string
	for _, l := range ls {
		got = append(got, l.Partition)
	}
	// Where the rotation over the partitions starts follows the number of
	// log records so far, which a server's runs of enqueues make smaller:
	// the set of partitions served is the API's, not their order.
	slices.Sort(got)
	note("claimed from partitions %q", got)
	if len(ls) != 5 {
		t.Fatalf("claimed %q", got)
	}
	i := slices.IndexFunc(ls, func(l engine.Lease) bool { return l.Partition == "a" })
	note("get: partition %q", must(q.Get(ctx, ls[i].ID))(t).Partition)
	page := must(q.Partitions(ctx, engine.PartitionListOptions{Limit: 2}))(t)
	note("partitions %+v", page)
	page = must(q.Partitions(ctx, engine.PartitionListOptions{Limit: 2, Cursor: page.Next}))(t)
	note("partitions %+v", page)
	_, err := q.Enqueue(ctx, engine.Task{Partition: "bad\x00"})
	wantErr(t, "partition", err, engine.ErrInvalid)
	note("partition: %v", err)
	err = q.SetLimits(ctx, engine.Limits{PartitionMaxInFlight: -1})
	wantErr(t, "partition bound", err, engine.ErrInvalid)
	note("partition bound: %v", err)
	// A partition rate limit: the settings carry it, and each partition's
	// bucket of one token gives one task (big, r and s have ready tasks).
	rated := engine.Limits{PartitionRate: 1, PartitionPer: time.Hour, PartitionBurst: 1}
	if err := q.SetLimits(ctx, rated); err != nil {
		t.Fatal(err)
	}
	if l := must(q.Settings(ctx))(t).Limits; l != rated {
		t.Fatalf("partition rate limits %+v, want %+v", l, rated)
	}
	must(q.EnqueueBatch(ctx, []engine.Task{{Partition: "r"}, {Partition: "r"}, {Partition: "s"}}))(t)
	ls = must(q.Claim(ctx, "w", time.Minute, 10))(t)
	got = got[:0]
	for _, l := range ls {
		got = append(got, l.Partition)
	}
	slices.Sort(got)
	note("claimed under a partition rate %q", got)
	if len(ls) != 3 {
		t.Fatalf("claimed under a partition rate %q", got)
	}
	err = q.SetLimits(ctx, engine.Limits{PartitionRate: 1})
	wantErr(t, "partition rate", err, engine.ErrInvalid)
	note("partition rate: %v", err)
	_, err = q.Partitions(ctx, engine.PartitionListOptions{Limit: engine.MaxBatch + 1})
	wantErr(t, "partitions page", err, engine.ErrInvalid)
	note("partitions page: %v", err)
}
