package cluster

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/docketdb/docket/wal"
	"github.com/hashicorp/raft"
)

// entry is the deterministic entry at index i.
func entry(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 1 + i/10, Type: raft.LogCommand, Data: fmt.Appendf(nil, "command %d", i)}
}

func entries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, entry(i))
	}
	return out
}

func openStore(t testing.TB, dir string, opts wal.Options) *LogStore {
	t.Helper()
	s, err := OpenLogStore(dir, opts)
	if err != nil {
		t.Fatalf("OpenLogStore: %v", err)
	}
	return s
}

// wantHeld checks that s holds exactly the entries first..last as produced
// by want (none when last is 0).
func wantHeld(t testing.TB, s *LogStore, first, last uint64, want func(uint64) *raft.Log) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("store holds %d..%d, want %d..%d", f, l, first, last)
	}
	if last == 0 {
		return
	}
	for i := first; i <= last; i++ {
		var got raft.Log
		if err := s.GetLog(i, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if w := want(i); !reflect.DeepEqual(&got, w) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, got, *w)
		}
	}
	for _, i := range []uint64{first - 1, last + 1} {
		if err := s.GetLog(i, new(raft.Log)); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) = %v, want ErrLogNotFound", i, err)
		}
	}
}

func TestLogStoreBasics(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, wal.Options{SegmentSize: 512})
	wantHeld(t, s, 0, 0, entry)
	if err := s.GetLog(1, new(raft.Log)); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on an empty store = %v", err)
	}
	if err := s.StoreLog(entry(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(entries(2, 100)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, 1, 100, entry)
	if !s.IsMonotonic() {
		t.Fatal("LogStore must be monotonic")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, wal.Options{SegmentSize: 512})
	defer s.Close()
	wantHeld(t, s, 1, 100, entry)
}

func TestLogStoreRefuses(t *testing.T) {
	s := openStore(t, t.TempDir(), wal.Options{})
	defer s.Close()
	if err := s.StoreLogs(entries(1, 10)); err != nil {
		t.Fatal(err)
	}
	gap := append(entries(11, 12), entry(14))
	for name, batch := range map[string][]*raft.Log{
		"not consecutive": gap,
		"overlap":         entries(10, 12),
		"rewrite":         entries(1, 1),
		"index 0":         {{Index: 0}},
	} {
		if err := s.StoreLogs(batch); err == nil {
			t.Errorf("%s: StoreLogs accepted it", name)
		}
	}
	if err := s.DeleteRange(4, 6); err == nil {
		t.Error("DeleteRange inside the log was accepted")
	}
	if err := s.DeleteRange(6, 4); err == nil {
		t.Error("DeleteRange with min > max was accepted")
	}
	wantHeld(t, s, 1, 10, entry)
}

func TestLogStoreDeleteRange(t *testing.T) {
	s := openStore(t, t.TempDir(), wal.Options{SegmentSize: 256})
	defer s.Close()
	if err := s.StoreLogs(entries(1, 60)); err != nil {
		t.Fatal(err)
	}
	// Compaction from the front.
	if err := s.DeleteRange(1, 20); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, 21, 60, entry)
	// Ranges that miss the log change nothing.
	if err := s.DeleteRange(1, 20); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(61, 90); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, 21, 60, entry)
	// A conflicting suffix, replaced by entries of a later term.
	if err := s.DeleteRange(45, 60); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, 21, 44, entry)
	later := func(i uint64) *raft.Log {
		e := entry(i)
		if i >= 45 {
			e.Term, e.Data = 99, fmt.Appendf(nil, "term 99 command %d", i)
		}
		return e
	}
	var batch []*raft.Log
	for i := uint64(45); i <= 70; i++ {
		batch = append(batch, later(i))
	}
	if err := s.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, 21, 70, later)
	// Everything, as raft does after installing a snapshot; then raft
	// continues after the snapshot's index.
	if err := s.DeleteRange(21, 70); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, 0, 0, entry)
	if err := s.StoreLogs(entries(500, 510)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, 500, 510, entry)
	// A suffix reaching the first entry empties the log where it was.
	if err := s.DeleteRange(500, 600); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, 0, 0, entry)
	if err := s.StoreLogs(entries(500, 501)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, 500, 501, entry)
}

// A gap with entries still held happens when a crash interrupted the removal
// after a snapshot install: the stale entries go.
func TestLogStoreGapAfterSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, wal.Options{})
	if err := s.StoreLogs(entries(1, 30)); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(entries(100, 105)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, 100, 105, entry)
	s.Close()
	s = openStore(t, dir, wal.Options{})
	defer s.Close()
	wantHeld(t, s, 100, 105, entry)
}

func TestLogStoreOneSyncPerBatch(t *testing.T) {
	syncs := 0
	s := openStore(t, t.TempDir(), wal.Options{OnSync: func(_ time.Duration, _ int) { syncs++ }})
	defer s.Close()
	for b := uint64(0); b < 10; b++ {
		if err := s.StoreLogs(entries(b*50+1, b*50+50)); err != nil {
			t.Fatal(err)
		}
	}
	if syncs != 10 {
		t.Fatalf("10 StoreLogs calls made %d fsyncs, want 10", syncs)
	}
	// The log's leader waits for no committers: StoreLogs appended all
	// its sync is for, and no one else appends. Batches smaller than the
	// last fsync's would otherwise each wait for the records it covered.
	for i := uint64(501); i <= 510; i++ {
		if err := s.StoreLogs(entries(i, i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.log.Stats(); st.Gathers != 0 {
		t.Fatalf("StoreLogs gathered %d times", st.Gathers)
	}
}

func TestLogStoreCorruptEntry(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := appendEntry(nil, entry(1))
	wrongIndex := appendEntry(nil, entry(7))
	for i, b := range [][]byte{good, wrongIndex, []byte("not an entry")} {
		if err := l.Append(uint64(i+1), b); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	s := openStore(t, dir, wal.Options{})
	defer s.Close()
	if err := s.GetLog(1, new(raft.Log)); err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint64{2, 3} {
		if err := s.GetLog(i, new(raft.Log)); !errors.Is(err, wal.ErrCorrupt) {
			t.Errorf("GetLog(%d) of a bad record = %v, want ErrCorrupt", i, err)
		}
	}
}
