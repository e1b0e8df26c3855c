package tracing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
	"github.com/docketdb/docket/worker/tracing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	bg = context.Background()
	ns = engine.NS("acme", "prod")
)

// recorder is a tracetest.SpanRecorder that tells of every span that ends.
type recorder struct {
	*tracetest.SpanRecorder
	ended chan struct{} // a span ended since the last look
}

func (r *recorder) OnEnd(s sdktrace.ReadOnlySpan) {
	r.SpanRecorder.OnEnd(s)
	select {
	case r.ended <- struct{}{}:
	default:
	}
}

func setup(t *testing.T) (*recorder, *tracing.Tracer, trace.Tracer) {
	rec := &recorder{SpanRecorder: tracetest.NewSpanRecorder(), ended: make(chan struct{}, 1)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(bg) })
	return rec, tracing.New(tracing.Options{TracerProvider: tp}), tp.Tracer("test")
}

// waitSpans waits until n spans have ended, looking again each time one
// ends.
func waitSpans(t *testing.T, rec *recorder, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	limit := time.NewTimer(5 * time.Second)
	defer limit.Stop()
	for {
		if spans := rec.Ended(); len(spans) >= n {
			return spans
		}
		select {
		case <-rec.ended:
		case <-limit.C:
			t.Fatalf("%d spans ended, want %d", len(rec.Ended()), n)
		}
	}
}

func attr(s sdktrace.ReadOnlySpan, k string) attribute.Value {
	for _, a := range s.Attributes() {
		if string(a.Key) == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

// TestTraceCrossesQueue: the enqueue span, the handler span and the handler
// span of a follow-up form one trace, each the parent of the next.
func TestTraceCrossesQueue(t *testing.T) {
	rec, tr, app := setup(t)
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	w := worker.New(db, worker.Options{Owner: "w"})
	w.Use(tr.Middleware())
	seen := make(chan trace.SpanContext, 2)
	w.HandleFunc(ns, "resize", func(ctx context.Context, tk *worker.Task) error {
		seen <- trace.SpanContextFromContext(ctx)
		tk.FollowUp("publish", engine.Task{Kind: "publish", Headers: map[string]string{"tenant": "t1"}})
		return nil
	}, worker.QueueOptions{})
	w.HandleFunc(ns, "publish", func(ctx context.Context, tk *worker.Task) error {
		if tk.Headers["tenant"] != "t1" {
			t.Errorf("headers %v", tk.Headers)
		}
		seen <- trace.SpanContextFromContext(ctx)
		return nil
	}, worker.QueueOptions{})

	ctx, root := app.Start(bg, "request")
	res, err := tr.Enqueue(ctx, db.Queue(ns, "resize"), engine.Task{Kind: "resize", Payload: []byte(`{}`)})
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(bg); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(bg)
	spans := waitSpans(t, rec, 4)
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	enq, step1, step2 := byName["docket.enqueue resize"], byName["docket.process resize"], byName["docket.process publish"]
	if enq == nil || step1 == nil || step2 == nil {
		t.Fatalf("spans %v", byName)
	}
	traceID := root.SpanContext().TraceID()
	for _, s := range []sdktrace.ReadOnlySpan{enq, step1, step2} {
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("%s is in trace %v, not %v", s.Name(), s.SpanContext().TraceID(), traceID)
		}
	}
	if enq.Parent().SpanID() != root.SpanContext().SpanID() || step1.Parent().SpanID() != enq.SpanContext().SpanID() ||
		step2.Parent().SpanID() != step1.SpanContext().SpanID() {
		t.Errorf("parents: enqueue<-%v process<-%v publish<-%v", enq.Parent().SpanID(), step1.Parent().SpanID(), step2.Parent().SpanID())
	}
	if !step1.Parent().IsRemote() || enq.SpanKind() != trace.SpanKindProducer || step1.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("kinds %v %v, remote parent %v", enq.SpanKind(), step1.SpanKind(), step1.Parent().IsRemote())
	}
	if h := recvSC(t, seen); h.SpanID() != step1.SpanContext().SpanID() {
		t.Errorf("the handler's context holds span %v", h.SpanID())
	}
	recvSC(t, seen)
	if got := attr(enq, "messaging.message.id").AsString(); got != "1" || res.ID != 1 {
		t.Errorf("message id %q", got)
	}
	if got := attr(step1, "docket.outcome").AsString(); got != "completed" || attr(step1, "docket.attempt").AsInt64() != 1 {
		t.Errorf("outcome %q attempt %d", got, attr(step1, "docket.attempt").AsInt64())
	}
}

func recvSC(t *testing.T, ch <-chan trace.SpanContext) trace.SpanContext {
	t.Helper()
	select {
	case sc := <-ch:
		return sc
	case <-time.After(5 * time.Second):
		t.Fatal("timed out")
	}
	return trace.SpanContext{}
}

// TestFailedRunSpan: a failed handler run ends its span with an error
// status; a batch enqueue puts every task in one span's trace.
func TestFailedRunSpan(t *testing.T) {
	rec, tr, _ := setup(t)
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tasks := []engine.Task{{Kind: "a", MaxAttempts: 1}, {Kind: "b", MaxAttempts: 1}}
	if _, err := tr.EnqueueBatch(bg, db.Queue(ns, "q"), tasks); err != nil {
		t.Fatal(err)
	}
	if tasks[0].Headers != nil {
		t.Fatal("EnqueueBatch changed the caller's tasks")
	}
	w := worker.New(db, worker.Options{Owner: "w"})
	w.Use(tr.Middleware())
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		return worker.Permanent(errors.New("no"))
	}, worker.QueueOptions{})
	if err := w.Start(bg); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(bg)
	spans := waitSpans(t, rec, 3)
	trace0 := spans[0].SpanContext().TraceID()
	for _, s := range spans {
		if s.SpanContext().TraceID() != trace0 {
			t.Errorf("%s in another trace", s.Name())
		}
		if s.Name() == "docket.process q" {
			if s.Status().Code != codes.Error || attr(s, "docket.outcome").AsString() != "permanent" {
				t.Errorf("status %v outcome %v", s.Status(), attr(s, "docket.outcome"))
			}
		}
	}
}

func TestInjectCopiesHeaders(t *testing.T) {
	_, tr, app := setup(t)
	ctx, span := app.Start(bg, "x")
	defer span.End()
	shared := map[string]string{"k": "v"}
	task := engine.Task{Headers: shared}
	tr.Inject(ctx, &task)
	if len(shared) != 1 || task.Headers["traceparent"] == "" || task.Headers["k"] != "v" {
		t.Fatalf("shared %v, task %v", shared, task.Headers)
	}
	got := trace.SpanContextFromContext(tr.Extract(bg, task.Headers))
	if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("round trip %v", got)
	}
}
