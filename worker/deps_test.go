package worker_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// TestFollowUpFanOutFanIn: a handler fans out three follow-ups and fans
// back in with FollowUpAfter; the join task waits until all three have
// completed, then runs once, after them. An AddOps enqueue ahead of the
// follow-ups shifts nothing: indexes are the follow-ups' own.
func TestFollowUpFanOutFanIn(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
		e.sig.notify()
	}
	var joinID uint64
	w.HandleFunc(ns, "start", func(_ context.Context, tk *worker.Task) error {
		tk.AddOps(engine.Enqueue("audit", engine.Task{}))
		var parts []int
		for _, p := range []string{"a", "b", "c"} {
			parts = append(parts, tk.FollowUp("part", engine.Task{Payload: []byte(`"` + p + `"`)}))
		}
		tk.FollowUpAfter("join", engine.Task{DependsOn: []uint64{tk.ID}}, parts...)
		return nil
	}, worker.QueueOptions{})
	w.HandleFunc(ns, "part", func(_ context.Context, tk *worker.Task) error {
		note("part " + strings.Trim(string(tk.Payload), `"`))
		return nil
	}, worker.QueueOptions{})
	w.HandleFunc(ns, "join", func(_ context.Context, tk *worker.Task) error {
		joinID = tk.ID
		note("join")
		return nil
	}, worker.QueueOptions{})
	w.HandleFunc(ns, "audit", func(context.Context, *worker.Task) error { return nil }, worker.QueueOptions{})
	start := e.enqueue("start", engine.Task{})
	if err := w.Start(bg); err != nil {
		t.Fatal(err)
	}
	e.eventually("the join runs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 4
	})
	mu.Lock()
	defer mu.Unlock()
	if order[3] != "join" || !slices.Contains(order, "part a") || !slices.Contains(order, "part b") || !slices.Contains(order, "part c") {
		t.Fatalf("ran %v", order)
	}
	if joinID != start+5 { // audit, three parts, then the join
		t.Fatalf("join is task %d, start %d", joinID, start)
	}
}

// TestFollowUpAfterLaterIndexFails: waiting on a follow-up that is not an
// earlier one refuses the completion with ErrInvalid, and the attempt
// fails with it.
func TestFollowUpAfterLaterIndexFails(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	w.HandleFunc(ns, "q", func(_ context.Context, tk *worker.Task) error {
		tk.FollowUpAfter("next", engine.Task{}, 0)
		return nil
	}, worker.QueueOptions{})
	id := e.enqueue("q", engine.Task{MaxAttempts: 1})
	if err := w.Start(bg); err != nil {
		t.Fatal(err)
	}
	e.eventually("the attempt fails", func() bool {
		info, err := e.db.Queue(ns, "q").Get(bg, id)
		return err == nil && info.State == engine.Dead && strings.Contains(info.LastError, "invalid")
	})
	if n, _ := e.db.Queue(ns, "next").Counts(bg); n != (engine.Counts{}) {
		t.Fatalf("next: %+v", n)
	}
}
