package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/docketdb/docket/engine"
)

// Task is a claimed task as a handler sees it: the lease's fields, and the
// means to record progress and what to commit with the completion. The
// exported fields are read-only; the byte slices and the Headers map are
// shared with the engine and must not be modified. A Task is only valid
// while its handler runs.
type Task struct {
	ID        uint64
	Namespace engine.Namespace
	Queue     string
	Kind      string
	Payload   []byte
	Headers   map[string]string
	// LastProgress is the progress recorded by an earlier attempt (nil if
	// none), so that a retried task can resume.
	LastProgress []byte
	Priority     int
	Attempt      int // 1 on the first attempt
	MaxAttempts  int
	Owner        string
	EnqueuedAt   time.Time
	// Partition is the task's partition of its queue ("" for none).
	Partition string

	r     *runner
	lease engine.Lease

	// beat serialises heartbeats with the task's state changes, so that no
	// heartbeat is in flight once the outcome is being committed (it would
	// be refused and counted as a lost lease).
	beat   sync.Mutex
	state  taskState
	lost   error // why the lease is gone; set once
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	deadline  time.Time
	log       *slog.Logger
	result    []byte
	ops       []engine.Op
	followUps []engine.FollowUp
	// after holds, per follow-up, the earlier follow-ups it waits for
	// (FollowUpAfter), by index in followUps.
	after [][]int
}

// taskState is where a claimed task is in its slot.
type taskState uint8

const (
	taskWaiting    taskState = iota // claimed, its handler not started: heartbeated
	taskRunning                     // its handler runs: heartbeated
	taskCompleting                  // completed, its commit deferred to the batch's end: heartbeated
	taskEnded                       // its outcome is being committed, or was
	taskReleased                    // handed back unstarted at shutdown
	taskLost                        // the lease was found lost while the task waited
)

func newTask(r *runner, l engine.Lease) *Task {
	return &Task{
		ID: l.ID, Namespace: l.Namespace, Queue: l.Queue, Kind: l.Kind, Payload: l.Payload,
		Headers: l.Headers, LastProgress: l.Progress, Priority: l.Priority, Attempt: l.Attempt,
		MaxAttempts: l.MaxAttempts, Owner: l.Owner, EnqueuedAt: l.EnqueuedAt, Partition: l.Partition,
		r: r, lease: l, deadline: l.Deadline,
	}
}

// Unmarshal decodes the JSON payload into v.
func (t *Task) Unmarshal(v any) error { return json.Unmarshal(t.Payload, v) }

// Deadline is when the task's lease ends unless extended again. The
// runtime extends it every QueueOptions.HeartbeatEvery while the handler
// runs.
func (t *Task) Deadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline
}

// Logger returns the worker's logger with the task's id, queue, attempt and
// owner attached.
func (t *Task) Logger() *slog.Logger {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.loggerLocked()
}

func (t *Task) loggerLocked() *slog.Logger {
	if t.log == nil {
		t.log = t.r.log.With(logTask, t.ID, logAttempt, t.Attempt)
	}
	return t.log
}

// Progress records progress (empty or JSON; nil records nothing) and
// extends the lease at once, as a heartbeat does. A retried attempt finds it
// in LastProgress. If the lease was lost, the handler's context is
// cancelled and the error wraps engine.ErrLeaseLost.
func (t *Task) Progress(ctx context.Context, progress []byte) error {
	t.beat.Lock()
	defer t.beat.Unlock()
	if t.lost != nil {
		return t.lost
	}
	if t.state != taskRunning {
		return fmt.Errorf("worker: progress of task %d after its handler returned", t.ID)
	}
	l := t.lease
	err := t.r.q.Heartbeat(ctx, &l, t.r.opts.Lease, progress)
	t.extended(l.Deadline, err)
	if err != nil {
		return fmt.Errorf("worker: progress of task %d: %w", t.ID, err)
	}
	return nil
}

// SetResult sets the result (empty or JSON) committed with the completion;
// the engine keeps it when Options.RetainCompleted is on.
func (t *Task) SetResult(result []byte) {
	t.mu.Lock()
	t.result = result
	t.mu.Unlock()
}

// AddOps adds KV mutations and assertions (engine.Set, engine.Delete,
// engine.IfVersion...) in the task's namespace to the completion's commit.
// They apply only if the handler returns nil, atomically with the
// completion; a failed assertion refuses the completion and the attempt
// fails with the conflict as its error.
func (t *Task) AddOps(ops ...engine.Op) {
	t.mu.Lock()
	t.ops = append(t.ops, ops...)
	t.mu.Unlock()
}

// FollowUp enqueues task on queue (of the task's namespace) in the
// completion's commit: it exists if and only if this task completed. Chain
// workflow steps with it. It returns the follow-up's index among the
// task's follow-ups, for FollowUpAfter. The task may wait for others with
// task.DependsOn; a dependency on this task itself is satisfied by the
// completion.
func (t *Task) FollowUp(queue string, task engine.Task) int {
	return t.FollowUpAfter(queue, task)
}

// FollowUpAfter is FollowUp for a task that waits, in state Waiting, until
// the earlier follow-ups after names (indexes FollowUp returned) have
// completed, as well as the tasks of task.DependsOn: fan out with FollowUp
// and fan back in with one FollowUpAfter. An index that is not an earlier
// follow-up makes the completion fail with engine.ErrInvalid.
func (t *Task) FollowUpAfter(queue string, task engine.Task, after ...int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.followUps = append(t.followUps, engine.FollowUp{Queue: queue, Task: task})
	t.after = append(t.after, slices.Clone(after))
	return len(t.followUps) - 1
}

