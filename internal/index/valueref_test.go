package index

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestRecordSizes: value references cost a record that has none nothing.
// A pending task stays in the 96-byte size class (TestTaskSize), its
// payload's reference in the payload's place (TestPayloadSizes), and the
// references of its result and progress hang off Extra by one pointer,
// which keeps Extra in its 176-byte size class.
func TestRecordSizes(t *testing.T) {
	if n := unsafe.Sizeof(Task{}); n != 96 {
		t.Errorf("Task is %d bytes, want 96", n)
	}
	if n := unsafe.Sizeof(Extra{}); n > 176 {
		t.Errorf("Extra is %d bytes, more than its 176-byte size class", n)
	}
	if n := unsafe.Sizeof(ValueRef{}); n != 24 {
		t.Errorf("ValueRef is %d bytes, want 24 (the value log's Ref has the same fields)", n)
	}
}

func refTask(s *Store, id uint64, payload ValueRef) *Task {
	f := Fields{ID: id, Queue: s.QueueRef(qk), State: StateReady, MaxAttempts: 3, NotBefore: 10, Created: 1, Updated: 1}
	if !payload.IsZero() {
		f.PayloadRef = payload
	} else {
		f.Payload = []byte("inline")
	}
	return f.Task()
}

func mustApply(t *testing.T, s *Store, b *Batch) {
	t.Helper()
	if out, err := s.Apply(b); err != nil || out.Refused != "" {
		t.Fatalf("batch %d: %v %s", b.Seq, err, out.Refused)
	}
	if err := s.Verify(); err != nil {
		t.Fatalf("batch %d: %v", b.Seq, err)
	}
}

func wantLive(t *testing.T, s *Store, want ...FileBytes) {
	t.Helper()
	if got := s.LiveBytes(); !(len(got) == 0 && len(want) == 0) && !reflect.DeepEqual(got, want) {
		t.Fatalf("live bytes %v, want %v", got, want)
	}
}

