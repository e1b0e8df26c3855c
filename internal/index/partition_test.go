package index

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// partKeys lists the keys Partitions gives from key from (strictly after
// it when after is set).
func partKeys(q *Queue, from string, after bool) []string {
	var keys []string
	q.Partitions(from, after, func(p *Partition) bool {
		keys = append(keys, p.Key)
		return true
	})
	return keys
}

// TestPartitionsInKeyOrder: partitions are listed in key order from a key
// on, or strictly after it, while they come and go in any order; a
// partition whose last task went is not listed, nor is the default one
// while it holds none, and Verify holds the key order to the partitions.
func TestPartitionsInKeyOrder(t *testing.T) {
	s := NewStore()
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 300
	ids := rng.Perm(n)
	seq := uint64(0)
	apply := func(ms ...Mutation) {
		t.Helper()
		seq++
		if _, err := s.Apply(&Batch{Seq: seq, Mutations: ms}); err != nil {
			t.Fatal(err)
		}
	}
	key := func(i int) string { return fmt.Sprintf("p%03d", i) }
	for _, i := range ids {
		apply(Mutation{Kind: MutPutTask, Task: (&Fields{ID: uint64(i + 1), Queue: s.QueueRef(qk), State: StateReady, Part: PartRef(key(i))}).Task()})
	}
	// Every third partition loses its task.
	var want []string
	for i := range n {
		if i%3 == 0 {
			apply(Mutation{Kind: MutDeleteTask, Update: TaskUpdate{ID: uint64(i + 1)}})
		} else {
			want = append(want, key(i))
		}
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	q := s.Queue(qk)
	if got := partKeys(q, "", false); !slices.Equal(got, want) {
		t.Fatalf("listed %d partitions, want %d: %v", len(got), len(want), got)
	}
	if got := partKeys(q, key(4), false); !slices.Equal(got, want[slices.Index(want, key(4)):]) {
		t.Fatalf("from %s: %v", key(4), got[:min(len(got), 3)])
	}
	if got := partKeys(q, key(4), true); !slices.Equal(got, want[slices.Index(want, key(4))+1:]) {
		t.Fatalf("after %s: %v", key(4), got[:min(len(got), 3)])
	}
	if got := partKeys(q, key(3), true); !slices.Equal(got, want[slices.Index(want, key(4)):]) {
		t.Fatalf("after %s, whose partition is gone: %v", key(3), got[:min(len(got), 3)])
	}
	// A task with no partition puts the default one ("") first.
	apply(Mutation{Kind: MutPutTask, Task: (&Fields{ID: n + 1, Queue: s.QueueRef(qk), State: StateReady}).Task()})
	if got := partKeys(q, "", false); len(got) != len(want)+1 || got[0] != "" {
		t.Fatalf("with the default partition: %v", got[:min(len(got), 3)])
	}
	// A partition that empties and fills again is listed again.
	apply(Mutation{Kind: MutPutTask, Task: (&Fields{ID: n + 2, Queue: s.QueueRef(qk), State: StateReady, Part: PartRef(key(0))}).Task()})
	if got := partKeys(q, "", true); len(got) != len(want)+1 || got[0] != key(0) {
		t.Fatalf("with %s back: %v", key(0), got[:min(len(got), 3)])
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	// Out of the key order, a partition is damage that Verify finds.
	p := q.parts.byKey[key(1)]
	q.parts.sorted.Delete(p)
	if err := s.Verify(); err == nil {
		t.Fatal("Verify missed a partition out of the key order")
	}
	q.parts.sorted.Set(p)
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestRecordsShareTheirPartition: the task records that name one partition,
// decoded by one Decoder on its fast path or its general one, or planned
// through the store, share one detached partition and so one interned
// value with the retry policy, instead of one each; each still names its
// own key, past the bound on the keys remembered too.
func TestRecordsShareTheirPartition(t *testing.T) {
	s := NewStore()
	enc := NewEncoder()
	d := NewDecoder(nil)
	decode := func(f Fields) *Task {
		t.Helper()
		f.Queue = s.QueueRef(qk)
		data, err := enc.TaskRecord(f.Task())
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.Record(data)
		if err != nil {
			t.Fatal(err)
		}
		return r.Task
	}
	plain := Fields{ID: 1, State: StateReady, MaxAttempts: 3, Created: 5, Updated: 5, Part: PartRef("a")}
	withExtra := plain
	withExtra.ID, withExtra.Extra = 2, &Extra{Kind: "email"} // not the fast path
	other := plain
	other.ID, other.Part = 3, PartRef("b")
	a1, a2, b := decode(plain), decode(withExtra), decode(other)
	if a1.Part() != a2.Part() || a1.sh != a2.sh || a1.PartitionKey() != "a" {
		t.Fatalf("two records of partition a: %p %q and %p %q", a1.Part(), a1.PartitionKey(), a2.Part(), a2.PartitionKey())
	}
	if b.Part() == a1.Part() || b.PartitionKey() != "b" {
		t.Fatalf("a record of partition b: %p %q", b.Part(), b.PartitionKey())
	}
	if s.PartRef(qk, "a") != s.PartRef(qk, "a") || s.PartRef(qk, "a") == s.PartRef(qk, "b") {
		t.Fatal("the store's references of one key differ, or of two keys agree")
	}
	for i := range 2*maxPartRefs + 1 {
		key := fmt.Sprintf("k%d", i)
		if got := s.PartRef(qk, key); got.Key != key {
			t.Fatalf("reference %d names %q", i, got.Key)
		}
	}
	// Once the queue has the partition, records point at it from the
	// start: through the store's PartRef, and through a Decoder of the
	// store on both its paths.
	if _, err := s.Apply(&Batch{Seq: 1, Mutations: []Mutation{{Kind: MutPutTask, Task: (&Fields{ID: 9, Queue: s.QueueRef(qk), State: StateReady, Part: s.PartRef(qk, "a")}).Task()}}}); err != nil {
		t.Fatal(err)
	}
	in := s.Queue(qk).parts.byKey["a"]
	if in == nil || s.PartRef(qk, "a") != in {
		t.Fatalf("the store's reference of a stored partition: %p, want %p", s.PartRef(qk, "a"), in)
	}
	d = NewDecoder(s)
	if a1, a2 := decode(plain), decode(withExtra); a1.Part() != in || a2.Part() != in {
		t.Fatalf("a store's Decoder: %p and %p, want the stored partition %p", a1.Part(), a2.Part(), in)
	}
}

// TestEmptyPartitionRecordRefused: a snapshot task record that names the
// empty partition (never written: the default partition is named by no
// field) is damage, which the fast path leaves to the general decoder to
// say; cut inside its partition, the record is damage too.
func TestEmptyPartitionRecordRefused(t *testing.T) {
	s := NewStore()
	data, err := NewEncoder().TaskRecord((&Fields{ID: 1, Queue: s.QueueRef(qk), State: StateReady, Created: 5, Updated: 5, Part: PartRef("x")}).Task())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte{0xa1, 'x'}) {
		t.Fatalf("the record does not end in its partition: %x", data)
	}
	if _, err := NewDecoder(s).Record(data); err != nil {
		t.Fatal(err)
	}
	empty := append(bytes.Clone(data[:len(data)-2]), 0xa0)
	if _, ok := NewDecoder(s).fastTask(empty); ok {
		t.Fatal("the fast path took an empty partition")
	}
	if _, err := NewDecoder(s).Record(empty); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an empty partition: %v, want ErrCorrupt", err)
	}
	if _, err := NewDecoder(s).Record(data[:len(data)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a record cut inside its partition: %v, want ErrCorrupt", err)
	}
}
