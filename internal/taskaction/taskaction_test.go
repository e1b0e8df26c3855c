package taskaction

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// opts is the options of the test interface's actions: one field of each
// kind.
type opts struct {
	At          time.Time
	Every       time.Duration
	MaxAttempts int32
	Priority    *int
	Note        string
	Urgent      bool
}

type odd struct{ Tags []string }

// shapes has a method of every shape, task action or not.
type shapes interface {
	Bump(ctx context.Context, id uint64) error
	Move(ctx context.Context, id uint64, o opts) error
	Tag(ctx context.Context, id uint64, o odd) error              // a field of no simple kind
	Count(ctx context.Context) (int, error)                       // no id
	Peek(ctx context.Context, id uint64) (string, error)          // returns more than an error
	Many(ctx context.Context, id uint64, more ...string) error    // variadic
	Wrong(ctx context.Context, id string) error                   // an id that is not one
	TooMany(ctx context.Context, id uint64, a opts, b opts) error // two options
	Scalar(ctx context.Context, id uint64, d time.Duration) error // options not a struct
	NoCtx(id uint64, o opts) error                                // no context first
}

// TestActionsOf: the task actions of an interface are its methods of the
// shapes (ctx, id) and (ctx, id, struct of simple fields) returning an
// error, and only those; their fields are read by kind, named in kebab
// case.
func TestActionsOf(t *testing.T) {
	as := Of(reflect.TypeFor[shapes]())
	var names []string
	for _, a := range as {
		names = append(names, a.Name)
	}
	if strings.Join(names, " ") != "bump move" {
		t.Fatalf("actions: %v", names)
	}
	mv := as[1]
	var got []string
	for _, f := range mv.Fields {
		got = append(got, f.Flag+":"+f.Kind.String()+":"+f.Label)
	}
	want := "at:time:At every:duration:Every max-attempts:int:Max attempts priority:optional int:Priority note:string:Note urgent:bool:Urgent"
	if strings.Join(got, " ") != want {
		t.Fatalf("fields:\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if as[0].Fields != nil || as[0].Title() != "Bump" || as[0].Past() != "bumped" || mv.Past() != "moved" {
		t.Fatalf("bump: %+v %q %q", as[0], as[0].Title(), as[0].Past())
	}
	if as[0].Doc != "" || as[0].Summary() != "" {
		t.Fatalf("a method of another interface than engine.Queue has docs: %q", as[0].Doc)
	}
}

// TestQueueActions: engine.Queue's task actions are found, Reschedule
// among them with its two fields, and nothing that is not one.
func TestQueueActions(t *testing.T) {
	var names []string
	for _, a := range Actions() {
		names = append(names, a.Method+"="+a.Name)
	}
	for _, want := range []string{"Cancel=cancel", "Redrive=redrive", "RunNow=run-now", "Reschedule=reschedule"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("%s not among %v", want, names)
		}
	}
	r := Lookup("reschedule")
	if r == nil || len(r.Fields) != 2 || r.Fields[0].Kind != Time || r.Fields[1].Kind != OptInt || r.Fields[1].Flag != "priority" {
		t.Fatalf("reschedule: %+v", r)
	}
	if Lookup("redrive-all") != nil || Lookup("get") != nil || Lookup("snooze") != nil {
		t.Fatal("a method that is not a task action is one")
	}
	// Each carries its method's documentation (docs_gen.go).
	for _, a := range Actions() {
		if !strings.HasPrefix(a.Doc, a.Method+" ") {
			t.Errorf("%s: doc %q", a.Method, a.Doc)
		}
	}
	if !strings.HasPrefix(r.Doc, "Reschedule moves a ready, scheduled or waiting task") || !strings.HasSuffix(r.Doc, "an error changes nothing.") {
		t.Fatalf("reschedule's doc: %q", r.Doc)
	}
	if s := r.Summary(); !strings.HasSuffix(s, "keeps waiting for its dependencies.") || strings.Contains(s, "ErrNotFound") {
		t.Fatalf("reschedule's summary is not its first sentence: %q", s)
	}
}

