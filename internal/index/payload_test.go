package index

import (
	"math"
	"reflect"
	"runtime"
	"testing"
	"unsafe"
)

// TestPayloadSizes: a task whose payload is in the value log costs no more
// heap than one whose payload is empty: the reference takes the payload's
// place in the Task, which stays 96 bytes, and needs no Extra.
func TestPayloadSizes(t *testing.T) {
	if n := unsafe.Sizeof(Task{}); n != 96 {
		t.Fatalf("Task is %d bytes, want 96", n)
	}
	if testing.Short() {
		t.Skip("measures the heap of 100k tasks")
	}
	s := NewStore()
	q := s.QueueRef(qk)
	perTask := func(ref bool) float64 {
		const n = 100_000
		ts := make([]*Task, n)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range ts {
			f := Fields{ID: uint64(i + 1), Queue: q, State: StateReady, MaxAttempts: 3, Created: 1, Updated: 1}
			if ref {
				f.PayloadRef = ValueRef{File: 1, Off: int64(i) * 1024, Len: 1024}
			}
			ts[i] = f.Task()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(ts)
		return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	}
	none, refs := perTask(false), perTask(true)
	t.Logf("heap per task: %.1f bytes with no payload, %.1f with a payload by reference", none, refs)
	if refs-none > 16 {
		t.Fatalf("a payload by reference costs %.1f bytes a task more than none, want at most 16", refs-none)
	}
}

// TestPayloadPlace: a payload in line and one by reference read back as
// set, at the limits of a reference's fields, and a record holds one or
// the other.
func TestPayloadPlace(t *testing.T) {
	var tk Task
	if tk.Payload() != nil || !tk.PayloadRef().IsZero() {
		t.Fatalf("a zero task: payload %q, ref %+v", tk.Payload(), tk.PayloadRef())
	}
	for _, b := range [][]byte{nil, {}, []byte("x"), make([]byte, 70_000)} {
		tk.SetPayload(b)
		got := tk.Payload()
		if !reflect.DeepEqual(got, b) || !tk.PayloadRef().IsZero() {
			t.Fatalf("payload of %d bytes: got %d bytes (nil %v, want nil %v), ref %+v", len(b), len(got), got == nil, b == nil, tk.PayloadRef())
		}
		if len(b) > 0 && (&got[0] != &b[0] || cap(got) != len(got)) {
			t.Fatalf("payload of %d bytes: copied, or a capacity of %d past its end", len(b), cap(got))
		}
	}
	for _, r := range []ValueRef{{Len: 1}, {File: 3, Off: 1 << 40, Len: 70_000},
		{File: math.MaxUint32, Off: math.MaxInt64, Len: math.MaxUint32}} {
		tk.SetPayload([]byte("in line"))
		tk.SetPayloadRef(r)
		if tk.PayloadRef() != r || tk.Payload() != nil {
			t.Fatalf("ref %+v: got %+v, payload %q", r, tk.PayloadRef(), tk.Payload())
		}
		f := Fields{ID: 1, State: StateReady, PayloadRef: r, Payload: []byte("dropped")}
		if got := f.Task().Fields(); got.PayloadRef != r || got.Payload != nil {
			t.Fatalf("Fields with ref %+v: got %+v, payload %q", r, got.PayloadRef, got.Payload)
		}
		if nt := tk.WithRef(ValuePayload, ValueRef{}); !nt.PayloadRef().IsZero() || nt.Payload() != nil || tk.PayloadRef() != r {
			t.Fatalf("WithRef of no reference: %+v, payload %q; the original %+v", nt.PayloadRef(), nt.Payload(), tk.PayloadRef())
		}
	}
	// A malformed reference reads back as such, for checkValues to refuse.
	tk.SetPayloadRef(ValueRef{File: 1, Off: -1})
	if r := tk.PayloadRef(); r != (ValueRef{File: 1, Off: -1}) || r.valid() {
		t.Fatalf("a malformed reference read back as %+v", r)
	}
}

// TestStoreHeapPerTask: in a store, with its indexes, a ready task whose
// payload is in the value log costs no more heap than one with no payload
// (the record is the same size, and needs no Extra). It logs the bytes a
// task: its record (Task, 96) and its index entries and tree nodes (the
// rest).
func TestStoreHeapPerTask(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap of a store of 100k tasks")
	}
	const n = 100_000
	perTask := func(kind string) float64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := NewStore()
		q := s.QueueRef(qk)
		pay := make([]byte, 1024)
		for seq := uint64(1); seq <= n/1000; seq++ {
			b := &Batch{Seq: seq, Now: 100}
			for i := range uint64(1000) {
				id := (seq-1)*1000 + i + 1
				f := Fields{ID: id, Queue: q, State: StateReady, MaxAttempts: 3, NotBefore: 100, Created: 100, Updated: 100}
				switch kind {
				case "ref":
					f.PayloadRef = ValueRef{File: 1, Off: int64(id) * 1024, Len: 1024}
				case "inline":
					f.Payload = pay[:1024:1024] // shared: count the record, not the bytes
				}
				b.Mutations = append(b.Mutations, Mutation{Kind: MutPutTask, Task: f.Task()})
			}
			if _, err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if got := s.Usage().Tasks; got != n {
			t.Fatalf("%d tasks in the store, want %d", got, n)
		}
		runtime.KeepAlive(s)
		return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	}
	none, inline, refs := perTask("none"), perTask("inline"), perTask("ref")
	t.Logf("store heap per ready task beyond its payload's bytes: %.1f bytes with no payload, %.1f in line, %.1f by reference "+
		"(the record %d, its index entries and tree nodes the rest)", none, inline, refs, unsafe.Sizeof(Task{}))
	if refs-none > 16 {
		t.Fatalf("a payload by reference costs %.1f bytes a task more than none in a store, want at most 16", refs-none)
	}
}
