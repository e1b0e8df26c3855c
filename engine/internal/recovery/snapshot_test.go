package recovery

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/docketdb/docket/internal/index"
)

// TestLoadSnapshotPipeline: LoadSnapshot reads ahead of decoding and
// decodes ahead of loading, yet gives what one loop would: a record that
// does not fit the state, or does not decode, stops the read at once and
// is the error reported, even when the read fails later; a read that fails
// after good records reports the read's error; good records load in order.
func TestLoadSnapshotPipeline(t *testing.T) {
	t.Parallel()
	enc := index.NewEncoder()
	qk := index.QueueKey{Namespace: index.Namespace{Project: "p", Scope: "s"}, Name: "q"}
	const n = 10_000
	records := func(dupAt int) [][]byte {
		var out [][]byte
		add := func(rec []byte, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, bytes.Clone(rec))
		}
		add(enc.Header(7, n+1, 100))
		q := index.NewStore().QueueRef(qk)
		for id := uint64(1); id <= n; id++ {
			tid := id
			if int(id) == dupAt {
				tid = id - 1
			}
			add(enc.TaskRecord((&index.Fields{ID: tid, Queue: q, State: index.StateReady, MaxAttempts: 5,
				NotBefore: 50, Created: 50, Updated: 50}).Task()))
		}
		return out
	}
	errRead := errors.New("read failed")
	reader := func(recs [][]byte, failAt int, seen *int) func(func([]byte) error) (uint64, error) {
		return func(fn func([]byte) error) (uint64, error) {
			for i, rec := range recs {
				if i == failAt {
					return 0, errRead
				}
				*seen = i + 1
				if err := fn(rec); err != nil {
					return 0, err
				}
			}
			return 7, nil
		}
	}
	var seen int
	store, err := LoadSnapshot("good", reader(records(0), -1, &seen))
	if err != nil || store.Len() != n || store.Seq() != 7 || store.Verify() != nil {
		t.Fatalf("good snapshot: %v, %d tasks", err, store.Len())
	}
	if _, err := LoadSnapshot("dup", reader(records(100), n-10, &seen)); !errors.Is(err, index.ErrCorrupt) ||
		!strings.Contains(err.Error(), "task 99 twice") {
		t.Fatalf("duplicate record: got %v", err)
	}
	if seen > 100+20*1024 {
		t.Fatalf("the read went on to record %d after a record that does not fit", seen)
	}
	if _, err := LoadSnapshot("cut", reader(records(0), n-10, &seen)); !errors.Is(err, errRead) {
		t.Fatalf("failed read: got %v", err)
	}
	// A record that does not decode stops the read too, and is the error
	// reported, though the read fails later.
	garbled := records(0)
	garbled[200] = []byte{0x92, 0xff}
	if _, err := LoadSnapshot("garbled", reader(garbled, n-10, &seen)); !errors.Is(err, index.ErrCorrupt) || errors.Is(err, errRead) {
		t.Fatalf("undecodable record: got %v", err)
	}
	if seen > 200+20*1024 {
		t.Fatalf("the read went on to record %d after a record that does not decode", seen)
	}
}

// TestLoadSnapshotKeepsItsChunks: loads in a row take their chunks of
// records from the ones the loads before kept, not allocating them anew,
// and a chunk grown for a large record is not kept.
func TestLoadSnapshotKeepsItsChunks(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what it is given at random")
	}
	enc := index.NewEncoder()
	var recs [][]byte
	add := func(rec []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, bytes.Clone(rec))
	}
	const n = 10
	add(enc.Header(7, n+1, 100))
	q := index.NewStore().QueueRef(index.QueueKey{Namespace: index.Namespace{Project: "p", Scope: "s"}, Name: "q"})
	for id := uint64(1); id <= n; id++ {
		add(enc.TaskRecord((&index.Fields{ID: id, Queue: q, State: index.StateReady, MaxAttempts: 5,
			NotBefore: 50, Created: 50, Updated: 50}).Task()))
	}
	load := func() {
		t.Helper()
		store, err := LoadSnapshot("small", func(fn func([]byte) error) (uint64, error) {
			for _, rec := range recs {
				if err := fn(rec); err != nil {
					return 0, err
				}
			}
			return 7, nil
		})
		if err != nil || store.Len() != n {
			t.Fatalf("load: %v", err)
		}
	}
	load()
	const loads = 16
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range loads {
		load()
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > loads*rawBytes/4 {
		t.Errorf("%d loads of a %d-record snapshot allocated %d bytes, a chunk is %d", loads, n+1, got, rawBytes)
	}

	r := raws.Get().(*raw)
	r.buf = append(r.buf, make([]byte, rawBytes+1)...)
	keepRaw(r)
	for range 4 {
		if r := raws.Get().(*raw); cap(r.buf) != rawBytes || len(r.buf) != 0 || len(r.ends) != 0 {
			t.Fatalf("a chunk from the pool holds %d bytes of %d, %d records", len(r.buf), cap(r.buf), len(r.ends))
		}
	}
}
