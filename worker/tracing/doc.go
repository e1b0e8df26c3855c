// Package tracing carries OpenTelemetry traces across docket queues.
//
// Tracer.Enqueue (and EnqueueBatch, or Inject for tasks enqueued some other
// way) starts a producer span and stores its context in the task's
// engine.Task.Headers with the configured propagator (W3C traceparent and
// tracestate by default). Tracer.Middleware, added to a worker with
// Worker.Use, starts a consumer span for each handler run as a child of the
// context found in the task's headers, so that one trace runs from the
// enqueue, through the queue, into the handler; it also stores the
// handler span's context in the headers of the task's follow-ups, so a
// workflow chained through follow-ups stays in one trace.
//
// Tracing is optional: the worker and engine packages do not depend on
// OpenTelemetry, and a worker without this middleware pays nothing.
package tracing
