package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/docketdb/docket/engine"
)

// Open a data directory, enqueue, close, and find the task again after
// reopening: what Enqueue acknowledged survives a restart (and a crash).
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "docket-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := engine.Open(dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	q := db.Queue(engine.NS("acme", "prod"), "emails")
	if _, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`{"to":"a@example.com"}`)}); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	db, err = engine.Open(dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	n, err := db.Queue(engine.NS("acme", "prod"), "emails").Counts(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready after reopening:", n.Ready)
	// Output:
	// ready after reopening: 1
}

// Enqueue with a delay, a priority and an idempotency key. A manual clock
// stands in for time passing.
func ExampleQueue_Enqueue() {
	ctx := context.Background()
	clock := engine.NewManualClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	db, err := engine.OpenInMemory(engine.Options{Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(engine.NS("acme", "prod"), "emails")

	t := engine.Task{Payload: []byte(`{"to":"a@example.com"}`), Delay: time.Minute, Priority: 5, IdempotencyKey: "welcome-42"}
	first, err := q.Enqueue(ctx, t)
	if err != nil {
		log.Fatal(err)
	}
	again, err := q.Enqueue(ctx, t) // a retried request: same key, same task
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deduplicated:", again.Deduplicated, "same task:", again.ID == first.ID)

	leases, _ := q.Claim(ctx, "worker-1", 30*time.Second, 10)
	fmt.Println("claimable now:", len(leases))
	clock.Advance(time.Minute)
	leases, _ = q.Claim(ctx, "worker-1", 30*time.Second, 10)
	fmt.Println("claimable a minute later:", len(leases))
	// Output:
	// deduplicated: true same task: true
	// claimable now: 0
	// claimable a minute later: 1
}

// Claim leases tasks; Fail retries one after its backoff, and dead-letters
// it once its attempts are spent.
func ExampleQueue_Claim() {
	ctx := context.Background()
	clock := engine.NewManualClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	db, err := engine.OpenInMemory(engine.Options{Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(engine.NS("acme", "prod"), "emails")
	q.Enqueue(ctx, engine.Task{Payload: []byte(`"hello"`), MaxAttempts: 2, BackoffBase: time.Second})

	for range 2 {
		leases, err := q.Claim(ctx, "worker-1", 30*time.Second, 1)
		if err != nil {
			log.Fatal(err)
		}
		l := leases[0]
		fmt.Printf("attempt %d of %d: %s\n", l.Attempt, l.MaxAttempts, l.Payload)
		if err := q.Fail(ctx, l, engine.Failure{Err: "smtp 451"}); err != nil {
			log.Fatal(err)
		}
		clock.Advance(time.Second) // the backoff after the first attempt
	}
	n, _ := q.Counts(ctx)
	fmt.Println("dead:", n.Dead)
	page, _ := q.List(ctx, engine.ListOptions{State: engine.Dead})
	fmt.Println("last error:", page.Tasks[0].LastError)
	// Output:
	// attempt 1 of 2: "hello"
	// attempt 2 of 2: "hello"
	// dead: 1
	// last error: smtp 451
}

// Complete acknowledges a lease, writes KV state and enqueues the next step
// in one commit fenced by the lease: a worker whose lease was lost changes
// nothing.
func ExampleQueue_Complete() {
	ctx := context.Background()
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ns := engine.NS("acme", "prod")
	q := db.Queue(ns, "emails")
	q.Enqueue(ctx, engine.Task{Payload: []byte(`{"user":42}`)})

	leases, err := q.Claim(ctx, "worker-1", 30*time.Second, 1)
	if err != nil {
		log.Fatal(err)
	}
	l := leases[0]
	res, err := q.Complete(ctx, l, engine.Done{
		Ops:       []engine.Op{engine.Set("user/42/welcomed", []byte("sent"))},
		FollowUps: []engine.FollowUp{{Queue: "audit", Task: engine.Task{Payload: l.Payload}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("follow-ups enqueued:", len(res.Enqueued))
	e, _ := db.KV(ns).Get(ctx, "user/42/welcomed")
	fmt.Printf("user/42/welcomed = %s\n", e.Value)
	n, _ := db.Queue(ns, "audit").Counts(ctx)
	fmt.Println("audit ready:", n.Ready)

	// The same lease again: the task is gone, so the lease is stale.
	_, err = q.Complete(ctx, l, engine.Done{})
	fmt.Println("second completion is ErrLeaseLost:", errors.Is(err, engine.ErrLeaseLost))
	// Output:
	// follow-ups enqueued: 1
	// user/42/welcomed = sent
	// audit ready: 1
	// second completion is ErrLeaseLost: true
}

// The outbox: the program's own state change and the task that announces it
// commit together, or neither does.
func Example_outbox() {
	ctx := context.Background()
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ns := engine.NS("shop", "prod")
	orders := db.Queue(ns, "order-placed")

	// Place order 7 once: the order record must not exist yet.
	place := func() error {
		_, err := orders.Enqueue(ctx, engine.Task{Payload: []byte(`{"order":7}`)},
			engine.IfAbsent("order/7"), engine.Set("order/7", []byte(`{"total":30}`)))
		return err
	}
	fmt.Println("first:", place())
	err = place()
	fmt.Println("second is ErrConflict:", errors.Is(err, engine.ErrConflict))
	n, _ := orders.Counts(ctx)
	fmt.Println("announcements queued:", n.Ready)
	// Output:
	// first: <nil>
	// second is ErrConflict: true
	// announcements queued: 1
}

// KV entries carry a version; IfVersion makes a read-modify-write safe
// against a concurrent writer.
func ExampleKV() {
	ctx := context.Background()
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	kv := db.KV(engine.NS("acme", "prod"))

	kv.Commit(ctx, engine.Set("counter/a", []byte("1")), engine.Set("counter/b", []byte("5")))
	e, _ := kv.Get(ctx, "counter/a")

	// Someone else writes the key in between.
	kv.Commit(ctx, engine.Set("counter/a", []byte("10")))

	_, err = kv.Commit(ctx, engine.IfVersion("counter/a", e.Version), engine.Set("counter/a", []byte("2")))
	fmt.Println("stale write is ErrConflict:", errors.Is(err, engine.ErrConflict))

	entries, _ := kv.Scan(ctx, engine.ScanOptions{Prefix: "counter/"})
	for _, e := range entries {
		fmt.Printf("%s = %s\n", e.Key, e.Value)
	}
	// Output:
	// stale write is ErrConflict: true
	// counter/a = 10
	// counter/b = 5
}