// TestApplyValueRefs: puts, updates, deletes and moves of values by
// reference keep the live bytes per file and the usage; a move of a value
// that moved or went meanwhile changes nothing.
func TestApplyValueRefs(t *testing.T) {
	s := NewStore()
	r1 := ValueRef{File: 1, Off: 0, Len: 5000}
	mustApply(t, s, &Batch{Seq: 1, Now: 10, Mutations: []Mutation{
		{Kind: MutPutTask, Task: refTask(s, 1, r1)},
		{Kind: MutPutTask, Task: refTask(s, 2, ValueRef{})},
		{Kind: MutSetKV, KV: KV{Namespace: qk.Namespace, Key: "big", Ref: &ValueRef{File: 2, Off: 7, Len: 900}}},
	}})
	wantLive(t, s, FileBytes{1, 5000}, FileBytes{2, 900})
	t1 := mustTask(t, s, 1)
	if t1.PayloadRef() != r1 || t1.Payload() != nil || t1.Extra != nil {
		t.Fatalf("payload ref %+v, payload %q, extra %+v", t1.PayloadRef(), t1.Payload(), t1.Extra)
	}
	// A value by reference costs its reference in the usage, not its
	// length; a payload's reference is in the task, in the payload's place.
	if got, want := TaskBytes(t1), TaskCost+RunCost; got != want {
		t.Fatalf("a task with a referenced payload costs %d, want %d", got, want)
	}
	kv, _ := s.KV(qk.Namespace, "big")
	if got, want := KVBytes(&kv), KVCost+int64(len("p")+len("s")+len("big"))+KVRefCost; got != want {
		t.Fatalf("a referenced KV value costs %d, want %d", got, want)
	}

	// Progress and result by reference; the payload's stays.
	u := UpdateOf(t1)
	u.State, u.Owner, u.Token, u.LeaseUntil, u.Attempts = StateInFlight, "w", 1, 50, 1
	u.Flags, u.ProgressRef = UpdProgress, ValueRef{File: 3, Off: 0, Len: 100}
	mustApply(t, s, &Batch{Seq: 2, Now: 20, Mutations: []Mutation{{Kind: MutUpdateTask, Update: u}}})
	wantLive(t, s, FileBytes{1, 5000}, FileBytes{2, 900}, FileBytes{3, 100})
	u = UpdateOf(mustTask(t, s, 1))
	u.State, u.Flags = StateCompleted, UpdResult|UpdProgress
	u.ResultRef, u.Progress = ValueRef{File: 3, Off: 100, Len: 40}, []byte("p")
	mustApply(t, s, &Batch{Seq: 3, Now: 30, Mutations: []Mutation{{Kind: MutUpdateTask, Update: u}}})
	wantLive(t, s, FileBytes{1, 5000}, FileBytes{2, 900}, FileBytes{3, 40})
	t1 = mustTask(t, s, 1)
	if x := t1.Ex(); x.ResultRef() != u.ResultRef || !x.ProgressRef().IsZero() || string(x.Progress) != "p" || t1.PayloadRef() != r1 {
		t.Fatalf("after the updates: refs %+v, progress %q", *x.Refs, x.Progress)
	}

	// A move installs the new place where the old one is current.
	r1b := ValueRef{File: 4, Off: 0, Len: 5000}
	mustApply(t, s, &Batch{Seq: 4, Now: 40, Mutations: []Mutation{
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 1, Old: r1, New: r1b}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValueKV, NS: qk.Namespace, Key: "big", Old: ValueRef{File: 2, Off: 7, Len: 900},
			New: ValueRef{File: 4, Off: 5000, Len: 900}}},
	}})
	wantLive(t, s, FileBytes{3, 40}, FileBytes{4, 5900})
	mustApply(t, s, &Batch{Seq: 5, Now: 40, Mutations: []Mutation{
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 1, Old: r1b, New: r1b}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 1, Old: r1b, New: r1}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 1, Old: r1, New: r1b}},
	}})
	if got := mustTask(t, s, 1).PayloadRef(); got != r1b {
		t.Fatalf("moved payload at %+v, want %+v", got, r1b)
	}
	if kv2, _ := s.KV(qk.Namespace, "big"); kv2.Version != kv.Version || kv2.ValueRef() != (ValueRef{File: 4, Off: 5000, Len: 900}) {
		t.Fatalf("moved KV %+v (version %d, was %d)", kv2.ValueRef(), kv2.Version, kv.Version)
	}

	// A stale move (the value is elsewhere, the task or key gone, a value
	// in line) is left alone, and is no error.
	before := stateRecords(t, s)[1:]
	mustApply(t, s, &Batch{Seq: 6, Now: 40, Mutations: []Mutation{
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 1, Old: r1, New: ValueRef{File: 5, Len: 5000}}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 2, Old: r1, New: ValueRef{File: 5, Len: 5000}}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValueResult, ID: 99, Old: r1, New: ValueRef{File: 5, Len: 5000}}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValueKV, NS: qk.Namespace, Key: "nope", Old: r1, New: ValueRef{File: 5, Len: 1}}},
	}})
	wantLive(t, s, FileBytes{3, 40}, FileBytes{4, 5900})
	if after := stateRecords(t, s)[1:]; !reflect.DeepEqual(after, before) {
		t.Fatal("a stale move changed a record")
	}

	// Replacing and deleting drop the references.
	mustApply(t, s, &Batch{Seq: 7, Now: 50, Mutations: []Mutation{
		{Kind: MutSetKV, KV: KV{Namespace: qk.Namespace, Key: "big", Value: []byte("small")}},
		{Kind: MutDeleteTask, Update: TaskUpdate{ID: 1, Flags: UpdCompleted}},
	}})
	wantLive(t, s)
}

// stateRecords is the snapshot records of s, the header first.
func stateRecords(t *testing.T, s *Store) [][]byte {
	t.Helper()
	var out [][]byte
	if err := WriteImage(s.Copy(), NewEncoder(), func(rec []byte) error {
		out = append(out, slices.Clone(rec))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStaleMoveChangesNothing: a move whose old place is not the record's
// current one leaves every record as it was.
func TestStaleMoveChangesNothing(t *testing.T) {
	s := NewStore()
	r := ValueRef{File: 1, Off: 10, Len: 300}
	mustApply(t, s, &Batch{Seq: 1, Now: 10, Mutations: []Mutation{
		{Kind: MutPutTask, Task: refTask(s, 1, r)},
		{Kind: MutPutTask, Task: refTask(s, 2, ValueRef{})},
		{Kind: MutSetKV, KV: KV{Namespace: qk.Namespace, Key: "k", Ref: &ValueRef{File: 1, Off: 400, Len: 9}}},
	}})
	before := stateRecords(t, s)[1:]
	live := s.LiveBytes()
	to := ValueRef{File: 9, Len: 300}
	mustApply(t, s, &Batch{Seq: 2, Now: 10, Mutations: []Mutation{
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 1, Old: ValueRef{File: 1, Off: 11, Len: 300}, New: to}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValueResult, ID: 1, Old: r, New: to}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 2, Old: r, New: to}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 3, Old: r, New: to}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValueKV, NS: qk.Namespace, Key: "k", Old: r, New: to}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValueKV, NS: qk.Namespace, Key: "gone", Old: r, New: to}},
	}})
	if after := stateRecords(t, s)[1:]; !reflect.DeepEqual(after, before) {
		t.Fatal("a stale move changed a record")
	}
	if got := s.LiveBytes(); !reflect.DeepEqual(got, live) {
		t.Fatalf("a stale move changed the live bytes: %v, was %v", got, live)
	}
}

