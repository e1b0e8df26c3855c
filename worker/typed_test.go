package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

type email struct {
	To      string `json:"to"`
	Subject string `json:"subject,omitempty"`
}

func (email) Kind() string { return "email" }

type sms struct {
	Number string `json:"number"`
}

func (*sms) Kind() string { return "sms" } // on the pointer: HandleArgs calls it on nil

// TestTypedRegisterAndEnqueue: Enqueue stores the args' kind and their JSON
// encoding as the payload, with the other options given; Register decodes
// the payload back for the handler.
func TestTypedRegisterAndEnqueue(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	got := make(chan *worker.Job[email], 1)
	worker.Register(w, ns, "emails", func(ctx context.Context, j *worker.Job[email]) error {
		got <- j
		j.SetResult([]byte(`"sent"`))
		return nil
	}, worker.QueueOptions{})
	res, err := worker.Enqueue(bg, e.q("emails"), email{To: "ada@example.com", Subject: "hi"},
		engine.Task{Priority: 7, IdempotencyKey: "welcome-ada"})
	if err != nil {
		t.Fatal(err)
	}
	info := e.get("emails", res.ID)
	if info.Kind != "email" || string(info.Payload) != `{"to":"ada@example.com","subject":"hi"}` ||
		info.Priority != 7 || info.IdempotencyKey != "welcome-ada" {
		t.Fatalf("stored task %+v payload %s", info, info.Payload)
	}
	e.start(w)
	j := recv(t, got)
	if j.Args != (email{To: "ada@example.com", Subject: "hi"}) || j.ID != res.ID || j.Kind != "email" || j.Attempt != 1 {
		t.Fatalf("job %+v args %+v", j.Task, j.Args)
	}
	e.eventually("completion", func() bool { return e.gone("emails", res.ID) })
}

// TestHandleArgsRoutesByKind: a Mux routes typed kinds, value or pointer
// Args, next to plain handlers; a task enqueued by hand with the same kind
// and JSON reaches the typed handler; an empty payload is the zero value.
func TestHandleArgsRoutesByKind(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	seen := make(chan string, 8)
	mux := worker.NewMux()
	worker.HandleArgs(mux, func(ctx context.Context, j *worker.Job[email]) error {
		seen <- "email to " + j.Args.To
		return nil
	})
	worker.HandleArgs(mux, func(ctx context.Context, j *worker.Job[*sms]) error {
		if j.Args == nil {
			seen <- "sms with no args"
			return nil
		}
		seen <- "sms to " + j.Args.Number
		return nil
	})
	mux.HandleFunc("raw", func(ctx context.Context, tk *worker.Task) error {
		seen <- "raw " + string(tk.Payload)
		return nil
	})
	w.Handle(ns, "out", mux, worker.QueueOptions{})
	q := e.q("out")
	for _, a := range []worker.Args{email{To: "ada"}, &sms{Number: "+1 555"}} {
		if _, err := worker.Enqueue(bg, q, a, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	e.enqueue("out", engine.Task{Kind: "email", Payload: []byte(`{"to":"bob","extra":true}`)})
	e.enqueue("out", engine.Task{Kind: "email"})
	e.enqueue("out", engine.Task{Kind: "sms"})
	e.enqueue("out", engine.Task{Kind: "raw", Payload: []byte(`[1,2]`)})
	e.start(w)
	want := []string{"email to ada", "sms to +1 555", "email to bob", "email to ", "sms with no args", "raw [1,2]"}
	for _, s := range want {
		if got := recv(t, seen); got != s {
			t.Fatalf("handled %q, want %q", got, s)
		}
	}
	e.eventually("all done", func() bool { c, _ := q.Counts(bg); return c == engine.Counts{} })
}

// TestUndecodablePayloadFailsPermanently: a payload that does not decode
// into the handler's type dead-letters the task at its first attempt with
// an error naming the task, the kind and the type; the handler never runs.
func TestUndecodablePayloadFailsPermanently(t *testing.T) {
	e := newEnv(t, func(o *engine.Options) { o.Logger = slog.New(slog.DiscardHandler) })
	w := e.worker(worker.Options{})
	errs := make(chan error, 1)
	w.Use(func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error {
			err := next.Work(ctx, tk)
			errs <- err
			return err
		})
	})
	worker.Register(w, ns, "emails", func(ctx context.Context, j *worker.Job[email]) error {
		t.Errorf("handler ran on %s", j.Payload)
		return nil
	}, worker.QueueOptions{})
	id := e.enqueue("emails", engine.Task{Kind: "email", Payload: []byte(`{"to":5}`), MaxAttempts: 5})
	e.start(w)
	if err := recv(t, errs); !errors.Is(err, worker.ErrPayload) || worker.OutcomeOf(bg, err) != worker.OutcomePermanent {
		t.Fatalf("handler error %v", err)
	}
	info := e.waitState("emails", id, engine.Dead)
	if info.Attempts != 1 || !strings.Contains(info.LastError, `payload does not decode: task `) ||
		!strings.Contains(info.LastError, `(kind "email") into worker_test.email`) {
		t.Fatalf("dead task %+v", info)
	}
}

