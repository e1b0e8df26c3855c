package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/bytesize"
)

// TestOverviewShowsMemory: the overview shows the state's memory against
// its budget, alarmed past 80%, and the namespaces that hold most; a
// caller's view shows neither.
func TestOverviewShowsMemory(t *testing.T) {
	e := newEnv(t, Options{}, func(o *engine.Options) { o.MaxMemory = 64 << 10 })
	payload := []byte(`"` + strings.Repeat("x", 1022) + `"`)
	for range 20 {
		e.enqueue(e.queue("big"), engine.Task{Payload: payload})
	}
	e.enqueue(e.db.Queue(engine.NS("acme", "small"), "q"), engine.Task{})
	body := e.mustGet("/docket/")
	mustContain(t, body, `class="card mem opt"`, "of 64.0 KiB", "Memory by namespace", "acme/prod", "acme/small")
	if strings.Index(body, "acme/prod") > strings.Index(body, "acme/small</th>") {
		t.Fatal("the namespaces are not listed largest first")
	}
	for range 30 {
		if _, err := e.queue("big").Enqueue(ctx, engine.Task{Payload: payload}); err != nil {
			break
		}
	}
	mustContain(t, e.mustGet("/docket/"), `class="card mem opt alarm"`)

	e.serve(e.db.As(engine.Caller{ID: "viewer"}), Options{})
	mustNotContain(t, e.mustGet("/docket/"), "Memory by namespace", `class="card mem`)
}

// TestOverviewShowsTheValueLog: a DB keeping values on disk shows the
// value log's size on the overview, with its live bytes and what
// compaction would reclaim once a task is completed; a DB without one
// shows no such card.
func TestOverviewShowsTheValueLog(t *testing.T) {
	e := &env{t: t, clock: engine.NewManualClock(t0)}
	db, err := engine.Open(t.TempDir(), engine.Options{Clock: e.clock, ValueThreshold: 64, Durability: engine.SyncNever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e.db = db
	e.serve(db, Options{})
	q := db.Queue(ns, "q")
	e.enqueue(q, engine.Task{Payload: []byte(`"` + strings.Repeat("x", 4096) + `"`)})
	e.enqueue(q, engine.Task{Payload: []byte(`"` + strings.Repeat("y", 4096) + `"`)})
	reclaim := func() string {
		st := db.Stats()
		return fmt.Sprintf(`%s live, %s to reclaim`, bytesize.Format(st.ValueLiveBytes), bytesize.Format(st.ValueLogBytes-st.ValueLiveBytes))
	}
	before := reclaim()
	mustContain(t, e.mustGet("/docket/"), `<span class="l">value log</span>`, before)
	ls, err := q.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 {
		t.Fatal(len(ls), err)
	}
	if _, err := q.Complete(ctx, ls[0], engine.Done{}); err != nil {
		t.Fatal(err)
	}
	after := reclaim()
	if after == before {
		t.Fatalf("a completed task's value is still counted live: %s", after)
	}
	mustContain(t, e.mustGet("/docket/"), after)

	mem := newEnv(t, Options{})
	mustNotContain(t, mem.mustGet("/docket/"), `<span class="l">value log</span>`)
}
