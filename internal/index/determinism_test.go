package index

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// stateBytes is every snapshot record of s, length-prefixed, in order.
func stateBytes(t *testing.T, s *Store) []byte {
	t.Helper()
	var out bytes.Buffer
	err := WriteImage(s.Copy(), NewEncoder(), func(rec []byte) error {
		fmt.Fprintf(&out, "%d:", len(rec))
		out.Write(rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestSameStateSameBytes builds one state twice, with headers inserted in
// opposite orders and empty byte slices spelled nil in one and empty in the
// other: the snapshot records and the state hash must be identical.
func TestSameStateSameBytes(t *testing.T) {
	build := func(reverse bool, empty []byte) *Store {
		s := NewStore()
		h := map[string]string{}
		keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		for i := range keys {
			k := keys[i]
			if reverse {
				k = keys[len(keys)-1-i]
			}
			h[k] = "v" + k
		}
		tk := (&Fields{ID: 1, Queue: s.QueueRef(qk), State: StateReady, MaxAttempts: 5, Payload: empty,
			Extra: &Extra{Kind: "k", Headers: h, Progress: empty}}).Task()
		b := &Batch{Seq: 1, Now: 10, Mutations: []Mutation{{Kind: MutPutTask, Task: tk},
			{Kind: MutSetKV, KV: KV{Namespace: qk.Namespace, Key: "k", Value: empty}}}}
		if _, err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := build(false, nil), build(true, []byte{})
	for range 20 { // map order is random: repeat to give it the chance to differ
		if !bytes.Equal(stateBytes(t, a), stateBytes(t, b)) {
			t.Fatal("the same state gave different snapshot bytes")
		}
		ha, _ := StateHash(a.Copy())
		hb, _ := StateHash(b.Copy())
		if ha != hb {
			t.Fatal("the same state gave different hashes")
		}
	}
	if kv, _ := b.KV(qk.Namespace, "k"); kv.Value != nil {
		t.Fatal("an empty value must be stored as nil, as it decodes")
	}
	c := build(false, nil)
	c.Apply(&Batch{Seq: 2, Now: 11})
	if h1, _ := StateHash(a.Copy()); h1 == mustHash(t, c) {
		t.Fatal("the hash does not cover the sequence number and time")
	}
}

func mustHash(t *testing.T, s *Store) [32]byte {
	h, err := StateHash(s.Copy())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHeadersEncodedInKeyOrder checks the bytes, not just a round trip.
func TestHeadersEncodedInKeyOrder(t *testing.T) {
	s := NewStore()
	tk := &Task{ID: 1, Queue: s.QueueRef(qk), State: StateReady, Extra: &Extra{Headers: map[string]string{
		"zz": "1", "a": "2", "m": "3", "b": "4"}}}
	data, err := NewEncoder().TaskRecord(tk)
	if err != nil {
		t.Fatal(err)
	}
	var pos []int
	for _, k := range []string{"a", "b", "m", "zz"} {
		pos = append(pos, bytes.Index(data, append([]byte{0xa0 | byte(len(k))}, k...)))
	}
	for i := 1; i < len(pos); i++ {
		if pos[i-1] < 0 || pos[i] <= pos[i-1] {
			t.Fatalf("headers not in key order: offsets %v", pos)
		}
	}
}

// TestDecodeDoesNotIntern: decoding a batch for a new queue changes nothing;
// Apply creates the queue, and a refused batch leaves none behind.
func TestDecodeDoesNotIntern(t *testing.T) {
	src := NewStore()
	other := QueueKey{qk.Namespace, "other"}
	put := &Batch{Seq: 1, Now: 5, Mutations: []Mutation{{Kind: MutPutTask,
		Task: (&Fields{ID: 1, Queue: src.QueueRef(other), State: StateReady, MaxAttempts: 1}).Task()}}}
	if src.Queue(other) != nil {
		t.Fatal("QueueRef created a queue")
	}
	data, err := NewEncoder().Batch(put)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore()
	var b Batch
	if err := NewDecoder(s).Batch(data, &b); err != nil {
		t.Fatal(err)
	}
	if s.Queue(other) != nil {
		t.Fatal("decoding created a queue")
	}
	refused := b
	refused.Assertions = []Assertion{{Kind: AssertKVExists, NS: qk.Namespace, Key: "nope"}}
	if out, err := s.Apply(&refused); err != nil || out.Refused == "" {
		t.Fatalf("want a refusal: %+v %v", out, err)
	}
	if s.Queue(other) != nil {
		t.Fatal("a refused batch left a queue behind")
	}
	b.Seq = 2
	if _, err := s.Apply(&b); err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Task(1)
	if q := s.Queue(other); q == nil || tk.Queue != q || q.Count(StateReady) != 1 {
		t.Fatal("Apply did not point the task at the store's queue")
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// v1 writes a batch in the version 1 form (no seed, 13-field updates,
// 18-field tasks), as docket wrote before.
func v1(t *testing.T, seq uint64, now int64) []byte {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.EncodeUint(1))
	must(e.EncodeUint(seq))
	must(e.EncodeInt(now))
	must(e.EncodeArrayLen(0))
	must(e.EncodeArrayLen(2))
	// put task 1, 18 fields, extra with headers in any order
	must(e.EncodeArrayLen(2))
	must(e.EncodeUint(uint64(MutPutTask)))
	must(e.EncodeArrayLen(18))
	for _, v := range []any{uint64(1), "p", "s", "q", uint64(StateReady), uint64(0), uint64(5), int64(0), now,
		int64(1e6), int64(6e7), "", uint64(0), int64(0), now, now, []byte(`{}`)} {
		must(e.Encode(v))
	}
	must(e.EncodeArrayLen(6))
	for _, v := range []any{"kind", "", "", []byte{}, nil} {
		must(e.Encode(v))
	}
	must(e.EncodeMapLen(2))
	for _, v := range []string{"z", "1", "a", "2"} {
		must(e.EncodeString(v))
	}
	// claim it: a 13-field update
	must(e.EncodeArrayLen(13))
	for _, v := range []any{uint64(MutUpdateTask), uint64(1), uint64(StateInFlight), uint64(1), now, "w", uint64(1),
		now + 100, now, uint64(0), nil, nil, ""} {
		must(e.Encode(v))
	}
	return buf.Bytes()
}

// TestReadsVersion1 decodes and applies a batch in the previous format, and
// a version 1 snapshot header.
func TestReadsVersion1(t *testing.T) {
	s := NewStore()
	var b Batch
	if err := NewDecoder(s).Batch(v1(t, 1, 500), &b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(&b); err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Task(1)
	if !ok || tk.State != StateInFlight || tk.Owner() != "w" || tk.Secret() != 0 || tk.Ex().Headers["z"] != "1" || s.Now() != 500 {
		t.Fatalf("version 1 batch misread: %+v", tk)
	}
	// The old header record: [1 seq nextID].
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	e.EncodeArrayLen(3)
	e.EncodeUint(RecHeader)
	e.EncodeUint(9)
	e.EncodeUint(4)
	r, err := NewDecoder(s).Record(buf.Bytes())
	if err != nil || r.Seq != 9 || r.NextID != 4 || r.Now != 0 {
		t.Fatalf("version 1 header: %+v %v", r, err)
	}
	// A version 2 batch with a version 1 update is damage, not a guess.
	data := v1(t, 2, 600)
	data[0] = batchVersion
	if err := NewDecoder(s).Batch(data, &b); err == nil {
		t.Fatal("a version 2 batch without a seed decoded")
	}
}

// v2 writes a batch in the version 2 form (6-field extras, 14-field
// updates, 2-field deletes), as docket wrote before attempt histories,
// follow-up links and totals.
func v2(t *testing.T, flags uint8) []byte {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []any{uint64(2), uint64(1), int64(500), uint64(7)} {
		must(e.Encode(v))
	}
	must(e.EncodeArrayLen(0))
	must(e.EncodeArrayLen(3))
	must(e.EncodeArrayLen(2))
	must(e.EncodeUint(uint64(MutPutTask)))
	must(e.EncodeArrayLen(19))
	for _, v := range []any{uint64(1), "p", "s", "q", uint64(StateInFlight), uint64(1), uint64(5), int64(0), int64(500),
		int64(1e6), int64(6e7), "w", uint64(1), int64(900), int64(500), int64(500), nil} {
		must(e.Encode(v))
	}
	must(e.EncodeArrayLen(6))
	for _, v := range []any{"kind", "", "", nil, nil} {
		must(e.Encode(v))
	}
	must(e.EncodeMapLen(0))
	must(e.EncodeUint(42))
	// fail it: a 14-field update
	must(e.EncodeArrayLen(14))
	for _, v := range []any{uint64(MutUpdateTask), uint64(1), uint64(StateReady), uint64(1), int64(500), "", uint64(1),
		int64(0), int64(600), uint64(flags), nil, nil, "boom", uint64(0)} {
		must(e.Encode(v))
	}
	must(e.EncodeArrayLen(2))
	must(e.EncodeUint(uint64(MutDeleteTask)))
	must(e.EncodeUint(1))
	return buf.Bytes()
}

// TestReadsVersion2 decodes and applies a version 2 batch: the task has no
// history, links or totals it did not record, the delete counts as a
// removal; and a version 2 batch using version 3's update flags is damage.
func TestReadsVersion2(t *testing.T) {
	s := NewStore()
	var b Batch
	if err := NewDecoder(s).Batch(v2(t, UpdLastError), &b); err != nil {
		t.Fatal(err)
	}
	del := b.Mutations[2]
	b.Mutations = b.Mutations[:2]
	if _, err := s.Apply(&b); err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Task(1)
	if !ok || tk.State != StateReady || tk.Ex().LastError != "boom" || len(tk.Ex().Errors) != 0 || tk.Ex().Kind != "kind" {
		t.Fatalf("version 2 batch misread: %+v %+v", tk, tk.Extra)
	}
	if del.Kind != MutDeleteTask || del.Update.ID != 1 || del.Update.Flags != 0 {
		t.Fatalf("version 2 delete: %+v", del)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := NewDecoder(s).Batch(v2(t, UpdLastError|UpdAddError), &b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a version 2 update with an attempt-error flag decoded: %v", err)
	}
	data := v2(t, UpdLastError)
	data[0] = batchVersion
	if err := NewDecoder(s).Batch(data, &b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a version 3 batch in the version 2 layout decoded: %v", err)
	}
}

// v3Idem is a version 3 batch putting an idempotency entry (7 fields, no
// states), as docket wrote before unique-by-content keys.
func v3Idem(t *testing.T, version uint64) []byte {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	for _, v := range []any{version, uint64(1), int64(500), uint64(0)} {
		if err := e.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.EncodeArrayLen(0); err != nil {
		t.Fatal(err)
	}
	if err := e.EncodeArrayLen(1); err != nil {
		t.Fatal(err)
	}
	if err := e.EncodeArrayLen(7); err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{uint64(MutPutIdem), "p", "s", "q", "key", uint64(4), int64(900)} {
		if err := e.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// TestReadsVersion3 decodes a version 3 idempotency entry as one without
// states (a caller's key), and refuses that layout in a version 4 or 5
// batch, and version 4's settings mutations in a version 3 batch.
func TestReadsVersion3(t *testing.T) {
	var b Batch
	if err := NewDecoder(NewStore()).Batch(v3Idem(t, 3), &b); err != nil {
		t.Fatal(err)
	}
	if got := b.Mutations[0].Idem; got != (Idem{Queue: QueueKey{Namespace{"p", "s"}, "q"}, Key: "key", ID: 4, Expires: 900}) {
		t.Fatalf("version 3 idempotency entry: %+v", got)
	}
	for _, v := range []uint64{batchVersion4, batchVersion} {
		if err := NewDecoder(NewStore()).Batch(v3Idem(t, v), &b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a version %d batch in the version 3 layout decoded: %v", v, err)
		}
	}
	conf := &Batch{Seq: 1, Mutations: []Mutation{{Kind: MutPutConf, Conf: QueueConf{Queue: QueueKey{Name: "q"}, Paused: true}}}}
	data, err := NewEncoder().Batch(conf)
	if err != nil {
		t.Fatal(err)
	}
	data = slices.Clone(data)
	data[0] = batchVersion3
	if err := NewDecoder(NewStore()).Batch(data, &b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a version 3 batch with a settings mutation decoded: %v", err)
	}
}

// TestMoveValueDeterministic: the same batches of value references and
// moves, stale ones among them, give the same state and hash whether
// applied as built or as decoded from the log, and the hash covers where
// a value is: a move that took effect changes it, a stale one does not.
func TestMoveValueDeterministic(t *testing.T) {
	build := func(viaLog bool) *Store {
		s := NewStore()
		b := refBatch(s.QueueRef(qk))
		b.Seq = 1
		stale := &Batch{Seq: 2, Now: 200, Mutations: []Mutation{
			{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 20, Old: ValueRef{File: 1, Len: 70_000}, New: ValueRef{File: 9, Len: 70_000}}},
			{Kind: MutMoveValue, Move: ValueMove{Kind: ValueKV, NS: qk.Namespace, Key: "big", Old: ValueRef{File: 4, Len: 1 << 20}, New: ValueRef{File: 9, Len: 1 << 20}}},
			{Kind: MutDeleteTask, Update: TaskUpdate{ID: 21}},
			{Kind: MutMoveValue, Move: ValueMove{Kind: ValueResult, ID: 21, Old: ValueRef{File: 6, Off: 1, Len: 1<<32 - 1}, New: ValueRef{File: 9, Len: 1}}},
		}}
		for _, b := range []*Batch{b, stale} {
			if viaLog {
				data, err := NewEncoder().Batch(b)
				if err != nil {
					t.Fatal(err)
				}
				b = &Batch{}
				if err := NewDecoder(s).Batch(data, b); err != nil {
					t.Fatal(err)
				}
			}
			mustApply(t, s, b)
		}
		return s
	}
	a, b := build(false), build(true)
	if mustHash(t, a) != mustHash(t, b) || !slices.Equal(a.LiveBytes(), b.LiveBytes()) || a.Usage() != b.Usage() {
		t.Fatal("the same batches gave different states")
	}
	h := mustHash(t, a)
	mustApply(t, a, &Batch{Seq: 3, Now: 200, Mutations: []Mutation{
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 20, Old: ValueRef{File: 5, Len: 70_000}, New: ValueRef{File: 9, Len: 70_000}}}}})
	mustApply(t, b, &Batch{Seq: 3, Now: 200, Mutations: []Mutation{
		{Kind: MutMoveValue, Move: ValueMove{Kind: ValuePayload, ID: 20, Old: ValueRef{File: 1, Len: 70_000}, New: ValueRef{File: 9, Len: 70_000}}}}})
	if mustHash(t, a) == mustHash(t, b) {
		t.Fatal("the hash does not cover a value's reference")
	}
	if h == mustHash(t, a) || a.FileLiveBytes(9) != 70_000 || a.FileLiveBytes(5) != 300+1<<20 || b.FileLiveBytes(9) != 0 {
		t.Fatalf("a move that took effect: live in 5 %d, in 9 %d; the stale one: in 9 %d", a.FileLiveBytes(5), a.FileLiveBytes(9), b.FileLiveBytes(9))
	}
}
