// Package worker is docket's runtime for handlers: it claims tasks from the
// engine, runs a handler for each, keeps their leases alive while they run,
// commits their outcome, shuts down without losing or orphaning work, and
// enqueues periodic tasks. It uses only the engine's public API.
//
// # Handlers
//
// A Handler (or a HandlerFunc, func(ctx, *Task) error) is registered per
// queue with Worker.Handle, with the queue's QueueOptions; a Mux routes by
// task kind. The *Task gives the payload, attempt number, id and headers,
// and records what commits atomically with the completion: a result
// (SetResult), KV mutations and assertions (AddOps) and follow-up tasks on
// any queue of the namespace (FollowUp). Progress records progress and
// extends the lease at once. Middleware (Worker.Use) wraps every handler.
//
// # Typed handlers and producers
//
// A type with a Kind method (Args) can stand for a kind of task's
// arguments. Register (a queue) and HandleArgs (a Mux route) take a
// func(ctx, *Job[T]) error that receives the payload decoded into a T; a
// payload that does not decode fails permanently (ErrPayload). Enqueue and
// NewTask make the task for a value: its Kind, and its JSON encoding as the
// payload, nothing more, so tasks enqueued with plain bytes and typed ones
// are interchangeable. See Args for the JSON shape.
//
// # What a handler's return value does
//
//   - nil: the task is completed, with its result, ops and follow-ups, in
//     one commit fenced by the lease's token.
//   - an error: the attempt fails; the task is retried after its exponential
//     backoff, or dead-lettered when its attempts are spent.
//   - Permanent(err): dead-lettered at once.
//   - RetryAfter(d, err): retried after d (at most engine.MaxDuration).
//   - Snooze(d): back to wait for d (at most engine.MaxDuration) without
//     using an attempt.
//   - a panic: recovered; the attempt fails with the panic value and stack
//     as its error.
//
// If the engine refuses to record the outcome, the attempt fails at once
// with both reasons (or, if that is refused too, the lease is released), so
// a task never waits in flight for its lease to expire.
//
// QueueOptions.Timeout is the deadline of the handler's context, on the
// Worker's clock: ctx.Deadline() reports it, and once it passes ctx.Err()
// is context.DeadlineExceeded (cause ErrTimeout). An error returned then
// fails the attempt; nil completes the task (the work was done).
//
// # Concurrency and claiming
//
// Each queue is worked by QueueOptions.Concurrency goroutines. Each one
// loops: it claims up to QueueOptions.ClaimBatch tasks with the engine's
// blocking claim (one commit), then runs them one after another. A batch
// larger than one saves commits on a busy queue of short tasks: one claim
// for the batch, and one commit (engine.Queue.CompleteBatch) for the plain
// completions of the batch when it ends. The tasks waiting their turn in a
// goroutine's batch, and those completed but not yet committed, are leased
// to this runtime and heartbeated like the running one; those not started
// are handed back at once when the Worker stops. When the last task of a
// batch completes (and nothing of the batch waits to be committed), its
// completion and the claim of the next batch are one commit
// (engine.Queue.CompleteAndClaim): a goroutine draining a queue pays one
// commit per task, and goes back to the blocking claim only when that
// finds nothing.
//
// A queue's controls are the engine's, so they hold across every Worker
// of every process: on a paused queue (engine.Queue.Pause) the goroutines
// stay parked in the blocking claim, making no claim however much work
// arrives, until the queue is resumed; a queue's in-flight bound and rate
// limit (engine.Queue.SetLimits) decide how many tasks a claim gets, and a
// goroutine that gets none parks until a slot frees or a token comes. The
// runtime's own Concurrency bounds one process; the engine's bound, all.
//
// # Leases and heartbeats
//
// A claimed task is leased for QueueOptions.Lease. Every HeartbeatEvery
// (default Lease/3) the runtime extends every lease it holds, those of one
// goroutine's batch in one commit (engine.Queue.HeartbeatBatch), so a long
// task is never taken by a second worker while the first is alive, and a
// crashed worker's tasks come back after one lease. A task cancelled while
// its handler runs cancels the handler's context at once when the engine
// runs in process (engine.LeaseWatcher), else (on a network client, which
// has no such signal) at the next heartbeat, at most HeartbeatEvery later:
// shorten HeartbeatEvery where a cancellation must stop work sooner. If a
// heartbeat finds the lease lost (it expired while the process was stalled and another
// worker claimed the task, or the task was cancelled), the handler's
// context is cancelled at once with a cause wrapping engine.ErrLeaseLost
// and nothing it produced is committed; a completion that races the loss is
// refused by the engine's fencing token anyway.
//
// # A server that goes away
//
// On a network client (package client) a call can fail without any answer
// of the engine: no server took it (one restarting, unreachable or
// draining: client.ErrUnavailable) or its answer was lost
// (client.ErrOutcomeUnknown). The runtime tells such errors by what they
// are not: they wrap none of the engine's sentinel errors. It does not stop
// for them; it keeps trying, with jittered pauses doubling from 50 ms to
// 2 s (on top of the client's own retries), until the engine answers:
//
//   - a failed claim is made again; the Worker goes on claiming once a
//     server answers;
//   - a heartbeat that fails is logged and made again at the next beat (the
//     lease holds until its deadline, which a restart does not move);
//   - the commit of an outcome (complete, fail, snooze, release) is made
//     again, so that work done while the server restarted is committed
//     rather than given up. These calls are fenced by the lease's token,
//     so a repeat of one that took effect is refused with
//     engine.ErrLeaseLost and never applies twice; a completion refused
//     that way after a try without an answer is logged as possibly
//     committed. The retries end, and the task is left to come back when
//     its lease expires, only when the Worker cancels its handlers (Stop's
//     context or the shutdown grace ended);
//   - a completion that would have claimed the next batch
//     (CompleteAndClaim) and got no answer is not made again, since the
//     leases a first try may have taken would be held by nobody: the
//     completion alone is committed, retried as above, and the goroutine
//     goes back to the blocking claim.
//
// An in-process DB answers every call, so none of this happens there.
//
// # Shutdown and failure
//
// One rule, however the stop begins (Stop, the end of Run's or Start's
// context, or the Worker failing): claiming stops, claimed tasks that have
// not started are handed back at once, running handlers get
// Options.ShutdownGrace to finish (Stop's context may cut that short), then
// are cancelled (cause ErrShutdown) and their leases released with
// Snooze(0), so other workers retry them at once without using an attempt.
// No goroutine of the Worker outlives Stop.
//
// The Worker stops by itself, and Run, Stop and Err return why, when it
// cannot go on: the engine was closed or failed, or its caller lacks a
// permission it needs (work on a queue; enqueue for follow-ups; kv-write
// for AddOps). A task whose completion was refused for lack of permission
// is handed back untouched. Start reports queue, namespace and owner names
// the engine would refuse.
//
// # Periodic tasks
//
// Worker.Periodic enqueues a task at every tick of a cron schedule, exactly
// once per tick across any number of runtimes sharing the engine (in one
// process today: the directory lock admits one process) and restarts, catching up at
// most the most recent missed tick after downtime; see Periodic for how. A
// schedule keeps its state in the namespace's system area (engine.SystemAPI),
// out of reach of the namespace's KV handle, so running one as a caller needs
// engine.PermSystem.
//
// # Logging and observability
//
// The runtime logs through log/slog with the task id, queue, attempt and
// owner; by default only warnings and errors, to slog.Default(): a failed
// attempt is a warning, a panic, a permanent failure or a stop an error.
// Failed attempts are aggregated per queue: the first of a level in an
// interval of 10 s (on the Worker's clock) is logged at once, with its task;
// the others of the interval share one line ("docket: task failed
// (aggregated: ...)") when it ends or the Worker stops, with their count
// (count), the count of each outcome (outcome_failed, outcome_panicked, ...)
// and the first one's task and error (sample_task_id, sample_err). The
// packages worker/metrics (Prometheus) and worker/tracing (OpenTelemetry)
// plug in as middleware and an engine observer, so that this package
// depends on neither.
package worker
