package tracing_test

import (
	"context"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
	"github.com/docketdb/docket/worker/tracing"
)

// Tracing across a queue: the enqueue's span context travels in the task's
// headers and the handler's span continues the trace.
func Example() {
	ctx := context.Background()
	db, _ := engine.OpenInMemory(engine.Options{})
	defer db.Close()
	shop := engine.NS("shop", "prod")
	tr := tracing.New(tracing.Options{}) // the global tracer provider

	// In a request handler, with the request's span in ctx:
	tr.Enqueue(ctx, db.Queue(shop, "emails"), engine.Task{Kind: "receipt", Payload: []byte(`{"order":7}`)})

	w := worker.New(db, worker.Options{})
	w.Use(tr.Middleware())
	w.HandleFunc(shop, "emails", func(ctx context.Context, t *worker.Task) error {
		// ctx holds the handler's span, a child of the enqueue's.
		return nil
	}, worker.QueueOptions{})
	w.Run(ctx)
}