// TestVerifyFindsValueAndRef: a record loaded with a value both in line
// and by reference (Load takes records as they come) fails Verify. (A
// payload cannot be both: it takes one place.)
func TestVerifyFindsValueAndRef(t *testing.T) {
	s := NewStore()
	s.Restore(1, 1, 0)
	tk := refTask(s, 1, ValueRef{})
	tk.Extra = &Extra{Result: []byte("x"), Refs: &TaskRefs{Result: ValueRef{File: 1, Len: 3}}}
	if err := s.LoadTask(tk); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err == nil || !strings.Contains(err.Error(), "both in line") {
		t.Fatalf("Verify: %v", err)
	}
	s = NewStore()
	s.Restore(1, 1, 0)
	if err := s.LoadKV(KV{Namespace: qk.Namespace, Key: "k", Value: []byte("x"), Ref: &ValueRef{Len: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err == nil || !strings.Contains(err.Error(), "both in line") {
		t.Fatalf("Verify: %v", err)
	}
}

// TestMoveWakesNobody: a move of a ready task's value leaves it as
// claimable as it was, so no queue is reported as having gained work.
func TestMoveWakesNobody(t *testing.T) {
	s := NewStore()
	r := ValueRef{File: 1, Len: 10}
	mustApply(t, s, &Batch{Seq: 1, Now: 10, Mutations: []Mutation{{Kind: MutPutTask, Task: refTask(s, 1, r)}}})
	if len(s.Affected()) != 1 {
		t.Fatalf("a new ready task affected %d queues", len(s.Affected()))
	}
	mustApply(t, s, &Batch{Seq: 2, Now: 10, Mutations: []Mutation{
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 1, Old: r, New: ValueRef{File: 2, Len: 10}}}}})
	if len(s.Affected()) != 0 || mustTask(t, s, 1).PayloadRef().File != 2 {
		t.Fatalf("the move affected %d queues", len(s.Affected()))
	}
}

// TestApplyRefusesValueAndRef: a batch that sets a value both in line and
// by reference, or a malformed reference, is refused with an error and
// changes nothing, not even the sequence number; the encoder refuses it
// too.
func TestApplyRefusesValueAndRef(t *testing.T) {
	r := ValueRef{File: 1, Off: 0, Len: 10}
	for _, tc := range []struct {
		name, msg string
		m         Mutation
	}{
		{"result", "result both in line", Mutation{Kind: MutPutTask, Task: (&Fields{ID: 5, Queue: &Queue{Key: qk}, State: StateReady,
			Extra: &Extra{Result: []byte("x"), Refs: &TaskRefs{Result: r}}}).Task()}},
		{"update progress", "progress both in line", Mutation{Kind: MutUpdateTask, Update: TaskUpdate{ID: 1, State: StateReady,
			Flags: UpdProgress, Progress: []byte("x"), ProgressRef: r}}},
		{"update result", "result both in line", Mutation{Kind: MutUpdateTask, Update: TaskUpdate{ID: 1, State: StateReady,
			Flags: UpdResult, Result: []byte("x"), ResultRef: r}}},
		{"update ref without its flag", "does not replace", Mutation{Kind: MutUpdateTask, Update: TaskUpdate{ID: 1, State: StateReady,
			ResultRef: r}}},
		{"kv", "value both in line", Mutation{Kind: MutSetKV, KV: KV{Namespace: qk.Namespace, Key: "k", Value: []byte("x"), Ref: &r}}},
		{"kv empty ref", "malformed", Mutation{Kind: MutSetKV, KV: KV{Namespace: qk.Namespace, Key: "k", Ref: &ValueRef{}}}},
		{"ref of no length", "malformed", Mutation{Kind: MutPutTask, Task: (&Fields{ID: 5, Queue: &Queue{Key: qk}, State: StateReady,
			PayloadRef: ValueRef{File: 1, Off: 3}}).Task()}},
		{"negative offset", "malformed", Mutation{Kind: MutUpdateTask, Update: TaskUpdate{ID: 1, State: StateReady,
			Flags: UpdProgress, ProgressRef: ValueRef{Off: -1, Len: 3}}}},
		{"move from nowhere", "value move", Mutation{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 1, New: r}}},
		{"move of no kind", "value move", Mutation{Kind: MutMoveValue, Move: ValueMove{ID: 1, Old: r, New: r}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			mustApply(t, s, &Batch{Seq: 1, Now: 10, Mutations: []Mutation{{Kind: MutPutTask, Task: refTask(s, 1, ValueRef{})}}})
			before, live := stateRecords(t, s), s.LiveBytes()
			// The bad mutation comes last: what comes before it is not
			// applied either.
			b := &Batch{Seq: 2, Now: 20, Mutations: []Mutation{{Kind: MutDeleteTask, Update: TaskUpdate{ID: 1}}, tc.m}}
			_, err := s.Apply(b)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Apply: %v, want an error saying %q", err, tc.msg)
			}
			if after := stateRecords(t, s); !reflect.DeepEqual(after, before) || s.Seq() != 1 || !reflect.DeepEqual(s.LiveBytes(), live) {
				t.Fatal("a refused batch changed the state")
			}
			if err := s.Verify(); err != nil {
				t.Fatal(err)
			}
			if _, err := NewEncoder().Batch(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("the encoder took it: %v", err)
			}
		})
	}
}

