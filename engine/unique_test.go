package engine

import (
	"strings"
	"testing"
	"time"
)

// TestCanonicalJSON: the canonical form sorts object members by key at
// every depth, drops insignificant whitespace, writes strings with the
// fewest escapes and keeps numbers as written.
func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"b": 1, "a": [ 3, {"d": null, "c": true} ]}`: `{"a":[3,{"c":true,"d":null}],"b":1}`,
		" \t\n\"x\" ":                             `"x"`,
		`"\u00e9\/\u0041\n\u0001\"\\"`:            `"é/A\n\u0001\"\\"`,
		`[1, 1.0, 1e2, -0, 12345678901234567890]`: `[1,1.0,1e2,-0,12345678901234567890]`,
		`{"a": 2, "a": 1}`:                        `{"a":2,"a":1}`,
		`{"é": 1, "z": 2, "Z": 3}`:                `{"Z":3,"z":2,"é":1}`,
		`{}`:                                      `{}`,
		`[]`:                                      `[]`,
		"\"\xff\"":                                "\"\uFFFD\"",
		`"\b\f\r\t"`:                              `"\b\f\r\t"`,
	} {
		got, err := CanonicalJSON([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{`{`, `{"a" 1}`, `1 2`, `[1,]`} {
		if _, err := CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("CanonicalJSON(%s) accepted", bad)
		} else {
			wantErr(t, err, ErrInvalid)
		}
	}
	a, _ := UniqueKey("k", []byte(`{"x": [1, 2], "y": "z"}`))
	b, _ := UniqueKey("k", []byte(`{"y":"z","x":[1,2]}`))
	c, _ := UniqueKey("other", []byte(`{"y":"z","x":[1,2]}`))
	d, _ := UniqueKey("k", nil)
	if a != b || a == c || a == d || !strings.HasPrefix(a, UniquePrefix) || len(a) != len(UniquePrefix)+64 {
		t.Fatalf("keys: %s %s %s %s", a, b, c, d)
	}
}

func unique(kind, payload string, window time.Duration, states ...State) Task {
	return Task{Kind: kind, Payload: []byte(payload), Unique: &Unique{Window: window, States: states}}
}

func (e *env) enqueued(q Queue, t Task) Enqueued {
	e.t.Helper()
	res, err := q.Enqueue(ctx, t)
	if err != nil {
		e.t.Fatalf("enqueue: %v", err)
	}
	return res
}

// TestUniqueByContent: within the window, a task of the same kind and
// canonical payload is deduplicated while the first waits, runs or (by
// default) has completed; another kind, another queue, or the window's
// end lets it in; a dead task blocks only when Dead is among the states;
// a cancelled one never does. The key survives a crash.
func TestUniqueByContent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	first := e.enqueued(q, unique("email", `{"to": "a@b", "n": 1}`, time.Hour))
	if first.Deduplicated {
		t.Fatal("the first was deduplicated")
	}
	for name, tk := range map[string]Task{
		"same content, other key order": unique("email", `{"n":1,"to":"a@b"}`, time.Minute),
		"other window and states":       unique("email", `{"to":"a@b","n":1}`, time.Second, Ready, Scheduled, InFlight, Dead),
	} {
		if res := e.enqueued(q, tk); !res.Deduplicated || res.ID != first.ID {
			t.Fatalf("%s: %+v", name, res)
		}
	}
	for name, tk := range map[string]Task{
		"other kind":    unique("sms", `{"to":"a@b","n":1}`, time.Hour),
		"other payload": unique("email", `{"to":"a@b","n":2}`, time.Hour),
		"not unique":    {Kind: "email", Payload: []byte(`{"to":"a@b","n":1}`)},
	} {
		if res := e.enqueued(q, tk); res.Deduplicated {
			t.Fatalf("%s deduplicated: %+v", name, res)
		}
	}
	if res := e.enqueued(e.q("other"), unique("email", `{"to":"a@b","n":1}`, time.Hour)); res.Deduplicated {
		t.Fatal("another queue deduplicated")
	}
	if info := e.get(q, first.ID); !strings.HasPrefix(info.IdempotencyKey, UniquePrefix) {
		t.Fatalf("key %q", info.IdempotencyKey)
	}
	e.crash()
	e.open()
	if res := e.enqueued(q, unique("email", `{"to":"a@b","n":1}`, time.Hour)); !res.Deduplicated || res.ID != first.ID {
		t.Fatalf("after a crash: %+v", res)
	}
	// In flight, then completed (and deleted): it still blocks, for the
	// rest of the window.
	ls := e.claim(q, 1)
	if len(ls) != 1 || ls[0].ID != first.ID {
		t.Fatalf("claimed %v", ids(ls))
	}
	if res := e.enqueued(q, unique("email", `{"to":"a@b","n":1}`, time.Hour)); res.ID != first.ID {
		t.Fatalf("in flight: %+v", res)
	}
	if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
		t.Fatal(err)
	}
	if res := e.enqueued(q, unique("email", `{"to":"a@b","n":1}`, time.Hour)); res.ID != first.ID || !res.Deduplicated {
		t.Fatalf("completed: %+v", res)
	}
	e.clock.Advance(time.Hour)
	second := e.enqueued(q, unique("email", `{"to":"a@b","n":1}`, time.Hour))
	if second.Deduplicated {
		t.Fatal("deduplicated after the window")
	}
	e.reopen()

	// Dead: blocks only when asked.
	d := e.enqueued(q, unique("job", `1`, time.Hour))
	dl := e.claim(q, 10)
	for _, l := range dl {
		mustDo(t, q.Fail(ctx, l, Failure{Permanent: true}))
	}
	if info := e.get(q, d.ID); info.State != Dead {
		t.Fatalf("task %d is %s", d.ID, info.State)
	}
	again := e.enqueued(q, unique("job", `1`, time.Hour))
	if again.Deduplicated {
		t.Fatal("a dead task blocked by default")
	}
	strict := e.enqueued(q, unique("dead-blocks", `1`, time.Hour, Ready, Scheduled, InFlight, Dead))
	for _, l := range e.claim(q, 10) {
		mustDo(t, q.Fail(ctx, l, Failure{Permanent: true}))
	}
	if res := e.enqueued(q, unique("dead-blocks", `1`, time.Hour)); res.ID != strict.ID {
		t.Fatalf("a dead task with Dead among its states: %+v", res)
	}
	// Completed blocks only when asked, too, and a cancelled task never.
	loose := e.enqueued(q, unique("loose", `1`, time.Hour, Ready, Scheduled, InFlight))
	for _, l := range e.claim(q, 10) {
		if _, err := q.Complete(ctx, l, Done{}); err != nil {
			t.Fatal(err)
		}
	}
	if res := e.enqueued(q, unique("loose", `1`, time.Hour)); res.Deduplicated || res.ID == loose.ID {
		t.Fatalf("a completed task without Completed among its states: %+v", res)
	}
	c := e.enqueued(q, unique("cancelled", `1`, time.Hour, Ready, Scheduled, InFlight, Dead, Completed))
	mustDo(t, q.Cancel(ctx, c.ID))
	if res := e.enqueued(q, unique("cancelled", `1`, time.Hour)); res.Deduplicated {
		t.Fatalf("a cancelled task blocked: %+v", res)
	}
	e.reopen()
}

// TestUniqueInOneCommit: two tasks of the same content in one batch, or
// two enqueue ops of one commit, are one task; a follow-up of the content
// of the task it completes is a new task, which takes over the key.
func TestUniqueInOneCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	res, err := q.EnqueueBatch(ctx, []Task{unique("k", `{"a":1}`, time.Minute), unique("k", `{ "a" : 1 }`, time.Minute)})
	if err != nil || len(res) != 2 || res[0].Deduplicated || !res[1].Deduplicated || res[1].ID != res[0].ID {
		t.Fatalf("batch: %+v %v", res, err)
	}
	tx, err := e.db.KV(ns).Commit(ctx, Enqueue("q", unique("k", `{"b":1}`, time.Minute)), Enqueue("q", unique("k", `{"b":1}`, time.Minute)))
	if err != nil || len(tx.Enqueued) != 2 || tx.Enqueued[0].Deduplicated || tx.Enqueued[1] != (Enqueued{ID: tx.Enqueued[0].ID, Deduplicated: true}) {
		t.Fatalf("ops: %+v %v", tx, err)
	}
	// A follow-up of the same content as the task it completes is a new
	// task: the completing task's key moves to it.
	l := e.claim(q, 1)[0]
	done, err := q.Complete(ctx, l, Done{FollowUps: []FollowUp{{Queue: "q", Task: unique("k", `{"a":1}`, time.Minute)}}})
	if err != nil || len(done.Enqueued) != 1 || done.Enqueued[0].Deduplicated {
		t.Fatalf("follow-up: %+v %v", done, err)
	}
	if res := e.enqueued(q, unique("k", `{"a":1}`, time.Minute)); res.ID != done.Enqueued[0].ID {
		t.Fatalf("the key did not move to the follow-up: %+v", res)
	}
}

// TestUniqueRefusesBadInput: a bad window, states missing a required one,
// naming no state or too many, both Unique and a key, a payload that is
// not JSON, and a caller's key under the reserved prefix are ErrInvalid and
// change nothing.
func TestUniqueRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	before := dump(e.db)
	for name, tk := range map[string]Task{
		"no window":       unique("k", `1`, 0),
		"negative window": unique("k", `1`, -time.Second),
		"tiny window":     unique("k", `1`, time.Nanosecond),
		"huge window":     unique("k", `1`, MaxDuration+time.Hour),
		"no in-flight":    unique("k", `1`, time.Minute, Ready, Scheduled),
		"waiting only":    unique("k", `1`, time.Minute, Waiting),
		"too many states": unique("k", `1`, time.Minute, Ready, Scheduled, InFlight, Dead, Completed, Waiting, Ready),
		"unknown state":   unique("k", `1`, time.Minute, Ready, Scheduled, InFlight, State(9)),
		"and a key":       {IdempotencyKey: "x", Unique: &Unique{Window: time.Minute}},
		"reserved key":    {IdempotencyKey: UniquePrefix + "abc"},
		"reserved prefix": {IdempotencyKey: ReservedPrefix + "x"},
		"invalid payload": unique("k", `{`, time.Minute),
	} {
		if _, err := q.Enqueue(ctx, tk); err == nil {
			t.Errorf("%s accepted", name)
		} else {
			wantErr(t, err, ErrInvalid)
		}
	}
	if dump(e.db) != before {
		t.Fatal("a refused enqueue changed the state")
	}
}
