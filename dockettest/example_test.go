package dockettest_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/docketdb/docket/dockettest"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// Invoice is the arguments of the program's "invoice" tasks.
type Invoice struct {
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

func (Invoice) Kind() string { return "invoice" }

// checkout is the code under test: it enqueues an invoice.
func checkout(ctx context.Context, api engine.API, customer string, cents int) error {
	_, err := worker.Enqueue(ctx, api.Queue(engine.NS("shop", "prod"), "billing"), Invoice{customer, cents},
		engine.Task{BackoffBase: time.Minute})
	return err
}

// A test of a producer and its handler: what checkout enqueues is asserted,
// the queue is drained with the program's handler in the test's goroutine,
// and a failed attempt is retried by moving the clock. In a test, t is the
// test's *testing.T; here a stand-in prints what would fail it.
func Example() {
	t := &exampleT{}
	defer t.cleanup()
	ctx := context.Background()

	db := dockettest.New(t, engine.Options{})
	billing := db.Queue(engine.NS("shop", "prod"), "billing")
	if err := checkout(ctx, db, "ada", 1250); err != nil {
		t.Fatalf("checkout: %v", err)
	}
	dockettest.RequireEnqueued(t, billing, dockettest.Want{Args: Invoice{"ada", 1250}})

	w := worker.New(db, worker.Options{Logger: slog.New(slog.DiscardHandler)}) // the failure is expected
	gatewayUp := false
	worker.Register(w, billing.Namespace(), "billing", func(ctx context.Context, j *worker.Job[Invoice]) error {
		if !gatewayUp {
			return fmt.Errorf("gateway down")
		}
		fmt.Printf("charged %s %d cents on attempt %d\n", j.Args.Customer, j.Args.Cents, j.Attempt)
		return nil
	}, worker.QueueOptions{})

	fmt.Println("runs:", dockettest.Drain(t, w, billing))
	dockettest.RequireCounts(t, billing, engine.Counts{Scheduled: 1}) // waiting out its backoff
	gatewayUp = true
	db.Advance(time.Minute)
	fmt.Println("runs:", dockettest.Drain(t, w, billing))
	dockettest.RequireCounts(t, billing, engine.Counts{})
	// Output:
	// runs: 1
	// charged ada 1250 cents on attempt 2
	// runs: 1
}

// A started Worker parks on a blocking claim until its task's timer is
// due: WaitParked says when it is waiting, so that moving the clock reaches
// it, without a sleep.
func ExampleDB_WaitParked() {
	t := &exampleT{}
	defer t.cleanup()
	ctx := context.Background()
	db := dockettest.New(t, engine.Options{})
	ns := engine.NS("crm", "prod")
	reminders := db.Queue(ns, "reminders")

	w := worker.New(db, worker.Options{})
	done := make(chan string)
	w.HandleFunc(ns, "reminders", func(ctx context.Context, tk *worker.Task) error {
		done <- string(tk.Payload)
		return nil
	}, worker.QueueOptions{})
	reminders.Enqueue(ctx, engine.Task{Payload: []byte(`"call ada"`), Delay: time.Hour})
	w.Start(ctx)
	defer w.Stop(ctx)

	db.WaitParked(reminders, 1) // the Worker waits for the reminder's time
	db.Advance(time.Hour)
	fmt.Println(<-done)
	// Output: "call ada"
}

// exampleT stands in for a test's *testing.T in the examples: it prints
// a failure, and runs the cleanups when told.
type exampleT struct {
	testing.TB // not used: the methods the helpers call are below
	cleanups   []func()
}

func (t *exampleT) Helper()                   {}
func (t *exampleT) Cleanup(f func())          { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Fatalf(f string, a ...any) { fmt.Printf("FAIL: "+f+"\n", a...) }

func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