// refBatch is a batch with every value by reference and a move of each kind.
func refBatch(q *Queue) *Batch {
	ns := q.Key.Namespace
	return &Batch{Seq: 9, Now: 100, Mutations: []Mutation{
		{Kind: MutPutTask, Task: (&Fields{ID: 20, Queue: q, State: StateReady, MaxAttempts: 2, NotBefore: 100, Created: 100, Updated: 100,
			PayloadRef: ValueRef{File: 1, Off: 0, Len: 70_000}}).Task()},
		{Kind: MutPutTask, Task: (&Fields{ID: 21, Queue: q, State: StateCompleted, Created: 100, Updated: 100, Payload: []byte("p"),
			Extra: &Extra{Kind: "k", Progress: []byte("1"), Refs: &TaskRefs{Result: ValueRef{File: 1 << 31, Off: 1 << 40, Len: 1<<32 - 1}}}}).Task()},
		{Kind: MutPutTask, Task: (&Fields{ID: 22, Queue: q, State: StateReady, Created: 100, Updated: 100, Part: PartRef("t"),
			PayloadRef: ValueRef{Len: 1}, Extra: &Extra{Refs: &TaskRefs{Progress: ValueRef{File: 2, Off: 5, Len: 300}}}}).Task()},
		{Kind: MutUpdateTask, Update: TaskUpdate{ID: 20, State: StateInFlight, Owner: "w", Token: 1, LeaseUntil: 500, Updated: 100,
			Flags: UpdProgress | UpdResult, ProgressRef: ValueRef{File: 3, Off: 9, Len: 4096}, Result: []byte("r")}},
		{Kind: MutUpdateTask, Update: TaskUpdate{ID: 20, State: StateInFlight, Owner: "w", Token: 1, LeaseUntil: 500, Updated: 100,
			Flags: UpdResult, ResultRef: ValueRef{File: 3, Off: 4105, Len: 12}}},
		{Kind: MutSetKV, KV: KV{Namespace: ns, Key: "big", Ref: &ValueRef{File: 4, Off: 0, Len: 1 << 20}}},
		{Kind: MutPutTask, Task: (&Fields{ID: 23, Queue: q, State: StateReady, MaxAttempts: 2, NotBefore: 100, Created: 100, Updated: 100,
			PayloadRef: ValueRef{File: 7, Off: 1 << 40, Len: 10}}).Task()},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 20, Old: ValueRef{File: 1, Len: 70_000}, New: ValueRef{File: 5, Len: 70_000}}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValueResult, ID: 21, Old: ValueRef{File: 1 << 31, Off: 1 << 40, Len: 1<<32 - 1},
			New: ValueRef{File: 6, Off: 1, Len: 1<<32 - 1}}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValueProgress, ID: 22, Old: ValueRef{File: 2, Off: 5, Len: 300}, New: ValueRef{File: 5, Off: 70_000, Len: 300}}},
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValueKV, NS: ns, Key: "big", Old: ValueRef{File: 4, Len: 1 << 20}, New: ValueRef{File: 5, Off: 80_000, Len: 1 << 20}}},
	}}
}

