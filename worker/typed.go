package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/docketdb/docket/engine"
)

// Args is the arguments of a kind of task as a Go type. A producer enqueues
// a value (Enqueue, or NewTask for a batch, a follow-up or an outbox op);
// a handler receives it decoded (Register, HandleArgs, JobFunc).
//
// Kind names the type's tasks: it becomes the task's Kind, which a Mux
// routes by. It must return the same non-empty string for every value of
// the type, the zero value included (HandleArgs calls it on the zero
// value, which for a pointer type is nil).
//
// The task's payload is encoding/json's encoding of the value (struct tags
// apply) and nothing else: the kind is not a field of it. So
//
//	worker.Enqueue(ctx, q, Email{To: "ada@example.com"}, engine.Task{})
//
// with Email's Kind returning "email" enqueues the same task as
//
//	q.Enqueue(ctx, engine.Task{Kind: "email", Payload: []byte(`{"To":"ada@example.com"}`)})
//
// and a program may mix the two, in either direction.
type Args interface {
	Kind() string
}

// PartitionedArgs are Args whose tasks name a partition of their queue
// (engine.Task.Partition), such as the customer they serve: NewTask puts
// them in the partition Partition returns ("" for none), so that a queue's
// claims take turns between its customers. Unlike Kind, Partition is
// called on each value.
type PartitionedArgs interface {
	Args
	Partition() string
}

// Job is a claimed task whose payload was decoded into Args. Everything
// else, the task's fields and the methods that record what commits with
// the completion (SetResult, AddOps, FollowUp), comes with the embedded
// *Task.
type Job[T any] struct {
	*Task
	Args T
}

// JobFunc is a handler that decodes each task's JSON payload into a T
// before calling the function. Fields of the payload that T does not have
// are ignored (a producer may add a field before every handler knows it);
// an empty payload gives the zero T. A payload that does not decode fails
// the attempt permanently, with an error wrapping ErrPayload that names the
// task, its kind and T: the task goes to the dead-letter queue, where it
// can be read and redriven once a handler can decode it.
type JobFunc[T any] func(ctx context.Context, j *Job[T]) error

// Work decodes t's payload and calls f.
func (f JobFunc[T]) Work(ctx context.Context, t *Task) error {
	j := &Job[T]{Task: t}
	if len(t.Payload) > 0 {
		if err := json.Unmarshal(t.Payload, &j.Args); err != nil {
			return Permanent(fmt.Errorf("%w: task %d (kind %q) into %T: %w", ErrPayload, t.ID, t.Kind, j.Args, err))
		}
	}
	return f(ctx, j)
}

// Register registers f for the queue named queue in namespace ns, as
// Worker.Handle does: every task of the queue, whatever its kind, is
// decoded into a T (see JobFunc). To route several kinds of one queue, use
// a Mux with HandleArgs.
func Register[T any](w *Worker, ns engine.Namespace, queue string, f func(ctx context.Context, j *Job[T]) error, opts QueueOptions) {
	w.Handle(ns, queue, JobFunc[T](f), opts)
}

// HandleArgs registers f on m for the tasks of T's kind (T's Kind on the
// zero T), decoded into a T (see JobFunc). It panics if the kind is empty
// or already has a handler.
func HandleArgs[T Args](m *Mux, f func(ctx context.Context, j *Job[T]) error) {
	var zero T
	kind := zero.Kind()
	if kind == "" {
		panic(fmt.Sprintf("worker: HandleArgs: %T has an empty Kind", zero))
	}
	m.Handle(kind, JobFunc[T](f))
}

// NewTask returns the task for args: opts with Kind set to args.Kind() and
// Payload to the JSON encoding of args, and, for PartitionedArgs, Partition
// to args.Partition(). opts carries the other options (delay, priority,
// attempts, backoff, idempotency key, headers, a partition for args that
// name none); its Kind must be empty or args' kind, its Partition empty or
// args' partition, and its Payload empty. An args that does not encode, or
// whose Kind is empty, is an error wrapping engine.ErrInvalid.
func NewTask(args Args, opts engine.Task) (engine.Task, error) {
	if args == nil {
		return engine.Task{}, fmt.Errorf("%w: nil args", engine.ErrInvalid)
	}
	kind := args.Kind()
	switch {
	case kind == "":
		return engine.Task{}, fmt.Errorf("%w: args %T: Kind is empty", engine.ErrInvalid, args)
	case opts.Kind != "" && opts.Kind != kind:
		return engine.Task{}, fmt.Errorf("%w: task kind %q, but args %T have kind %q", engine.ErrInvalid, opts.Kind, args, kind)
	case len(opts.Payload) > 0:
		return engine.Task{}, fmt.Errorf("%w: the payload comes from args %T: leave Task.Payload empty", engine.ErrInvalid, args)
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return engine.Task{}, fmt.Errorf("%w: encoding args %T: %w", engine.ErrInvalid, args, err)
	}
	if pa, ok := args.(PartitionedArgs); ok {
		switch p := pa.Partition(); {
		case opts.Partition != "" && p != "" && opts.Partition != p:
			return engine.Task{}, fmt.Errorf("%w: task partition %q, but args %T have partition %q", engine.ErrInvalid, opts.Partition, args, p)
		case p != "":
			opts.Partition = p
		}
	}
	opts.Kind, opts.Payload = kind, payload
	return opts, nil
}

// Enqueue enqueues the task for args (see NewTask) on q, with ops as in
// engine.Queue.Enqueue.
func Enqueue(ctx context.Context, q engine.Queue, args Args, opts engine.Task, ops ...engine.Op) (engine.Enqueued, error) {
	t, err := NewTask(args, opts)
	if err != nil {
		return engine.Enqueued{}, err
	}
	return q.Enqueue(ctx, t, ops...)
}
