package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// A worker whose handler fails twice before it succeeds: each failure is
// retried after the task's backoff.
func ExampleWorker() {
	db, _ := engine.OpenInMemory(engine.Options{})
	defer db.Close()
	shop := engine.NS("shop", "prod")

	w := worker.New(db, worker.Options{})
	done := make(chan struct{})
	w.HandleFunc(shop, "charges", func(ctx context.Context, t *worker.Task) error {
		var charge struct{ Cents int }
		if err := t.Unmarshal(&charge); err != nil {
			return worker.Permanent(err) // a malformed task will never succeed
		}
		if t.Attempt < 3 {
			fmt.Printf("attempt %d: gateway timeout\n", t.Attempt)
			return errors.New("gateway timeout")
		}
		fmt.Printf("attempt %d: charged %d cents\n", t.Attempt, charge.Cents)
		close(done)
		return nil
	}, worker.QueueOptions{Concurrency: 4, Lease: time.Minute})

	db.Queue(shop, "charges").Enqueue(context.Background(), engine.Task{
		Payload:     []byte(`{"Cents":1250}`),
		MaxAttempts: 5,
		BackoffBase: time.Millisecond, // then 2 ms, 4 ms...
	})
	w.Start(context.Background())
	<-done
	w.Stop(context.Background()) // waits for the completion to commit
	n, _ := db.Queue(shop, "charges").Counts(context.Background())
	fmt.Printf("left in the queue: %d\n", n.Ready+n.Scheduled+n.InFlight+n.Dead)
	// Output:
	// attempt 1: gateway timeout
	// attempt 2: gateway timeout
	// attempt 3: charged 1250 cents
	// left in the queue: 0
}

// A transactional enqueue (an outbox): the order is written and its email
// enqueued in one commit, or neither is.
func Example_transactionalEnqueue() {
	ctx := context.Background()
	db, _ := engine.OpenInMemory(engine.Options{})
	defer db.Close()
	shop := engine.NS("shop", "prod")
	kv := db.KV(shop)

	placeOrder := func(id string) error {
		_, err := kv.Commit(ctx,
			engine.IfAbsent("order/"+id), // each order is placed once
			engine.Set("order/"+id, []byte(`"placed"`)),
			engine.Enqueue("emails", engine.Task{Kind: "confirmation", Payload: []byte(`{"order":"` + id + `"}`)}),
		)
		return err
	}
	fmt.Println("first:", placeOrder("A-1"))
	fmt.Println("again:", errors.Is(placeOrder("A-1"), engine.ErrConflict))

	w := worker.New(db, worker.Options{})
	sent := make(chan struct{})
	w.HandleFunc(shop, "emails", func(ctx context.Context, t *worker.Task) error {
		fmt.Printf("send %s for %s\n", t.Kind, t.Payload)
		t.AddOps(engine.Set("order/A-1", []byte(`"confirmed"`))) // commits with the completion
		close(sent)
		return nil
	}, worker.QueueOptions{})
	w.Start(ctx)
	<-sent
	w.Stop(ctx)
	e, _ := kv.Get(ctx, "order/A-1")
	fmt.Printf("order A-1: %s\n", e.Value)
	// Output:
	// first: <nil>
	// again: true
	// send confirmation for {"order":"A-1"}
	// order A-1: "confirmed"
}

// A three-step workflow: each step enqueues the next as a follow-up, in
// the same commit as its own completion, so a step runs only if the one
// before it completed, and exactly one next step exists per completion.
func ExampleTask_FollowUp() {
	ctx := context.Background()
	db, _ := engine.OpenInMemory(engine.Options{})
	defer db.Close()
	media := engine.NS("media", "prod")

	type image struct {
		URL   string
		Bytes int
	}
	step := func(name, next string, f func(*image)) worker.HandlerFunc {
		return func(ctx context.Context, t *worker.Task) error {
			var img image
			if err := t.Unmarshal(&img); err != nil {
				return worker.Permanent(err)
			}
			f(&img)
			fmt.Printf("%-7s %s (%d bytes)\n", name, img.URL, img.Bytes)
			if next != "" {
				payload, _ := json.Marshal(img)
				t.FollowUp(next, engine.Task{Payload: payload})
			}
			return nil
		}
	}
	published := make(chan struct{})
	w := worker.New(db, worker.Options{})
	w.Handle(media, "fetch", step("fetch", "resize", func(i *image) { i.Bytes = 4096 }), worker.QueueOptions{})
	w.Handle(media, "resize", step("resize", "publish", func(i *image) { i.Bytes /= 4 }), worker.QueueOptions{})
	w.Handle(media, "publish", step("publish", "", func(*image) { close(published) }), worker.QueueOptions{})

	db.Queue(media, "fetch").Enqueue(ctx, engine.Task{Payload: []byte(`{"URL":"https://example.com/cat.png"}`)})
	w.Start(ctx)
	<-published
	w.Stop(ctx)
	// Output:
	// fetch   https://example.com/cat.png (4096 bytes)
	// resize  https://example.com/cat.png (1024 bytes)
	// publish https://example.com/cat.png (1024 bytes)
}