// TestNewTaskRefusesBadInput: args or options NewTask cannot turn into a
// task are ErrInvalid, and Enqueue then enqueues nothing.
func TestNewTaskRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name string
		args worker.Args
		opts engine.Task
		msg  string
	}{
		{"nil args", nil, engine.Task{}, "nil args"},
		{"empty kind", kindless{}, engine.Task{}, "Kind is empty"},
		{"other kind", email{}, engine.Task{Kind: "sms"}, `task kind "sms", but args worker_test.email have kind "email"`},
		{"payload given", email{}, engine.Task{Payload: []byte(`{}`)}, "leave Task.Payload empty"},
		{"does not encode", badArgs{F: math.Inf(1)}, engine.Task{}, "encoding args worker_test.badArgs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := worker.NewTask(tc.args, tc.opts); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("NewTask: %v, want ErrInvalid saying %q", err, tc.msg)
			}
			if _, err := worker.Enqueue(bg, e.q("q"), tc.args, tc.opts); !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("Enqueue: %v", err)
			}
		})
	}
	if c, _ := e.q("q").Counts(bg); c != (engine.Counts{}) {
		t.Fatalf("refused enqueues left %+v", c)
	}
	// The same kind matching the args is fine.
	if task, err := worker.NewTask(email{To: "x"}, engine.Task{Kind: "email"}); err != nil || task.Kind != "email" {
		t.Fatalf("NewTask with the args' own kind: %+v %v", task, err)
	}
	mustPanic(t, "HandleArgs with an empty kind", func() {
		worker.HandleArgs(worker.NewMux(), func(context.Context, *worker.Job[kindless]) error { return nil })
	})
}

type kindless struct{}

func (kindless) Kind() string { return "" }

type badArgs struct{ F float64 }

func (badArgs) Kind() string { return "bad" }

type report struct {
	Customer string `json:"customer"`
}

func (report) Kind() string        { return "report" }
func (r report) Partition() string { return r.Customer }

// TestPartitionedArgs: args that name a partition enqueue their tasks in
// it, and the handler's task shows it; a partition in the options that
// differs is refused; args of no partition take the options'.
func TestPartitionedArgs(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	got := make(chan *worker.Job[report], 1)
	worker.Register(w, ns, "reports", func(ctx context.Context, j *worker.Job[report]) error {
		got <- j
		return nil
	}, worker.QueueOptions{})
	res, err := worker.Enqueue(bg, e.q("reports"), report{Customer: "acme"}, engine.Task{})
	if err != nil {
		t.Fatal(err)
	}
	if info := e.get("reports", res.ID); info.Partition != "acme" {
		t.Fatalf("stored task %+v", info)
	}
	if _, err := worker.NewTask(report{Customer: "acme"}, engine.Task{Partition: "other"}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("conflicting partitions: %v", err)
	}
	if tk, err := worker.NewTask(report{}, engine.Task{Partition: "p"}); err != nil || tk.Partition != "p" {
		t.Fatalf("args without a partition: %+v %v", tk, err)
	}
	if tk, err := worker.NewTask(email{To: "a"}, engine.Task{Partition: "p"}); err != nil || tk.Partition != "p" {
		t.Fatalf("plain args with a partition: %+v %v", tk, err)
	}
	e.start(w)
	if j := recv(t, got); j.Partition != "acme" || j.Args.Customer != "acme" {
		t.Fatalf("job %+v", j.Task)
	}
}