func TestKebabAndPast(t *testing.T) {
	for in, want := range map[string]string{"RunNow": "run-now", "MaxInFlight": "max-in-flight", "TTLSeconds": "ttl-seconds", "At": "at", "ID": "id", "Retry2Times": "retry2-times"} {
		if got := Kebab(in); got != want {
			t.Errorf("Kebab(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"reschedule": "rescheduled", "retry": "retried", "delay": "delayed", "run": "ran", "bump": "bumped", "pause": "paused",
		"tag": "tagged", "stop": "stopped", "pin": "pinned", "open": "opened", "fix": "fixed", "boost": "boosted", "cancel": "cancelled", "label": "labelled", "pull": "pulled", "fail": "failed"} {
		if got := pastTense(in); got != want {
			t.Errorf("pastTense(%q) = %q, want %q", in, got, want)
		}
	}
	if got := (&Action{Name: "run-now"}).Past(); got != "ran now" {
		t.Errorf("run-now: %q", got)
	}
}

func given(m map[string]string) func(f *Field) (string, bool) {
	return func(f *Field) (string, bool) { s, ok := m[f.Flag]; return s, ok }
}

// TestParse: each kind is read from its text; a time as RFC 3339 or how
// long from now (counted from the now given at the call); an optional
// int left unset is nil; bad text names the field and what it wants;
// nothing given is refused.
func TestParse(t *testing.T) {
	mv := Of(reflect.TypeFor[shapes]())[1]
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		in   map[string]string
		want opts
	}{
		{map[string]string{"at": "10m"}, opts{At: now.Add(10 * time.Minute)}},
		{map[string]string{"at": "+2h", "priority": ""}, opts{At: now.Add(2 * time.Hour)}},
		{map[string]string{"at": "0"}, opts{At: now}},
		{map[string]string{"at": "2026-01-01T00:00:00Z"}, opts{At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{map[string]string{"every": "1m30s", "max-attempts": "-3", "priority": "7", "note": " hi ", "urgent": "true"},
			opts{Every: 90 * time.Second, MaxAttempts: -3, Priority: ptr(7), Note: "hi", Urgent: true}},
	} {
		in, err := mv.Parse(given(c.in))
		if err != nil {
			t.Fatalf("%v: %v", c.in, err)
		}
		if got := in.Opts(now).(opts); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: %+v, want %+v", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		in   map[string]string
		want string
	}{
		{map[string]string{}, "nothing to change: give -at, -every, -max-attempts, -priority, -note or -urgent"},
		{map[string]string{"at": " "}, "nothing to change"},
		{map[string]string{"at": "tomorrow"}, `at "tomorrow": want an RFC 3339 time`},
		{map[string]string{"at": "-5m"}, `at "-5m": how long from now must be 0..`},
		{map[string]string{"every": "often"}, `every "often": want a duration`},
		{map[string]string{"max-attempts": "9999999999"}, `max-attempts "9999999999": out of range for a whole number of 32 bits`},
		{map[string]string{"priority": "high"}, `priority "high": want a whole number`},
		{map[string]string{"max-attempts": "1.5"}, `max-attempts "1.5": want a whole number`},
		{map[string]string{"urgent": "very"}, `urgent "very": want true or false`},
	} {
		_, err := mv.Parse(given(c.in))
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.in, err, c.want)
		}
	}
	if in, err := Of(reflect.TypeFor[shapes]())[0].Parse(given(nil)); err != nil || in.Opts(now) != nil {
		t.Fatalf("an action without options: %v %v", in.Opts(now), err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestCall runs Reschedule through its Input on a DB: the time from now
// counts from the now given, the priority is set; the engine's refusal
// comes back as it is.
func TestCall(t *testing.T) {
	clock := engine.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := engine.OpenInMemory(engine.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	q := db.Queue(engine.NS("p", "s"), "q")
	e, err := q.Enqueue(ctx, engine.Task{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := Lookup("reschedule").Parse(given(map[string]string{"at": "1h", "priority": "4"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Call(ctx, q, e.ID, clock.Now()); err != nil {
		t.Fatal(err)
	}
	info, err := q.Get(ctx, e.ID)
	if err != nil || info.State != engine.Scheduled || !info.NotBefore.Equal(clock.Now().Add(time.Hour)) || info.Priority != 4 {
		t.Fatalf("%+v %v", info, err)
	}
	if err := in.Call(ctx, q, 99, clock.Now()); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a missing task: %v", err)
	}
	bump, _ := Of(reflect.TypeFor[shapes]())[0].Parse(given(nil))
	if err := bump.Call(ctx, q, e.ID, clock.Now()); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "no task action Bump") {
		t.Fatalf("an action the queue lacks: %v", err)
	}
}
