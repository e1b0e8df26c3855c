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
