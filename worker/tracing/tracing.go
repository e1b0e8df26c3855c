package tracing

import (
	"context"
	"maps"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// ScopeName is the instrumentation scope of the spans this package starts.
const ScopeName = "github.com/docketdb/docket/worker/tracing"

// Options configure a Tracer. The zero value uses the global tracer
// provider and W3C trace context headers.
type Options struct {
	// TracerProvider makes the tracer. Default: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator writes and reads the trace context in task headers.
	// Default: propagation.TraceContext{} (traceparent, tracestate). The
	// global propagator is not the default because it does nothing unless
	// the program sets one.
	Propagator propagation.TextMapPropagator
}

// Tracer starts spans for enqueues and handler runs and carries their
// context in task headers. It is safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// New returns a Tracer.
func New(opts Options) *Tracer {
	if opts.TracerProvider == nil {
		opts.TracerProvider = otel.GetTracerProvider()
	}
	if opts.Propagator == nil {
		opts.Propagator = propagation.TraceContext{}
	}
	return &Tracer{tracer: opts.TracerProvider.Tracer(ScopeName), prop: opts.Propagator}
}

// Attribute keys of the spans, after OpenTelemetry's messaging conventions
// where they have one.
const (
	attrSystem    = attribute.Key("messaging.system")
	attrQueue     = attribute.Key("messaging.destination.name")
	attrMessageID = attribute.Key("messaging.message.id")
	attrOperation = attribute.Key("messaging.operation.type")
	attrBatchSize = attribute.Key("messaging.batch.message_count")
	attrNamespace = attribute.Key("docket.namespace")
	attrKind      = attribute.Key("docket.kind")
	attrAttempt   = attribute.Key("docket.attempt")
	attrOutcome   = attribute.Key("docket.outcome")
	attrDedup     = attribute.Key("docket.deduplicated")
)

// Inject stores the trace context of ctx in task.Headers. The map is
// copied first, so a map shared with other tasks is not changed.
func (t *Tracer) Inject(ctx context.Context, task *engine.Task) {
	h := make(map[string]string, len(task.Headers)+len(t.prop.Fields()))
	maps.Copy(h, task.Headers)
	t.prop.Inject(ctx, propagation.MapCarrier(h))
	task.Headers = h
}

// Extract returns ctx with the trace context stored in headers, if any.
func (t *Tracer) Extract(ctx context.Context, headers map[string]string) context.Context {
	return t.prop.Extract(ctx, propagation.MapCarrier(headers))
}

// carries reports whether headers already hold a trace context.
func (t *Tracer) carries(headers map[string]string) bool {
	for _, f := range t.prop.Fields() {
		if _, ok := headers[f]; ok {
			return true
		}
	}
	return false
}

func (t *Tracer) startEnqueue(ctx context.Context, q engine.Queue, n int) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{attrSystem.String("docket"), attrOperation.String("send"),
		attrQueue.String(q.Name()), attrNamespace.String(q.Namespace().String())}
	if n > 1 {
		attrs = append(attrs, attrBatchSize.Int(n))
	}
	return t.tracer.Start(ctx, "docket.enqueue "+q.Name(),
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
}

func failSpan(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// Enqueue is q.Enqueue inside a producer span whose context the task
// carries in its headers.
func (t *Tracer) Enqueue(ctx context.Context, q engine.Queue, task engine.Task, ops ...engine.Op) (engine.Enqueued, error) {
	ctx, span := t.startEnqueue(ctx, q, 1)
	defer span.End()
	if task.Kind != "" {
		span.SetAttributes(attrKind.String(task.Kind))
	}
	t.Inject(ctx, &task)
	res, err := q.Enqueue(ctx, task, ops...)
	if err != nil {
		failSpan(span, err)
		return res, err
	}
	span.SetAttributes(attrMessageID.String(strconv.FormatUint(res.ID, 10)), attrDedup.Bool(res.Deduplicated))
	return res, nil
}

// EnqueueBatch is q.EnqueueBatch inside one producer span whose context
// every task carries in its headers. tasks is not modified.
func (t *Tracer) EnqueueBatch(ctx context.Context, q engine.Queue, tasks []engine.Task, ops ...engine.Op) ([]engine.Enqueued, error) {
	ctx, span := t.startEnqueue(ctx, q, len(tasks))
	defer span.End()
	traced := make([]engine.Task, len(tasks))
	for i := range tasks {
		traced[i] = tasks[i]
		t.Inject(ctx, &traced[i])
	}
	res, err := q.EnqueueBatch(ctx, traced, ops...)
	if err != nil {
		failSpan(span, err)
	}
	return res, err
}

// Middleware returns worker middleware that runs each handler inside a
// consumer span, a child of the trace context in the task's headers. The
// span records the attempt and the outcome (worker.OutcomeOf), and an error
// status for failed runs and lost leases. Follow-ups that carry no trace
// context get the handler span's, so the next step joins the trace.
func (t *Tracer) Middleware() worker.Middleware {
	return func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, task *worker.Task) error {
			attrs := []attribute.KeyValue{attrSystem.String("docket"), attrOperation.String("process"),
				attrQueue.String(task.Queue), attrNamespace.String(task.Namespace.String()),
				attrMessageID.String(strconv.FormatUint(task.ID, 10)), attrAttempt.Int(task.Attempt)}
			if task.Kind != "" {
				attrs = append(attrs, attrKind.String(task.Kind))
			}
			ctx, span := t.tracer.Start(t.Extract(ctx, task.Headers), "docket.process "+task.Queue,
				trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
			defer span.End()
			err := next.Work(ctx, task)
			o := worker.OutcomeOf(ctx, err)
			span.SetAttributes(attrOutcome.String(o.String()))
			switch o {
			case worker.OutcomeCompleted:
				fus := task.FollowUps()
				for i := range fus {
					if !t.carries(fus[i].Task.Headers) {
						t.Inject(ctx, &fus[i].Task)
					}
				}
			case worker.OutcomeSnoozed, worker.OutcomeShutdown:
			case worker.OutcomeLeaseLost:
				failSpan(span, context.Cause(ctx))
			default:
				failSpan(span, err)
			}
			return err
		})
	}
}
