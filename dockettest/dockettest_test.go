package dockettest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/dockettest"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

var (
	bg = context.Background()
	ns = engine.NS("shop", "test")
)

type receipt struct {
	Order string `json:"order"`
	Cents int    `json:"cents"`
}

func (receipt) Kind() string { return "receipt" }

// fakeT records the failure of the helper it is given: Fatalf ends the
// goroutine, as a real test's does.
type fakeT struct {
	testing.TB // the real test: Cleanup, Helper
	failure    string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs f with a fakeT and returns how it failed ("" if it did not).
func failure(t *testing.T, f func(tb testing.TB)) string {
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ft)
	}()
	<-done
	return ft.failure
}

func wantFailure(t *testing.T, got string, parts ...string) {
	t.Helper()
	if got == "" {
		t.Fatal("the helper did not fail the test")
	}
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Fatalf("failure %q does not say %q", got, p)
		}
	}
}

// TestNew: the DB runs on a manual clock from Epoch (or the one given),
// refuses any other clock, and is closed when the test ends.
func TestNew(t *testing.T) {
	var db *dockettest.DB
	t.Run("open", func(t *testing.T) {
		db = dockettest.New(t, engine.Options{})
		if now := db.Clock().Now(); !now.Equal(dockettest.Epoch) {
			t.Fatalf("clock reads %v, want %v", now, dockettest.Epoch)
		}
		db.Advance(time.Hour)
		if now := db.Clock().Now(); !now.Equal(dockettest.Epoch.Add(time.Hour)) {
			t.Fatalf("clock reads %v after Advance", now)
		}
		res, err := db.Queue(ns, "q").Enqueue(bg, engine.Task{Delay: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if info, _ := db.Queue(ns, "q").Get(bg, res.ID); !info.NotBefore.Equal(dockettest.Epoch.Add(time.Hour + time.Minute)) {
			t.Fatalf("the engine does not read the DB's clock: %+v", info)
		}
	})
	if _, err := db.Queue(ns, "q").Counts(bg); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("the DB outlived its test: %v", err)
	}

	own := engine.NewManualClock(time.Date(2040, 5, 6, 7, 8, 9, 0, time.UTC))
	if db := dockettest.New(t, engine.Options{Clock: own}); db.ManualClock != own {
		t.Fatal("the given ManualClock was not used")
	}
	wantFailure(t, failure(t, func(tb testing.TB) { dockettest.New(tb, engine.Options{Clock: engine.SystemClock}) }),
		"must be a *engine.ManualClock")
	wantFailure(t, failure(t, func(tb testing.TB) { dockettest.New(tb, engine.Options{Durability: 99}) }),
		"dockettest:")
}

// TestWaitParked: WaitParked returns once a blocking claim waits, so the
// next Advance reaches it; it fails the test when none comes.
func TestWaitParked(t *testing.T) {
	db := dockettest.New(t, engine.Options{})
	q := db.Queue(ns, "q")
	if _, err := q.Enqueue(bg, engine.Task{Delay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	claimed := make(chan []engine.Lease, 1)
	go func() {
		ls, _ := q.ClaimWait(bg, "w", time.Minute, 1)
		claimed <- ls
	}()
	db.WaitParked(q, 1)
	db.Advance(time.Minute)
	select {
	case ls := <-claimed:
		if len(ls) != 1 {
			t.Fatalf("claimed %v", ls)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the parked claim did not wake when its task came due")
	}

	wantFailure(t, failure(t, func(tb testing.TB) {
		other := dockettest.New(tb, engine.Options{})
		other.Timeout = time.Millisecond
		other.WaitParked(other.Queue(ns, "idle"), 1)
	}), "0 of 1 claims parked on queue shop/test/idle")
}

// TestRequireEnqueued: tasks are found by args, kind, payload (as JSON),
// state, priority and headers; no match, two matches and a bad Want fail
// the test with what the queue holds.
func TestRequireEnqueued(t *testing.T) {
	db := dockettest.New(t, engine.Options{})
	q := db.Queue(ns, "mail")
	res, err := worker.Enqueue(bg, q, receipt{Order: "A-1", Cents: 1250}, engine.Task{Priority: 3, Headers: map[string]string{"tenant": "t1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(bg, engine.Task{Kind: "receipt", Payload: []byte(`{"cents": 99, "order": "B-2"}`), Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(bg, engine.Task{Kind: "other"}); err != nil {
		t.Fatal(err)
	}

	if got := dockettest.RequireEnqueued(t, q, dockettest.Want{Args: receipt{Order: "A-1", Cents: 1250}}); got.ID != res.ID {
		t.Fatalf("found task %d, want %d", got.ID, res.ID)
	}
	// Key order and spacing do not matter; state, priority and headers narrow.
	b := dockettest.RequireEnqueued(t, q, dockettest.Want{Kind: "receipt", Payload: `{"order":"B-2","cents":99}`})
	if b.State != engine.Scheduled {
		t.Fatalf("%+v", b)
	}
	dockettest.RequireEnqueued(t, q, dockettest.Want{Kind: "receipt", State: engine.Scheduled})
	dockettest.RequireEnqueued(t, q, dockettest.Want{Priority: 3})
	dockettest.RequireEnqueued(t, q, dockettest.Want{Headers: map[string]string{"tenant": "t1"}})
	dockettest.RequireNotEnqueued(t, q, dockettest.Want{Args: receipt{Order: "C-3"}})
	dockettest.RequireNotEnqueued(t, q, dockettest.Want{Kind: "other", State: engine.Dead})
	dockettest.RequireCounts(t, q, engine.Counts{Ready: 2, Scheduled: 1})

	wantFailure(t, failure(t, func(tb testing.TB) {
		dockettest.RequireEnqueued(tb, q, dockettest.Want{Args: receipt{Order: "A-1", Cents: 1}})
	}), `queue shop/test/mail has no task (kind "receipt", payload {"order":"A-1","cents":1}, ready or scheduled)`,
		`kind "receipt", ready, priority 3, payload {"order":"A-1","cents":1250}`, `kind "other"`)
	wantFailure(t, failure(t, func(tb testing.TB) { dockettest.RequireEnqueued(tb, q, dockettest.Want{Kind: "receipt"}) }),
		`has 2 tasks (kind "receipt", ready or scheduled), want one`)
	wantFailure(t, failure(t, func(tb testing.TB) { dockettest.RequireNotEnqueued(tb, q, dockettest.Want{Kind: "other"}) }),
		`has 1 tasks (kind "other", ready or scheduled), want none`)
	wantFailure(t, failure(t, func(tb testing.TB) {
		dockettest.RequireEnqueued(tb, q, dockettest.Want{Args: receipt{}, Payload: `{}`})
	}), "both Args and Payload")
	wantFailure(t, failure(t, func(tb testing.TB) { dockettest.RequireEnqueued(tb, q, dockettest.Want{Payload: `{`}) }),
		"Want.Payload is not JSON")
	wantFailure(t, failure(t, func(tb testing.TB) { dockettest.RequireCounts(tb, q, engine.Counts{Ready: 2}) }),
		"counts {Ready:2 Scheduled:1", "want {Ready:2 Scheduled:0")
}

// TestDrain: Drain runs a Worker's handler, middleware included, and
// DrainHandler a Mux, in the test's goroutine; outcomes are committed when
// they return, and a Worker that cannot drain fails the test.
func TestDrain(t *testing.T) {
	db := dockettest.New(t, engine.Options{})
	q := db.Queue(ns, "mail")
	w := worker.New(db, worker.Options{})
	var sent []string
	wrapped := 0
	w.Use(func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error {
			wrapped++
			return next.Work(ctx, tk)
		})
	})
	worker.Register(w, ns, "mail", func(ctx context.Context, j *worker.Job[receipt]) error {
		if j.Args.Cents == 0 {
			return errors.New("no amount")
		}
		sent = append(sent, j.Args.Order)
		return nil
	}, worker.QueueOptions{})
	for _, r := range []receipt{{"A-1", 10}, {"B-2", 0}, {"C-3", 30}} {
		if _, err := worker.Enqueue(bg, q, r, engine.Task{BackoffBase: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if n := dockettest.Drain(t, w, q); n != 3 || wrapped != 3 || strings.Join(sent, ",") != "A-1,C-3" {
		t.Fatalf("Drain ran %d (middleware %d), sent %v", n, wrapped, sent)
	}
	dockettest.RequireCounts(t, q, engine.Counts{Scheduled: 1})
	failed := dockettest.RequireEnqueued(t, q, dockettest.Want{Args: receipt{Order: "B-2"}, State: engine.Scheduled})
	if failed.LastError != "no amount" || !failed.NotBefore.Equal(dockettest.Epoch.Add(time.Minute)) {
		t.Fatalf("failed task %+v", failed)
	}
	if n := dockettest.Drain(t, w, q); n != 0 {
		t.Fatalf("a second Drain ran %d tasks before the retry was due", n)
	}

	mux := worker.NewMux()
	worker.HandleArgs(mux, func(ctx context.Context, j *worker.Job[receipt]) error { return nil })
	db.Advance(time.Minute)
	if n := dockettest.DrainHandler(t, mux, q); n != 1 {
		t.Fatalf("DrainHandler ran %d", n)
	}
	dockettest.RequireCounts(t, q, engine.Counts{})

	wantFailure(t, failure(t, func(tb testing.TB) { dockettest.Drain(tb, w, db.Queue(ns, "nothing")) }),
		"draining queue shop/test/nothing", "no handler")
	wantFailure(t, failure(t, func(tb testing.TB) { dockettest.DrainHandler(tb, mux, db.Queue(ns, "")) }),
		"draining queue shop/test/", "invalid")
}