// A periodic task: one report every quarter hour, however many workers run
// the schedule. The example drives a manual clock; a real program leaves
// Clock unset.
func ExampleWorker_Periodic() {
	ctx := context.Background()
	clock := engine.NewManualClock(time.Date(2030, 1, 2, 9, 5, 0, 0, time.UTC))
	db, _ := engine.OpenInMemory(engine.Options{Clock: clock})
	defer db.Close()
	ops := engine.NS("ops", "prod")

	w := worker.New(db, worker.Options{Clock: clock})
	err := w.Periodic(ops, "reports", "*/15 * * * *", engine.Task{Kind: "usage-report"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ran := make(chan struct{})
	w.HandleFunc(ops, "reports", func(ctx context.Context, t *worker.Task) error {
		tick, _ := strconv.ParseInt(t.Headers[worker.PeriodicTickHeader], 10, 64)
		fmt.Printf("%s for %s\n", t.Kind, time.Unix(tick, 0).UTC().Format("15:04"))
		ran <- struct{}{}
		return nil
	}, worker.QueueOptions{Lease: time.Hour}) // longer than a jump of the clock below: a lease ends at its deadline
	w.Start(ctx)

	clock.Advance(10 * time.Minute) // 09:15
	<-ran
	clock.Advance(15 * time.Minute) // 09:30
	<-ran
	w.Stop(ctx)
	// Output:
	// usage-report for 09:15
	// usage-report for 09:30
}

// Welcome is the arguments of a "welcome" task: its JSON encoding is the
// task's payload.
type Welcome struct {
	User  string `json:"user"`
	Email string `json:"email"`
}

func (Welcome) Kind() string { return "welcome" }

// Reminder is the arguments of a "reminder" task.
type Reminder struct {
	User string `json:"user"`
}

func (Reminder) Kind() string { return "reminder" }

// Handlers and producers with their own types: HandleArgs routes each kind
// of a Mux to a handler that receives its arguments decoded, and Enqueue and
// NewTask turn arguments into tasks (here, a follow-up committed with the
// completion).
func Example_typed() {
	ctx := context.Background()
	db, _ := engine.OpenInMemory(engine.Options{})
	defer db.Close()
	app := engine.NS("app", "prod")

	done := make(chan struct{})
	mux := worker.NewMux()
	worker.HandleArgs(mux, func(ctx context.Context, j *worker.Job[Welcome]) error {
		fmt.Printf("welcome %s at %s\n", j.Args.User, j.Args.Email)
		later, err := worker.NewTask(Reminder{User: j.Args.User}, engine.Task{Priority: 1})
		if err != nil {
			return err
		}
		j.FollowUp("mail", later)
		return nil
	})
	worker.HandleArgs(mux, func(ctx context.Context, j *worker.Job[Reminder]) error {
		fmt.Printf("remind %s (payload %s)\n", j.Args.User, j.Payload)
		close(done)
		return nil
	})
	w := worker.New(db, worker.Options{})
	w.Handle(app, "mail", mux, worker.QueueOptions{})

	worker.Enqueue(ctx, db.Queue(app, "mail"), Welcome{User: "ada", Email: "ada@example.com"}, engine.Task{})
	w.Start(ctx)
	<-done
	w.Stop(ctx)
	// Output:
	// welcome ada at ada@example.com
	// remind ada (payload {"user":"ada"})
}