// TestCodecValueRefs: a batch with references encodes as version 7 and
// decodes to the same batch, applies, and its state's snapshot records
// round-trip, through the fast task decoder too.
func TestCodecValueRefs(t *testing.T) {
	s := NewStore()
	b := refBatch(s.QueueRef(qk))
	data, err := NewEncoder().Batch(b)
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != batchVersion {
		t.Fatalf("a batch with references is version %d", data[0])
	}
	var b2 Batch
	if err := NewDecoder(s).Batch(data, &b2); err != nil {
		t.Fatal(err)
	}
	if got, want := renderBatch(&b2), renderBatch(b); got != want {
		t.Fatalf("round trip:\n%s\nwant\n%s", got, want)
	}
	mustApply(t, s, &b2)
	wantLive(t, s, FileBytes{0, 1}, FileBytes{3, 4096 + 12}, FileBytes{5, 70_000 + 300 + 1<<20}, FileBytes{6, 1<<32 - 1}, FileBytes{7, 10})

	// Restore the snapshot records into a new store: the same records,
	// the same live bytes and usage.
	r := NewStore()
	dec := NewDecoder(r)
	fast := 0
	for _, rec := range stateRecords(t, s) {
		if _, ok := NewDecoder(NewStore()).fastTask(rec); ok {
			fast++
		}
		got, err := dec.Record(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Load(got); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Loaded(); err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if fast != 1 {
		t.Fatalf("%d task records took the fast path, want 1 (the one with only its payload by reference)", fast)
	}
	if !reflect.DeepEqual(stateRecords(t, r), stateRecords(t, s)) || !reflect.DeepEqual(r.LiveBytes(), s.LiveBytes()) ||
		r.Usage() != s.Usage() {
		t.Fatalf("the restored state differs: live %v, was %v; usage %+v, was %+v", r.LiveBytes(), s.LiveBytes(), r.Usage(), s.Usage())
	}
}

// TestRefFreeBytesUnchanged: a state with no value references, its
// batches and its snapshot records, encode to the bytes they had before
// references (the hash was taken from the encoder of version 6).
func TestRefFreeBytesUnchanged(t *testing.T) {
	h := sha256.New()
	for _, data := range batchSeeds(t) {
		fmt.Fprintf(h, "%d:", len(data))
		h.Write(data)
		s := fuzzStore(t)
		var b Batch
		if err := NewDecoder(s).Batch(data, &b); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(&b); err != nil {
			continue // a seed that does not fit the state; its bytes count
		}
		h.Write(stateBytes(t, s))
	}
	for _, r := range recordSeeds(t) {
		fmt.Fprintf(h, "%d:", len(r))
		h.Write(r)
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), "68d9595208c96aadd1eb7dfc059108b4b722c77e096aea7e98f4fe944ab2609e"; got != want {
		t.Fatalf("encodings without references changed: hash %s, want %s", got, want)
	}
}

// TestRefsNeedVersion7: a reference where a version 6 batch has a value
// is damage, as is a move in one; version 7 reads them.
func TestRefsNeedVersion7(t *testing.T) {
	s := NewStore()
	for i, m := range refBatch(s.QueueRef(qk)).Mutations {
		data, err := NewEncoder().Batch(&Batch{Seq: 1, Mutations: []Mutation{m}})
		if err != nil {
			t.Fatal(err)
		}
		var b Batch
		if err := NewDecoder(s).Batch(data, &b); err != nil {
			t.Fatalf("mutation %d: %v", i, err)
		}
		old := slices.Clone(data)
		old[0] = batchVersion6
		if err := NewDecoder(s).Batch(old, &b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("mutation %d read as version 6: %v", i, err)
		}
	}
}

// TestLiveBytesFollowRandomBatches applies random batches of puts,
// updates, deletes and moves of values by reference and in line, and
// checks after each (Verify) that the usage and the live bytes per file
// are what a walk of the records makes, and that a replay of the logged
// batches and a restore of the snapshot give the same state.
func TestLiveBytesFollowRandomBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	s := NewStore()
	q := s.QueueRef(qk)
	enc := NewEncoder()
	var log [][]byte
	randRef := func() ValueRef {
		if rng.IntN(3) == 0 {
			return ValueRef{}
		}
		return ValueRef{File: uint32(rng.IntN(4)), Off: int64(rng.IntN(1 << 20)), Len: uint32(1 + rng.IntN(5000))}
	}
	value := func(r ValueRef) []byte {
		if r.IsZero() && rng.IntN(2) == 0 {
			return []byte(strings.Repeat("v", rng.IntN(50)))
		}
		return nil
	}
	moved := 0 // moves that take effect
	batches := 300
	if testing.Short() {
		batches = 100
	}
	for seq := uint64(1); seq <= uint64(batches); seq++ {
		b := &Batch{Seq: seq, Now: int64(seq)}
		touched := map[uint64]bool{}
		for range 1 + rng.IntN(6) {
			id := uint64(1 + rng.IntN(30))
			key := fmt.Sprintf("k%d", rng.IntN(10))
			cur, exists := s.Task(id)
			if touched[id] {
				continue // one mutation a task a batch: cur is the state before it
			}
			touched[id] = true
			switch op := rng.IntN(7); {
			case op == 0 || !exists && op < 4:
				pr, rr := randRef(), randRef()
				x := &Extra{Result: value(rr)}
				if !rr.IsZero() {
					x.Refs = &TaskRefs{Result: rr}
				}
				b.Mutations = append(b.Mutations, Mutation{Kind: MutPutTask, Task: (&Fields{ID: id, Queue: q, State: StateReady,
					MaxAttempts: 3, Payload: value(pr), PayloadRef: pr, Extra: x}).Task()})
			case op == 1:
				u := UpdateOf(cur)
				u.Flags = UpdProgress | UpdResult
				u.ProgressRef, u.ResultRef = randRef(), randRef()
				u.Progress, u.Result = value(u.ProgressRef), value(u.ResultRef)
				b.Mutations = append(b.Mutations, Mutation{Kind: MutUpdateTask, Update: u})
			case op == 2:
				b.Mutations = append(b.Mutations, Mutation{Kind: MutDeleteTask, Update: TaskUpdate{ID: id}})
			case op == 3:
				k := ValueKind(1 + rng.IntN(3))
				old := cur.Ex().Refs.get(k)
				if old.IsZero() || rng.IntN(4) == 0 {
					old = ValueRef{File: 1, Len: 1} // most likely stale
				}
				if old == cur.Ex().Refs.get(k) {
					moved++
				}
				b.Mutations = append(b.Mutations, Mutation{Kind: MutMoveValue, Move: ValueMove{Kind: k, ID: id, Old: old,
					New: ValueRef{File: uint32(rng.IntN(6)), Off: int64(rng.IntN(1000)), Len: old.Len}}})
			case op == 4:
				kv := KV{Namespace: qk.Namespace, Key: key}
				if r := randRef(); !r.IsZero() {
					kv.Ref = &r
				} else {
					kv.Value = value(r)
				}
				b.Mutations = append(b.Mutations, Mutation{Kind: MutSetKV, KV: kv})
			case op == 5:
				old := ValueRef{File: 2, Len: 2}
				if e, ok := s.KV(qk.Namespace, key); ok && e.Ref != nil && rng.IntN(4) != 0 {
					old = *e.Ref
					moved++
				}
				b.Mutations = append(b.Mutations, Mutation{Kind: MutMoveValue, Move: ValueMove{Kind: ValueKV, NS: qk.Namespace, Key: key,
					Old: old, New: ValueRef{File: uint32(rng.IntN(6)), Off: int64(rng.IntN(1000)), Len: old.Len}}})
			default:
				b.Mutations = append(b.Mutations, Mutation{Kind: MutDeleteKV, KV: KV{Namespace: qk.Namespace, Key: key}})
			}
		}
		data, err := enc.Batch(b)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, slices.Clone(data))
		mustApply(t, s, b)
	}
	var total int64
	for _, f := range s.LiveBytes() {
		total += f.Bytes
	}
	if total == 0 || moved < 10 {
		t.Fatalf("the random batches left %d bytes referenced and moved %d values: the test tests little", total, moved)
	}

	// Replaying the log gives the same state, byte for byte.
	r := NewStore()
	for i, data := range log {
		var b Batch
		if err := NewDecoder(r).Batch(data, &b); err != nil {
			t.Fatalf("batch %d: %v", i+1, err)
		}
		mustApply(t, r, &b)
	}
	if mustHash(t, r) != mustHash(t, s) || !reflect.DeepEqual(r.LiveBytes(), s.LiveBytes()) {
		t.Fatal("a replay of the log gives another state")
	}
}