// FollowUps returns the follow-ups recorded so far. Middleware may change
// the tasks in place (to add headers, say) after the handler returns.
func (t *Task) FollowUps() []engine.FollowUp {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.followUps
}

func (t *Task) done() engine.Done {
	t.mu.Lock()
	defer t.mu.Unlock()
	follow := t.followUps
	if slices.ContainsFunc(t.after, func(a []int) bool { return len(a) > 0 }) {
		// A follow-up's position among the tasks the commit enqueues comes
		// after the Enqueue ops of AddOps (engine.Task.DependsOnSibling).
		base := 0
		for _, op := range t.ops {
			if op.Kind() == engine.OpEnqueue {
				base++
			}
		}
		follow = slices.Clone(follow)
		for i, after := range t.after {
			if i >= len(follow) || len(after) == 0 {
				continue
			}
			sibs := slices.Clone(follow[i].Task.DependsOnSibling)
			for _, a := range after {
				if a < 0 || a >= i {
					sibs = append(sibs, base+i) // not earlier: the engine refuses it
					continue
				}
				sibs = append(sibs, base+a)
			}
			follow[i].Task.DependsOnSibling = sibs
		}
	}
	return engine.Done{Result: t.result, Ops: t.ops, FollowUps: follow}
}

// begin marks a waiting task running with cancel as its handler's
// cancellation; false if it may not run (lost or released meanwhile).
func (t *Task) begin(cancel context.CancelCauseFunc) bool {
	t.beat.Lock()
	defer t.beat.Unlock()
	if t.state != taskWaiting {
		return false
	}
	t.state, t.cancel = taskRunning, cancel
	return true
}

// end marks a running task ended, so that no heartbeat touches it again,
// or, if deferred, completing, to be heartbeated until commit takes it. It
// reports why the lease was lost, if it was.
func (t *Task) end(deferred bool) error {
	t.beat.Lock()
	defer t.beat.Unlock()
	t.state = taskEnded
	if deferred && t.lost == nil {
		t.state = taskCompleting
	}
	return t.lost
}

// commit marks a completing task ended, so that no heartbeat touches it
// again; false if its lease was lost meanwhile.
func (t *Task) commit() bool {
	t.beat.Lock()
	defer t.beat.Unlock()
	if t.state != taskCompleting {
		return false
	}
	t.state = taskEnded
	return true
}

// plain reports whether the completion commits nothing but the
// acknowledgement.
func (t *Task) plain() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.result == nil && len(t.ops) == 0 && len(t.followUps) == 0
}

// beating reports whether the task's lease is heartbeated: waiting,
// running or completing. Call with beat held.
func (t *Task) beating() bool {
	return t.state == taskWaiting || t.state == taskRunning || t.state == taskCompleting
}

// heartbeat extends the leases of the tasks that are waiting, running or
// completing, in one commit (HeartbeatBatch) when there are several. Each
// task's beat is held until its outcome is recorded, so that no heartbeat
// is in flight when an outcome is committed.
func (r *runner) heartbeat(tasks []*Task) {
	beat := make([]*Task, 0, len(tasks))
	for _, t := range tasks {
		t.beat.Lock()
		if t.beating() {
			beat = append(beat, t)
		} else {
			t.beat.Unlock()
		}
	}
	switch len(beat) {
	case 0:
		return
	case 1:
		t := beat[0]
		l := t.lease
		err := r.q.Heartbeat(context.Background(), &l, r.opts.Lease, nil)
		t.extended(l.Deadline, err)
		t.beat.Unlock()
		return
	}
	ls := make([]engine.Lease, len(beat))
	ptrs := make([]*engine.Lease, len(beat))
	for i, t := range beat {
		ls[i] = t.lease
		ptrs[i] = &ls[i]
	}
	errs, err := r.q.HeartbeatBatch(context.Background(), ptrs, r.opts.Lease)
	for i, t := range beat {
		terr := err
		if err == nil {
			terr = errs[i]
		}
		t.extended(ls[i].Deadline, terr)
		t.beat.Unlock()
	}
}

// release hands a task that has not started back to the queue at once.
func (t *Task) release() {
	t.beat.Lock()
	defer t.beat.Unlock()
	if t.state == taskWaiting {
		t.state = taskReleased
		t.r.release(t.lease)
	}
}

// extended records the outcome of a heartbeat. Call with beat held.
func (t *Task) extended(deadline time.Time, err error) {
	switch {
	case err == nil:
		t.mu.Lock()
		t.deadline = deadline
		t.mu.Unlock()
	case t.lost != nil:
	case errors.Is(err, engine.ErrLeaseLost), errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrFailed):
		// The work can no longer be committed: stop it now rather than let it
		// run on as a zombie next to the task's new owner.
		t.lost = fmt.Errorf("worker: lease of task %d: %w", t.ID, err)
		switch t.state {
		case taskRunning:
			t.cancel(t.lost)
			t.Logger().Warn("docket: lease lost while the handler ran; its result will be discarded", "err", err)
		case taskCompleting:
			t.state = taskLost
			t.Logger().Warn("docket: lease lost before the completion was committed; the result is discarded", "err", err)
		default:
			t.state = taskLost
			t.Logger().Warn("docket: lease lost before the handler started", "err", err)
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Progress called with a context that ended: the caller gets the error.
	default:
		t.Logger().Warn("docket: heartbeat failed", "err", err, "deadline", t.Deadline())
	}
}
