package index

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unique"
	"unsafe"
)

var qk = QueueKey{Namespace{"p", "s"}, "q"}

func putBatch(s *Store, seq uint64, ts ...*Task) *Batch {
	b := &Batch{Seq: seq, Now: 100}
	for _, t := range ts {
		b.Mutations = append(b.Mutations, Mutation{Kind: MutPutTask, Task: t})
	}
	return b
}

// edit returns a new record: t with the changes fn makes to its fields.
func edit(t *Task, fn func(*Fields)) *Task {
	f := t.Fields()
	fn(&f)
	return f.Task()
}

func task(s *Store, id uint64, st TaskState) *Task {
	return (&Fields{ID: id, Queue: s.Intern(qk), State: st, MaxAttempts: 5, Priority: int64(id % 3),
		NotBefore: int64(id * 10), Payload: []byte(`{"id":1}`), Created: 1, Updated: 2}).Task()
}

func TestApplyIndexesAndCounts(t *testing.T) {
	s := NewStore()
	if _, err := s.Apply(putBatch(s, 1, task(s, 1, StateReady), task(s, 2, StateScheduled), task(s, 3, StateReady))); err != nil {
		t.Fatal(err)
	}
	q := s.Queue(qk)
	if q.Count(StateReady) != 2 || q.Count(StateScheduled) != 1 || s.NextID() != 4 || s.Seq() != 1 {
		t.Fatalf("counts %d %d next %d", q.Count(StateReady), q.Count(StateScheduled), s.NextID())
	}
	u := UpdateOf(mustTask(t, s, 1))
	u.State, u.Owner, u.Token, u.LeaseUntil, u.Attempts = StateInFlight, "w", 1, 500, 1
	b := &Batch{Seq: 2, Mutations: []Mutation{{Kind: MutUpdateTask, Update: u}, {Kind: MutDeleteTask, Update: TaskUpdate{ID: 3}}}}
	if _, err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	if q.Count(StateReady) != 0 || q.Count(StateInFlight) != 1 || s.Len() != 2 {
		t.Fatalf("after update: ready %d inflight %d len %d", q.Count(StateReady), q.Count(StateInFlight), s.Len())
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if got := mustTask(t, s, 1); string(got.Payload()) != `{"id":1}` || got.Owner() != "w" {
		t.Fatalf("update lost fields: %+v", got)
	}
}

func mustTask(t *testing.T, s *Store, id uint64) *Task {
	t.Helper()
	x, ok := s.Task(id)
	if !ok {
		t.Fatalf("task %d missing", id)
	}
	return x
}

func TestAssertionFailureAppliesNothing(t *testing.T) {
	s := NewStore()
	s.Apply(putBatch(s, 1, task(s, 1, StateReady)))
	b := &Batch{Seq: 2, Assertions: []Assertion{{Kind: AssertToken, ID: 1, Token: 7}},
		Mutations: []Mutation{{Kind: MutSetKV, KV: KV{Namespace: qk.Namespace, Key: "k", Value: []byte("v")}}}}
	b.Now = 150
	out, err := s.Apply(b)
	if err != nil || out.Seq != 2 || !strings.Contains(out.Refused, "fencing token 7") {
		t.Fatalf("a failed assertion is an outcome, not an error: %+v %v", out, err)
	}
	if _, ok := s.KV(qk.Namespace, "k"); ok {
		t.Fatal("a refused batch changed state")
	}
	if s.Seq() != 2 || s.Now() != 150 {
		t.Fatalf("a refused batch must consume its seq and time: seq %d now %d", s.Seq(), s.Now())
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []Assertion{
		{Kind: AssertKVExists, NS: qk.Namespace, Key: "k"},
		{Kind: AssertKVVersion, NS: qk.Namespace, Key: "k", Version: 1},
	} {
		if err := s.Check(&Batch{Assertions: []Assertion{a}}); !errors.Is(err, ErrAssertion) {
			t.Fatalf("%+v: %v", a, err)
		}
	}
	if err := s.Check(&Batch{Assertions: []Assertion{{Kind: AssertKVAbsent, NS: qk.Namespace, Key: "k"}}}); err != nil {
		t.Fatal(err)
	}
}

func TestApplyRejectsMisfits(t *testing.T) {
	s := NewStore()
	s.Apply(putBatch(s, 5, task(s, 1, StateReady)))
	cases := map[string]*Batch{
		"old seq":        putBatch(s, 5, task(s, 2, StateReady)),
		"missing update": {Seq: 6, Mutations: []Mutation{{Kind: MutUpdateTask, Update: TaskUpdate{ID: 9, State: StateReady}}}},
		"missing delete": {Seq: 6, Mutations: []Mutation{{Kind: MutDeleteTask, Update: TaskUpdate{ID: 9}}}},
		"bad kind":       {Seq: 6, Mutations: []Mutation{{Kind: 99}}},
		"bad state":      putBatch(s, 6, &Task{ID: 3, Queue: s.Intern(qk), State: 9}),
	}
	for name, b := range cases {
		if _, err := s.Apply(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestVerifyFindsBrokenIndex(t *testing.T) {
	s := NewStore()
	s.Apply(putBatch(s, 1, task(s, 1, StateReady), task(s, 2, StateDead)))
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Task(1)
	s.Queue(qk).Ready.Delete(tk)
	if err := s.Verify(); err == nil {
		t.Fatal("verify missed a task absent from its index")
	}
	s.Queue(qk).Ready.Set(tk)
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	s.Queue(qk).readySince.Set(sinceItem{At: tk.NotBefore, N: 2})
	if err := s.Verify(); err == nil {
		t.Fatal("verify missed a wrong ready-since count")
	}
}

func TestIdemExpiry(t *testing.T) {
	s := NewStore()
	e := Idem{Queue: qk, Key: "k", ID: 1}
	s.Apply(&Batch{Seq: 1, Mutations: []Mutation{{Kind: MutPutIdem, Idem: e}}})
	var seen []Idem
	s.ExpiredIdem(1<<62, func(e Idem) bool { seen = append(seen, e); return true })
	if len(seen) != 0 {
		t.Fatal("a live key has no expiry")
	}
	e.Expires = 50
	s.Apply(&Batch{Seq: 2, Mutations: []Mutation{{Kind: MutPutIdem, Idem: e}}})
	s.ExpiredIdem(49, func(e Idem) bool { seen = append(seen, e); return true })
	if len(seen) != 0 {
		t.Fatal("expired early")
	}
	s.ExpiredIdem(50, func(e Idem) bool { seen = append(seen, e); return true })
	if len(seen) != 1 || seen[0] != e {
		t.Fatalf("expired: %+v", seen)
	}
	s.Apply(&Batch{Seq: 3, Mutations: []Mutation{{Kind: MutDeleteIdem, Idem: e}}})
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	s := NewStore()
	full := task(s, 7, StateInFlight)
	full = edit(full, func(f *Fields) {
		f.Owner, f.Token, f.LeaseUntil, f.BackoffBase, f.BackoffMax, f.Priority = "w", 3, 99, 1000, 60000, -5
		f.Secret = 0xfeedface12345678
	})
	full.Extra = &Extra{Kind: "k", IdemKey: "i", LastError: "e", Progress: []byte(`1`), Result: []byte(`2`),
		Headers: map[string]string{"a": "b"}, Errors: []AttemptError{{Attempt: 1, At: 5, Error: "x"}, {Attempt: 2, At: -1}},
		Parent: 3, FollowUps: []uint64{8, 1 << 63}, DepPolicy: 2}
	b := &Batch{Seq: 9, Now: -3, Seed: 1<<64 - 2,
		Assertions: []Assertion{{Kind: AssertToken, ID: 7, Token: 3},
			{Kind: AssertKVVersion, NS: qk.Namespace, Key: "k", Version: 4}},
		Mutations: []Mutation{
			{Kind: MutPutTask, Task: full},
			{Kind: MutUpdateTask, Update: TaskUpdate{ID: 7, State: StateReady, Attempts: 2, NotBefore: 5, Owner: "o",
				Token: 3, LeaseUntil: 6, Updated: 7, Secret: 77, Flags: UpdProgress | UpdLastError, Progress: []byte(`{}`), LastError: "x"}},
			{Kind: MutUpdateTask, Update: TaskUpdate{ID: 7, State: StateInFlight, Flags: UpdLastError | UpdAddError,
				LastError: "lease expired", ErrAttempt: 4, ErrAt: 99}},
			{Kind: MutUpdateTask, Update: TaskUpdate{ID: 7, State: StateCompleted, Flags: UpdResult | UpdFollowUps,
				Result: []byte(`3`), FollowUps: []uint64{9, 10}}},
			{Kind: MutUpdateTask, Update: TaskUpdate{ID: 7, State: StateDead, Flags: UpdAddError | UpdFollowUps,
				ErrAttempt: 1, ErrAt: 2}},
			{Kind: MutDeleteTask, Update: TaskUpdate{ID: 7}},
			{Kind: MutDeleteTask, Update: TaskUpdate{ID: 7, Flags: UpdCompleted}},
			{Kind: MutSetKV, KV: KV{Namespace: qk.Namespace, Key: "k", Value: []byte("v")}},
			{Kind: MutDeleteKV, KV: KV{Namespace: qk.Namespace, Key: "k"}},
			{Kind: MutPutIdem, Idem: Idem{Queue: qk, Key: "i", ID: 7, Expires: 100}},
			{Kind: MutPutIdem, Idem: Idem{Queue: qk, Key: "u", ID: 7, Expires: 100, States: 0x2e}},
			{Kind: MutDeleteIdem, Idem: Idem{Queue: qk, Key: "i"}},
			{Kind: MutPutDep, Dep: Dep{Parent: 3, Child: 1 << 62}},
			{Kind: MutDeleteDep, Dep: Dep{Parent: 1 << 63, Child: 7}},
			{Kind: MutPutConf, Conf: QueueConf{Queue: qk, Paused: true, MaxInFlight: 3, Rate: 5, Per: 1000, Burst: 7,
				Credit: 6999, At: -4}},
			{Kind: MutDeleteConf, Conf: QueueConf{Queue: qk}},
		}}
	data, err := NewEncoder().Batch(b)
	if err != nil {
		t.Fatal(err)
	}
	s2 := NewStore()
	var got Batch
	if err := NewDecoder(s2).Batch(data, &got); err != nil {
		t.Fatal(err)
	}
	gt := got.Mutations[0].Task
	if gt.Queue.Key != qk || s2.Queue(qk) != nil {
		t.Fatal("decoding must carry the queue's key and change nothing in the store")
	}
	gt.Queue, full.Queue = nil, nil
	got.Mutations[0].Task, b.Mutations[0].Task = nil, nil
	if !reflect.DeepEqual(gt, full) {
		t.Fatalf("task:\n%+v\n%+v", gt, full)
	}
	if !reflect.DeepEqual(&got, b) {
		t.Fatalf("batch:\n%+v\n%+v", got, *b)
	}
	// Every strict prefix is refused, never misread.
	for i := 0; i < len(data); i++ {
		if err := NewDecoder(NewStore()).Batch(data[:i], &got); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix %d: %v", i, err)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	s := NewStore()
	enc := NewEncoder()
	dec := NewDecoder(NewStore())
	h, _ := enc.Header(5, 9, 1234)
	r, err := dec.Record(h)
	if err != nil || r.Kind != RecHeader || r.Seq != 5 || r.NextID != 9 || r.Now != 1234 {
		t.Fatalf("header %+v %v", r, err)
	}
	kv := KV{Namespace: qk.Namespace, Key: "k", Value: []byte{0, 1}, Version: 4}
	data, _ := enc.KVRecord(kv)
	if r, err = dec.Record(data); err != nil || !reflect.DeepEqual(r.KV, kv) {
		t.Fatalf("kv %+v %v", r, err)
	}
	id := Idem{Queue: qk, Key: "i", ID: 3, Expires: 8, States: 1 << StateDead}
	data, _ = enc.IdemRecord(id)
	if r, err = dec.Record(data); err != nil || r.Idem != id {
		t.Fatalf("idem %+v %v", r, err)
	}
	conf := QueueConf{Queue: qk, MaxInFlight: 1, Rate: 2, Per: 3, Burst: 4, Credit: 5, At: 6}
	data, _ = enc.ConfRecord(conf)
	if r, err = dec.Record(data); err != nil || r.Kind != RecConf || r.Conf != conf {
		t.Fatalf("conf %+v %v", r, err)
	}
	tot := QueueTotals{Queue: qk, Totals: Totals{Enqueued: 1, Claimed: 2, Completed: 3, Retried: 4, DeadLettered: 5}, Idle: 6}
	data, _ = enc.TotalsRecord(tot)
	if r, err = dec.Record(data); err != nil || r.Kind != RecTotals || r.Totals != tot {
		t.Fatalf("totals %+v %v", r, err)
	}
	dep := Dep{Parent: 3, Child: 1 << 40}
	data, _ = enc.DepRecord(dep)
	if r, err = dec.Record(data); err != nil || r.Kind != RecDep || r.Dep != dep {
		t.Fatalf("dep %+v %v", r, err)
	}
	data, _ = enc.TaskRecord(task(s, 2, StateDead))
	if r, err = dec.Record(data); err != nil || r.Task.ID != 2 || r.Task.State != StateDead {
		t.Fatalf("task %+v %v", r, err)
	}
	if _, err := dec.Record(append(data, 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatal("trailing byte accepted")
	}
}

func TestCopyIsolatesImage(t *testing.T) {
	s := NewStore()
	s.Apply(putBatch(s, 1, task(s, 1, StateReady)))
	img := s.Copy()
	u := UpdateOf(mustTask(t, s, 1))
	u.State = StateDead
	s.Apply(&Batch{Seq: 2, Mutations: []Mutation{{Kind: MutUpdateTask, Update: u}, {Kind: MutPutTask, Task: task(s, 2, StateReady)}}})
	if img.Tasks.Len() != 1 || img.Seq != 1 {
		t.Fatal("image saw later changes")
	}
	got, _ := img.Tasks.Get(&Task{ID: 1})
	if got.State != StateReady {
		t.Fatal("image record mutated in place")
	}
}

func TestExpired(t *testing.T) {
	s := NewStore()
	if s.Expired(1<<62, 1<<62) {
		t.Fatal("an empty store has something expired")
	}
	s.Apply(&Batch{Seq: 1, Mutations: []Mutation{{Kind: MutPutIdem, Idem: Idem{Queue: qk, Key: "k", ID: 1, Expires: 50}}}})
	if s.Expired(49, 0) || !s.Expired(50, 0) {
		t.Fatal("idempotency expiry not reported at its time")
	}
	done := task(s, 2, StateCompleted)
	done = edit(done, func(f *Fields) { f.Updated = 70 })
	s.Apply(&Batch{Seq: 2, Mutations: []Mutation{{Kind: MutDeleteIdem, Idem: Idem{Queue: qk, Key: "k"}}, {Kind: MutPutTask, Task: done}}})
	if s.Expired(1<<62, 0) || s.Expired(0, 69) || !s.Expired(0, 70) {
		t.Fatal("completed-task expiry not reported at its time, or reported with retention off")
	}
}

// TestTotals: Apply counts a queue's transitions, the totals outlive the
// queue's indexes while it is idle and are forgotten IdleTotalsTTL after,
// a snapshot carries them, and a restore refuses records that do not fit
// the tasks.
func TestTotals(t *testing.T) {
	s := NewStore()
	tk := task(s, 1, StateReady)
	apply := func(b *Batch) {
		t.Helper()
		b.Seq = s.Seq() + 1
		if out, err := s.Apply(b); err != nil || out.Refused != "" {
			t.Fatal(out, err)
		}
		if err := s.Verify(); err != nil {
			t.Fatal(err)
		}
	}
	apply(&Batch{Now: 10, Mutations: []Mutation{{Kind: MutPutTask, Task: tk}}})
	claim := TaskUpdate{ID: 1, State: StateInFlight, Attempts: 1, Owner: "w", Token: 1, LeaseUntil: 50}
	apply(&Batch{Now: 20, Mutations: []Mutation{{Kind: MutUpdateTask, Update: claim},
		{Kind: MutUpdateTask, Update: TaskUpdate{ID: 1, State: StateScheduled, Attempts: 1, Token: 1, NotBefore: 30,
			Flags: UpdLastError | UpdAddError, LastError: "x", ErrAttempt: 1, ErrAt: 20}}}})
	claim.Token, claim.Attempts = 2, 2
	apply(&Batch{Now: 30, Mutations: []Mutation{{Kind: MutUpdateTask, Update: claim},
		{Kind: MutDeleteTask, Update: TaskUpdate{ID: 1, Flags: UpdCompleted}}}})
	want := Totals{Enqueued: 1, Claimed: 2, Completed: 1, Retried: 1}
	rec, ok := s.totals.Get(QueueTotals{Queue: qk})
	if s.Queue(qk) != nil || !ok || rec.Totals != want || rec.Idle != 30 {
		t.Fatalf("idle queue: %v, record %+v", s.Queue(qk), rec)
	}
	// A snapshot carries the idle record.
	s2 := NewStore()
	if err := WriteImage(s.Copy(), NewEncoder(), func(b []byte) error {
		r, err := NewDecoder(s2).Record(b)
		if err == nil {
			err = s2.Load(r)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Verify(); err != nil || mustHash(t, s2) != mustHash(t, s) {
		t.Fatalf("restored totals differ: %v", err)
	}
	// Filled again, it counts on.
	apply(&Batch{Now: 40, Mutations: []Mutation{{Kind: MutPutTask, Task: task(s, 2, StateReady)}}})
	if got := s.Queue(qk).Totals(); got != (Totals{Enqueued: 2, Claimed: 2, Completed: 1, Retried: 1}) {
		t.Fatalf("refilled: %+v", got)
	}
	apply(&Batch{Now: 50, Mutations: []Mutation{{Kind: MutDeleteTask, Update: TaskUpdate{ID: 2}}}})
	apply(&Batch{Now: 50 + IdleTotalsTTL - 1})
	if _, ok := s.totals.Get(QueueTotals{Queue: qk}); !ok {
		t.Fatal("forgotten before its time")
	}
	apply(&Batch{Now: 50 + IdleTotalsTTL})
	if _, ok := s.totals.Get(QueueTotals{Queue: qk}); ok || s.idle.Len() != 0 {
		t.Fatal("idle totals kept past IdleTotalsTTL")
	}
	// A restore refuses a record that contradicts the tasks.
	s3 := NewStore()
	if err := s3.LoadTotals(QueueTotals{Queue: qk, Totals: want}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a live record for a queue without tasks: %v", err)
	}
	if err := s3.LoadTask(task(s3, 1, StateReady)); err != nil {
		t.Fatal(err)
	}
	if err := s3.LoadTotals(QueueTotals{Queue: qk, Totals: want, Idle: 5}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an idle record for a queue with tasks: %v", err)
	}
	if err := s3.LoadTotals(QueueTotals{Queue: qk, Totals: want}); err != nil {
		t.Fatal(err)
	}
	if err := s3.LoadTotals(QueueTotals{Queue: qk, Totals: want}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a record twice: %v", err)
	}
}

// TestTaskSize: a pending task's record fits the 96-byte size class, which
// is most of what the store holds per task. A field added to Task belongs
// out of line (Run, the interned Retry, Extra) unless every pending task
// needs it.
func TestTaskSize(t *testing.T) {
	if n := unsafe.Sizeof(Task{}); n > 96 {
		t.Fatalf("Task is %d bytes, more than 96", n)
	}
}

// TestTaskFields: Fields and Task round-trip every field, a task as
// enqueued has no Run, and tasks with equal policies share one.
func TestTaskFields(t *testing.T) {
	s := NewStore()
	f := Fields{ID: 3, Queue: s.QueueRef(qk), State: StateInFlight, Attempts: 2, MaxAttempts: 5, Priority: -1,
		NotBefore: 7, BackoffBase: 10, BackoffMax: 20, Owner: "w", Token: 4, LeaseUntil: 9, Secret: 11,
		Created: 1, Updated: 8, Payload: []byte(`{}`), Extra: &Extra{Kind: "k"}}
	if got := f.Task().Fields(); !reflect.DeepEqual(got, f) {
		t.Fatalf("round trip: got %+v, want %+v", got, f)
	}
	fresh := Fields{ID: 4, Queue: f.Queue, State: StateReady, MaxAttempts: 5, BackoffBase: 10, BackoffMax: 20,
		Created: 1, Updated: 1}
	tk := fresh.Task()
	if tk.Run != nil || tk.Updated() != 1 || tk.Owner() != "" || tk.Token() != 0 {
		t.Fatalf("a task as enqueued: run %+v, updated %d", tk.Run, tk.Updated())
	}
	if tk.sh != f.Task().sh {
		t.Fatal("equal retry policies are not shared")
	}
	part := PartRef("tenant")
	fp := fresh
	fp.Part = part
	withPart := fp.Task()
	if withPart.sh == tk.sh || withPart.Part() != part || withPart.Retry() != tk.Retry() {
		t.Fatalf("a partition beside the policy: part %p (want %p), policy %+v", withPart.Part(), part, withPart.Retry())
	}
	if got := withPart.Fields(); !reflect.DeepEqual(got, fp) {
		t.Fatalf("round trip with a partition: got %+v, want %+v", got, fp)
	}
	withPart.SetRetry(Retry{MaxAttempts: 9})
	if withPart.Part() != part || withPart.MaxAttempts() != 9 {
		t.Fatal("SetRetry lost the partition")
	}
	withPart.SetPart(nil)
	if withPart.Part() != nil || withPart.MaxAttempts() != 9 {
		t.Fatal("SetPart lost the policy")
	}
	if (&Fields{}).Task().Retry() != (Retry{}) {
		t.Fatal("a task without a policy has one")
	}
}

// TestOldestReadyShared: the ready-since order counts tasks per time, so
// tasks that became ready together keep their time until the last of them
// leaves, and a task out of the middle changes nothing.
func TestOldestReadyShared(t *testing.T) {
	s := NewStore()
	at := func(id uint64, nb int64) *Task {
		return edit(task(s, id, StateReady), func(f *Fields) { f.NotBefore = nb })
	}
	if _, err := s.Apply(putBatch(s, 1, at(1, 10), at(2, 5), at(3, 10), at(4, 10), at(5, 20))); err != nil {
		t.Fatal(err)
	}
	seq := uint64(1)
	oldest := func(want int64, wantOK bool) {
		t.Helper()
		if err := s.Verify(); err != nil {
			t.Fatal(err)
		}
		got, ok := s.Queue(qk).OldestReady(100)
		if s.Queue(qk) == nil || got != want || ok != wantOK {
			t.Fatalf("oldest ready %d %v, want %d %v", got, ok, want, wantOK)
		}
	}
	remove := func(ids ...uint64) {
		t.Helper()
		seq++
		b := &Batch{Seq: seq, Now: 100}
		for _, id := range ids {
			b.Mutations = append(b.Mutations, Mutation{Kind: MutDeleteTask, Update: TaskUpdate{ID: id}})
		}
		if _, err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	oldest(5, true)
	remove(2)
	oldest(10, true)
	remove(1, 4)
	oldest(10, true)
	remove(3)
	oldest(20, true)
	if _, ok := s.Queue(qk).OldestReady(19); ok {
		t.Fatal("a task ready since 20 counted at 19")
	}
}

// TestLoadCountsReadySince: a restore counts ready tasks by the time they
// became ready as Apply does, whether the records of a queue come in time
// order or not, in runs or interleaved with another queue's, and an Apply
// between loads leaves the counts right.
func TestLoadCountsReadySince(t *testing.T) {
	other := QueueKey{Namespace{"p", "s"}, "other"}
	s := NewStore()
	load := func(id uint64, k QueueKey, nb int64) {
		t.Helper()
		rec := (&Fields{ID: id, Queue: s.QueueRef(k), State: StateReady, MaxAttempts: 5,
			NotBefore: nb, Created: 1, Updated: 1}).Task()
		if err := s.LoadTask(rec); err != nil {
			t.Fatal(err)
		}
	}
	for i, nb := range []int64{10, 20, 20, 30, 15, 30, 5, 40, 40, 35} {
		k := qk
		if i%3 == 2 {
			k = other
		}
		load(uint64(i+1), k, nb)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	// An Apply that adds a later time to the queue last loaded, then a
	// load at that same time: the two count together.
	put := (&Fields{ID: 11, Queue: s.Queue(qk), State: StateReady, MaxAttempts: 5,
		NotBefore: 60, Created: 1, Updated: 1}).Task()
	if _, err := s.Apply(putBatch(s, 1, put)); err != nil {
		t.Fatal(err)
	}
	load(12, qk, 60)
	load(13, qk, 70)
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		k    QueueKey
		want int64
	}{{qk, 5}, {other, 20}} {
		if got, ok := s.Queue(c.k).OldestReady(100); !ok || got != c.want {
			t.Fatalf("%v: oldest ready %d %v, want %d", c.k.Name, got, ok, c.want)
		}
	}
}

// TestQueueLookupAfterDrop: the store's memory of the queue it looked up
// last never outlives the queue: once a queue is emptied and dropped, a
// lookup of its key finds nothing, and a task put on it again makes a new
// queue that lookups find.
func TestQueueLookupAfterDrop(t *testing.T) {
	s := NewStore()
	if _, err := s.Apply(putBatch(s, 1, task(s, 1, StateReady))); err != nil {
		t.Fatal(err)
	}
	old := s.QueueRef(qk)
	if old != s.Queue(qk) || old == nil {
		t.Fatalf("QueueRef %p, Queue %p", old, s.Queue(qk))
	}
	if _, err := s.Apply(&Batch{Seq: 2, Mutations: []Mutation{{Kind: MutDeleteTask, Update: TaskUpdate{ID: 1}}}}); err != nil {
		t.Fatal(err)
	}
	s.DropEmpty()
	if s.Queue(qk) != nil {
		t.Fatal("an empty queue was kept")
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if q := s.QueueRef(qk); q == old || s.Queue(qk) != nil {
		t.Fatalf("QueueRef after the drop gave the dropped queue (%v) or stored one", q == old)
	}
	if _, err := s.Apply(putBatch(s, 3, (&Fields{ID: 2, Queue: s.QueueRef(qk), State: StateReady, Payload: []byte(`{}`)}).Task())); err != nil {
		t.Fatal(err)
	}
	q := s.Queue(qk)
	if q == nil || q == old || s.QueueRef(qk) != q || s.Intern(qk) != q || q.Count(StateReady) != 1 {
		t.Fatalf("the queue made again: %p (old %p), QueueRef %p", q, old, s.QueueRef(qk))
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestSharedCache: through the cache of the last value, every value in
// any order gets the handle unique.Make gives, the zero value the zero
// handle; and the store's NewTask builds the record Fields.Task builds.
func TestSharedCache(t *testing.T) {
	vals := []shared{{Retry: Retry{MaxAttempts: 5}}, {Retry: Retry{MaxAttempts: 5}}, {Retry: Retry{MaxAttempts: 5, BackoffBase: 1}},
		{}, {part: PartRef("p")}, {Retry: Retry{MaxAttempts: 5}, part: PartRef("p")}, {Retry: Retry{MaxAttempts: 5}}}
	var c sharedCache
	for i, v := range vals {
		want := unique.Handle[shared]{}
		if v != (shared{}) {
			want = unique.Make(v)
		}
		if h := c.handle(v); h != want {
			t.Fatalf("value %d (%+v): handle of %+v", i, v, h.Value())
		}
	}
	s := NewStore()
	for _, f := range []Fields{
		{ID: 1, Queue: s.Intern(qk), State: StateReady, MaxAttempts: 5, BackoffBase: 1, BackoffMax: 2, Created: 3, Updated: 3, Payload: []byte(`{}`)},
		{ID: 2, Queue: s.Intern(qk), State: StateReady, MaxAttempts: 7, Created: 3, Updated: 4, Part: PartRef("p")},
		{ID: 3, Queue: s.Intern(qk), State: StateReady, Created: 3, Updated: 3},
		{ID: 4, Queue: s.Intern(qk), State: StateReady, MaxAttempts: 5, BackoffBase: 1, BackoffMax: 2, Created: 3, Updated: 3},
	} {
		if got, want := s.NewTask(&f), f.Task(); !reflect.DeepEqual(got, want) {
			t.Fatalf("NewTask %+v, Task %+v", got.Fields(), want.Fields())
		}
	}
}

// TestIdleTotalsCapped: past MaxIdleTotals idle queues, Apply forgets the
// totals of those idle longest (by time, then key), in the batch that makes
// one too many idle, and a restored image holding more is cut to the bound
// by the next Apply.
func TestIdleTotalsCapped(t *testing.T) {
	s := NewStore()
	key := func(i int) QueueKey {
		return QueueKey{Namespace{"p", fmt.Sprintf("s%d", i%7)}, fmt.Sprintf("q%05d", i)}
	}
	apply := func(b *Batch) {
		t.Helper()
		b.Seq = s.Seq() + 1
		if out, err := s.Apply(b); err != nil || out.Refused != "" {
			t.Fatal(out, err)
		}
	}
	// Queue i holds task i+1 from time 2i to 2i+1; queues 0 and 1 go idle
	// in the same batch (time 1).
	const n = MaxIdleTotals + 10
	for i := range n {
		tk := (&Fields{ID: uint64(i + 1), Queue: s.Intern(key(i)), State: StateReady, MaxAttempts: 5}).Task()
		apply(&Batch{Now: int64(2 * i), Mutations: []Mutation{{Kind: MutPutTask, Task: tk}}})
		if i == 0 {
			continue
		}
		del := []Mutation{{Kind: MutDeleteTask, Update: TaskUpdate{ID: uint64(i + 1)}}}
		if i == 1 {
			del = append(del, Mutation{Kind: MutDeleteTask, Update: TaskUpdate{ID: 1}})
		}
		apply(&Batch{Now: int64(2*i + 1), Mutations: del})
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if s.idle.Len() != MaxIdleTotals || s.totals.Len() != MaxIdleTotals {
		t.Fatalf("%d idle, %d totals records; want %d", s.idle.Len(), s.totals.Len(), MaxIdleTotals)
	}
	// The first 10 to go idle are forgotten: queues 0 and 1 (time 3, key
	// order), then 2..9.
	for i := range n {
		_, kept := s.totals.Get(QueueTotals{Queue: key(i)})
		if kept != (i >= 10) {
			t.Fatalf("queue %d: kept %v", i, kept)
		}
	}
	// An image with more idle records (from a version without the bound)
	// restores as it is; the next Apply cuts it to the bound.
	s2 := NewStore()
	s2.Restore(1, 1, int64(n+100))
	for i := range n + 100 {
		if err := s2.LoadTotals(QueueTotals{Queue: key(i), Totals: Totals{Enqueued: 1}, Idle: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s2.Apply(&Batch{Seq: 2, Now: int64(n + 100)}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Verify(); err != nil || s2.idle.Len() != MaxIdleTotals {
		t.Fatalf("%d idle after the first apply: %v", s2.idle.Len(), err)
	}
	if _, ok := s2.totals.Get(QueueTotals{Queue: key(n + 99)}); !ok {
		t.Fatal("the latest idle record was forgotten")
	}
}

// TestNamespacesFrom: the namespaces of the queues in memory and of the
// settings records, each once, in order, from a given one on; QueuesIn and
// ConfsIn give one namespace's, and a queue emptied and dropped leaves them.
func TestNamespacesFrom(t *testing.T) {
	s := NewStore()
	keys := []QueueKey{
		{Namespace{"a", "x"}, "q2"}, {Namespace{"a", "x"}, "q1"}, {Namespace{"a", "x0"}, "q"},
		{Namespace{"a", "x\x00"}, "q"}, {Namespace{"b", ""}, "q"}, {Namespace{"a", "xy"}, "q"},
	}
	var muts []Mutation
	for i, k := range keys {
		muts = append(muts, Mutation{Kind: MutPutTask, Task: (&Fields{ID: uint64(i + 1), Queue: s.Intern(k), State: StateReady, MaxAttempts: 5}).Task()})
	}
	muts = append(muts, Mutation{Kind: MutPutConf, Conf: QueueConf{Queue: QueueKey{Namespace{"a", "w"}, "c"}, Paused: true}},
		Mutation{Kind: MutPutConf, Conf: QueueConf{Queue: QueueKey{Namespace{"a", "x"}, "c"}, Paused: true}})
	if out, err := s.Apply(&Batch{Seq: 1, Now: 1, Mutations: muts}); err != nil || out.Refused != "" {
		t.Fatal(out, err)
	}
	list := func(from Namespace, max int) []Namespace {
		var out []Namespace
		s.NamespacesFrom(from, func(ns Namespace) bool {
			out = append(out, ns)
			return len(out) < max
		})
		return out
	}
	all := []Namespace{{"a", "w"}, {"a", "x"}, {"a", "x\x00"}, {"a", "x0"}, {"a", "xy"}, {"b", ""}}
	if got := list(Namespace{}, 100); !reflect.DeepEqual(got, all) {
		t.Fatalf("namespaces %q, want %q", got, all)
	}
	if got := list(Namespace{"a", "x\x00"}, 2); !reflect.DeepEqual(got, all[2:4]) {
		t.Fatalf("from a/x\\x00: %q", got)
	}
	var names []string
	s.QueuesIn(Namespace{"a", "x"}, func(q *Queue) bool { names = append(names, q.Key.Name); return true })
	s.ConfsIn(Namespace{"a", "x"}, func(c QueueConf) bool { names = append(names, "conf "+c.Queue.Name); return true })
	if !reflect.DeepEqual(names, []string{"q1", "q2", "conf c"}) {
		t.Fatalf("a/x holds %q", names)
	}
	// Emptied, b/ and a/x0 are gone from the order.
	del := []Mutation{{Kind: MutDeleteTask, Update: TaskUpdate{ID: 5}}, {Kind: MutDeleteTask, Update: TaskUpdate{ID: 3}}}
	if out, err := s.Apply(&Batch{Seq: 2, Now: 2, Mutations: del}); err != nil || out.Refused != "" {
		t.Fatal(out, err)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if got, want := list(Namespace{}, 100), []Namespace{{"a", "w"}, {"a", "x"}, {"a", "x\x00"}, {"a", "xy"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after emptying: %q", got)
	}
}
