package index

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func collect(each func(fn func(uint64) bool)) []uint64 {
	var out []uint64
	each(func(id uint64) bool { out = append(out, id); return true })
	return out
}

// depStore holds parents 1 (ready) and 2 (in flight on its last attempt,
// lease until 500), and task 3 waiting on both.
func depStore(t *testing.T) *Store {
	t.Helper()
	s := NewStore()
	p2 := task(s, 2, StateInFlight)
	p2 = edit(p2, func(f *Fields) { f.Owner, f.Token, f.Attempts, f.MaxAttempts, f.LeaseUntil = "w", 1, 1, 1, 500 })
	b := putBatch(s, 1, task(s, 1, StateReady), p2, task(s, 3, StateWaiting))
	b.Mutations = append(b.Mutations, Mutation{Kind: MutPutDep, Dep: Dep{1, 3}}, Mutation{Kind: MutPutDep, Dep: Dep{2, 3}})
	if _, err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDepIndexes: a dependency is found from both ends, counted for its
// dependent, and a last-attempt lease of a parent is in the expiring order
// only while something waits for it; a snapshot image carries the records
// and restores to the same state.
func TestDepIndexes(t *testing.T) {
	s := depStore(t)
	if s.Waits(3) != 2 || s.Waits(1) != 0 || !s.HasDependents(1) || s.HasDependents(3) || s.NumDeps() != 2 {
		t.Fatalf("waits %d, dependents %v %v", s.Waits(3), s.HasDependents(1), s.HasDependents(3))
	}
	if got := collect(func(fn func(uint64) bool) { s.WaitingOn(3, fn) }); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("waiting on %v", got)
	}
	if got := collect(func(fn func(uint64) bool) { s.Dependents(2, 0, fn) }); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("dependents %v", got)
	}
	if q := s.Queue(qk); q.Count(StateWaiting) != 1 || q.Waiting.Len() != 1 || q.Len() != 3 {
		t.Fatalf("queue counts %d", q.Count(StateWaiting))
	}
	expired := func(now int64) []uint64 { return collect(func(fn func(uint64) bool) { s.ExpiredParents(now, fn) }) }
	if got := expired(499); len(got) != 0 || s.Expired(499, 0) {
		t.Fatalf("expired before the deadline: %v", got)
	}
	if got := expired(500); !slices.Equal(got, []uint64{2}) || !s.Expired(500, 0) {
		t.Fatalf("expired at the deadline: %v", got)
	}
	// The image round trip.
	var recs [][]byte
	if err := WriteImage(s.Copy(), NewEncoder(), func(r []byte) error { recs = append(recs, bytes.Clone(r)); return nil }); err != nil {
		t.Fatal(err)
	}
	r := NewStore()
	dec := NewDecoder(r)
	for _, rec := range recs {
		x, err := dec.Record(rec)
		if err == nil {
			err = r.Load(x)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if h1, h2 := mustHash(t, s), mustHash(t, r); h1 != h2 || !slices.Equal(expiredOf(r, 500), []uint64{2}) {
		t.Fatal("the restored store differs")
	}
	// Extending the lease moves it in the expiring order; dropping the
	// last dependency takes it out.
	u := UpdateOf(mustTask(t, s, 2))
	u.LeaseUntil = 900
	if _, err := s.Apply(&Batch{Seq: 2, Now: 600, Mutations: []Mutation{{Kind: MutUpdateTask, Update: u}}}); err != nil {
		t.Fatal(err)
	}
	if got := expired(600); len(got) != 0 {
		t.Fatalf("expired after the extension: %v", got)
	}
	rel := UpdateOf(mustTask(t, s, 3))
	rel.State = StateReady
	if _, err := s.Apply(&Batch{Seq: 3, Now: 600, Mutations: []Mutation{{Kind: MutDeleteDep, Dep: Dep{1, 3}},
		{Kind: MutDeleteDep, Dep: Dep{2, 3}}, {Kind: MutUpdateTask, Update: rel}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if got := expired(1000); len(got) != 0 || s.Waits(3) != 0 || s.NumDeps() != 0 || s.Queue(qk).Waiting.Len() != 0 {
		t.Fatalf("after the release: expiring %v, waits %d", got, s.Waits(3))
	}
}

func expiredOf(s *Store, now int64) []uint64 {
	return collect(func(fn func(uint64) bool) { s.ExpiredParents(now, fn) })
}

// TestApplyRejectsBadDeps: a batch that leaves a dependency of a task
// that is not waiting, on a task that does not exist or has completed,
// twice, or a waiting task that waits for nothing, or deletes a dependency
// that does not exist, is damage (ErrCorrupt).
func TestApplyRejectsBadDeps(t *testing.T) {
	done := task(NewStore(), 9, StateCompleted)
	rel := TaskUpdate{ID: 3, State: StateReady}
	for name, muts := range map[string][]Mutation{
		"dependent not waiting": {{Kind: MutPutDep, Dep: Dep{3, 1}}},
		"missing parent":        {{Kind: MutPutDep, Dep: Dep{8, 3}}},
		"missing dependent":     {{Kind: MutPutDep, Dep: Dep{1, 8}}},
		"twice":                 {{Kind: MutPutDep, Dep: Dep{1, 3}}},
		"on itself":             {{Kind: MutPutDep, Dep: Dep{3, 3}}},
		"missing delete":        {{Kind: MutDeleteDep, Dep: Dep{2, 1}}},
		"completed parent":      {{Kind: MutPutTask, Task: done}, {Kind: MutPutDep, Dep: Dep{9, 3}}},
		"waiting for nothing":   {{Kind: MutDeleteDep, Dep: Dep{1, 3}}, {Kind: MutDeleteDep, Dep: Dep{2, 3}}},
		"parent deleted":        {{Kind: MutDeleteTask, Update: TaskUpdate{ID: 1}}},
		"parent completed":      {{Kind: MutUpdateTask, Update: TaskUpdate{ID: 1, State: StateCompleted}}},
		"dependent released":    {{Kind: MutUpdateTask, Update: rel}},
		"dependent deleted":     {{Kind: MutDeleteTask, Update: TaskUpdate{ID: 3}}},
		"waiting put alone":     {{Kind: MutPutTask, Task: task(NewStore(), 9, StateWaiting)}},
	} {
		s := depStore(t)
		for _, m := range muts {
			if m.Task != nil {
				m.Task.Queue = s.QueueRef(qk)
			}
		}
		if _, err := s.Apply(&Batch{Seq: 2, Now: 100, Mutations: muts}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	// The same steps in one batch, in any order, are fine when the batch
	// as a whole keeps the invariants.
	s := depStore(t)
	if _, err := s.Apply(&Batch{Seq: 2, Now: 100, Mutations: []Mutation{{Kind: MutDeleteTask, Update: TaskUpdate{ID: 1}},
		{Kind: MutDeleteDep, Dep: Dep{1, 3}}, {Kind: MutDeleteDep, Dep: Dep{2, 3}}, {Kind: MutUpdateTask, Update: rel}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	// Loaded finds a restore whose waiting task has no dependency records.
	r := NewStore()
	if err := r.LoadTask(task(r, 3, StateWaiting)); err != nil {
		t.Fatal(err)
	}
	if err := r.Loaded(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("loaded a waiting task without dependencies: %v", err)
	}
}

// TestDepsNeedVersion5: a version 4 (or 3) batch holding a dependency
// mutation, a waiting task or a 10-field extra is damage, while version 4's
// own mutations (settings, idempotency entries with states) still decode in
// a version 4 batch; a dependency on task 0 or on itself is damage in any
// version.
func TestDepsNeedVersion5(t *testing.T) {
	s := NewStore()
	enc := NewEncoder()
	var b Batch
	for name, m := range map[string]Mutation{
		"dependency": {Kind: MutPutDep, Dep: Dep{1, 2}},
		"waiting":    {Kind: MutPutTask, Task: &Task{ID: 1, Queue: s.QueueRef(qk), State: StateWaiting}},
		"policy":     {Kind: MutPutTask, Task: &Task{ID: 1, Queue: s.QueueRef(qk), State: StateReady, Extra: &Extra{DepPolicy: 1}}},
	} {
		data, err := enc.Batch(&Batch{Seq: 1, Mutations: []Mutation{m}})
		if err != nil {
			t.Fatal(err)
		}
		if err := NewDecoder(s).Batch(data, &b); err != nil {
			t.Fatalf("%s: version 5 refused: %v", name, err)
		}
		for _, v := range []byte{batchVersion4, batchVersion3} {
			old := bytes.Clone(data)
			old[0] = v
			if err := NewDecoder(s).Batch(old, &b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s in a version %d batch: %v, want ErrCorrupt", name, v, err)
			}
		}
	}
	v4 := &Batch{Seq: 1, Mutations: []Mutation{
		{Kind: MutPutConf, Conf: QueueConf{Queue: qk, Paused: true, MaxInFlight: 2}},
		{Kind: MutPutIdem, Idem: Idem{Queue: qk, Key: "docket/unique/u", ID: 1, States: 0x2e}},
		{Kind: MutDeleteConf, Conf: QueueConf{Queue: qk}},
		{Kind: MutPutTask, Task: &Task{ID: 1, Queue: s.QueueRef(qk), State: StateReady}},
	}}
	data, err := enc.Batch(v4)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Clone(data)
	data[0] = batchVersion4
	if err := NewDecoder(s).Batch(data, &b); err != nil {
		t.Fatalf("a version 4 batch with settings and unique keys: %v", err)
	}
	if len(b.Mutations) != 4 || b.Mutations[0].Conf != v4.Mutations[0].Conf || b.Mutations[1].Idem != v4.Mutations[1].Idem {
		t.Fatalf("version 4 batch misread: %+v", b.Mutations)
	}
	for _, d := range []Dep{{0, 2}, {2, 0}, {2, 2}} {
		var buf bytes.Buffer
		e := msgpack.NewEncoder(&buf)
		e.UseCompactInts(true)
		for _, v := range []any{uint64(batchVersion), uint64(1), int64(0), uint64(0)} {
			e.Encode(v)
		}
		e.EncodeArrayLen(0)
		e.EncodeArrayLen(1)
		e.EncodeArrayLen(3)
		e.EncodeUint(uint64(MutPutDep))
		e.EncodeUint(d.Parent)
		e.EncodeUint(d.Child)
		if err := NewDecoder(s).Batch(buf.Bytes(), &b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("dependency %+v: %v, want ErrCorrupt", d, err)
		}
	}
}

// TestPartitionsNeedVersion6: a task naming a partition and settings with
// a partition bound decode in a version 6 batch and snapshot records, and
// are damage in a version 5 batch; a task or settings without them keep
// their version 5 bytes; an empty partition or a written bound of 0 is
// damage in any version (they are never written).
func TestPartitionsNeedVersion6(t *testing.T) {
	s := NewStore()
	enc := NewEncoder()
	var b Batch
	parted := (&Fields{ID: 1, Queue: s.QueueRef(qk), State: StateReady, Part: PartRef("tenant")}).Task()
	bound := QueueConf{Queue: qk, PartMaxInFlight: 3}
	for name, m := range map[string]Mutation{
		"partition": {Kind: MutPutTask, Task: parted},
		"bound":     {Kind: MutPutConf, Conf: bound},
	} {
		data, err := enc.Batch(&Batch{Seq: 1, Mutations: []Mutation{m}})
		if err != nil {
			t.Fatal(err)
		}
		if err := NewDecoder(s).Batch(data, &b); err != nil {
			t.Fatalf("%s: version 6 refused: %v", name, err)
		}
		got := b.Mutations[0]
		if name == "partition" && got.Task.PartitionKey() != "tenant" || name == "bound" && got.Conf != bound {
			t.Fatalf("%s misread: %+v", name, got)
		}
		old := bytes.Clone(data)
		old[0] = batchVersion5
		if err := NewDecoder(s).Batch(old, &b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s in a version 5 batch: %v, want ErrCorrupt", name, err)
		}
	}
	// Snapshot records.
	rec, err := enc.TaskRecord(parted)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := NewDecoder(s).Record(bytes.Clone(rec)); err != nil || r.Task.PartitionKey() != "tenant" {
		t.Fatalf("task record: %+v %v", r.Task, err)
	}
	rec, err = enc.ConfRecord(bound)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := NewDecoder(s).Record(bytes.Clone(rec)); err != nil || r.Conf != bound {
		t.Fatalf("settings record: %+v %v", r.Conf, err)
	}
	// Without a partition: the version 5 layout, read under version 5.
	plain := &Task{ID: 1, Queue: s.QueueRef(qk), State: StateReady}
	data, err := enc.Batch(&Batch{Seq: 1, Mutations: []Mutation{{Kind: MutPutTask, Task: plain},
		{Kind: MutPutConf, Conf: QueueConf{Queue: qk, MaxInFlight: 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Clone(data)
	data[0] = batchVersion5
	if err := NewDecoder(s).Batch(data, &b); err != nil {
		t.Fatalf("a version 5 batch without partitions: %v", err)
	}
	// Never written: an empty partition, a bound of 0.
	for name, m := range map[string]Mutation{
		"empty partition": {Kind: MutPutTask, Task: (&Fields{ID: 1, Queue: s.QueueRef(qk), State: StateReady, Part: PartRef("")}).Task()},
	} {
		data, err := enc.Batch(&Batch{Seq: 1, Mutations: []Mutation{m}})
		if err != nil {
			t.Fatal(err)
		}
		if err := NewDecoder(s).Batch(data, &b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	for _, v := range []any{uint64(batchVersion), uint64(1), int64(0), uint64(0)} {
		e.Encode(v)
	}
	e.EncodeArrayLen(0)
	e.EncodeArrayLen(1)
	e.EncodeArrayLen(12)
	e.EncodeUint(uint64(MutPutConf))
	for _, v := range []any{"p", "s", "q", false, 2, 0, 0, 0, 0, 0, 0} {
		e.Encode(v)
	}
	if err := NewDecoder(s).Batch(buf.Bytes(), &b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a written partition bound of 0: %v, want ErrCorrupt", err)
	}
}
