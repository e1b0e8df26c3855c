package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// crashCopy copies the files of dir, as a crash of the process holding it
// open would leave them, to a new directory.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	for name, b := range snapshotDir(t, dir) {
		writeFile(t, filepath.Join(out, name), b)
	}
	return out
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// recordsEnd is the offset past the last valid record of the segment at
// path: spare zeros after it do not count, as they would as entries of
// their own in entrySpans.
func recordsEnd(t *testing.T, path string) int64 {
	t.Helper()
	var first uint64
	if _, err := fmt.Sscanf(filepath.Base(path), "%d", &first); err != nil {
		t.Fatal(err)
	}
	return scanSegment(readFile(t, path), first, 0).good
}

// TestZeroTailIsSpare: a log keeps zeros written ahead of its tail's
// records; a crash leaves them, and Check and Open read them as spare
// space, not a torn tail: nothing is cut or copied aside, new records go
// over them, and Close cuts the segment back to its records.
func TestZeroTailIsSpare(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openLog(t, dir, Options{Preallocate: 4096})
	appendN(t, l, 20)
	if err := l.Sync(20); err != nil {
		t.Fatal(err)
	}
	checkTail(t, l)
	entries := l.Stats().BytesWritten
	size := fileSize(t, lastSeg(t, dir))
	if size != int64(entries)+4096 {
		t.Fatalf("tail file of %d bytes for %d bytes of entries, want 4096 spare", size, entries)
	}
	crashed := crashCopy(t, dir)

	rep, err := Check(crashed)
	if err != nil || rep.Torn != nil || rep.Corrupt != nil || rep.LastSeq != 20 || rep.Spare != 4096 {
		t.Fatalf("Check after a crash: %+v, %v; want records 1..20 and 4096 spare bytes", rep, err)
	}
	var scanned uint64
	if err := Scan(crashed, 0, func(uint64, []byte) error { scanned++; return nil }); err != nil || scanned != 20 {
		t.Fatalf("Scan: %d records, %v", scanned, err)
	}

	c := openLog(t, crashed, Options{Preallocate: 4096})
	if r := c.Repaired(); r.Cut != nil || r.Broken != "" || r.LastSeq != 20 {
		t.Fatalf("Open after a crash repaired %+v; want nothing cut", r)
	}
	if b := brokenFiles(t, crashed); len(b) != 0 {
		t.Fatalf(".broken copies %v of a tail that was only spare", b)
	}
	checkTail(t, c)
	appendN(t, c, 5)
	if err := c.Sync(25); err != nil {
		t.Fatal(err)
	}
	checkTail(t, c)
	if got := fileSize(t, lastSeg(t, crashed)); got != size {
		t.Fatalf("5 small records after the crash grew the tail from %d to %d bytes; they fit its spare space", size, got)
	}
	wantRecords(t, replayAll(t, c, 0), 1, 25)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := fileSize(t, lastSeg(t, crashed)), recordsEnd(t, lastSeg(t, crashed)); got != want {
		t.Fatalf("closed tail holds %d bytes, its entries %d", got, want)
	}
	if rep, err := Check(crashed); err != nil || rep.Spare != 0 || rep.LastSeq != 25 {
		t.Fatalf("Check after Close: %+v, %v", rep, err)
	}
	reopenAndCheck(t, crashed, 1, 25)

	// The first log, closed, is cut back to its records too.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, lastSeg(t, dir)); got != int64(entries) {
		t.Fatalf("closed log's tail holds %d bytes, %d of entries", got, entries)
	}
}

// TestPreallocateBounds: the spare space never reaches past the segment
// size, a segment the tail moves on from keeps no zeros, and a negative
// Preallocate grows the file with each write, as tidwall/wal does.
func TestPreallocateBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const segSize = 2000
	l := openLog(t, dir, Options{SegmentSize: segSize, Preallocate: 1 << 20})
	for range 30 {
		appendN(t, l, 7)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		checkTail(t, l)
		if got := fileSize(t, lastSeg(t, dir)); got > segSize {
			t.Fatalf("tail file of %d bytes, past the segment size %d", got, segSize)
		}
	}
	names := segPaths(t, dir)
	if len(names) < 3 {
		t.Fatalf("%d segments; the test should fill several", len(names))
	}
	for _, p := range names[:len(names)-1] {
		if got, want := fileSize(t, p), recordsEnd(t, p); got != want {
			t.Fatalf("%s holds %d bytes, its entries %d: a full segment keeps no spare space", p, got, want)
		}
	}
	verifySegments(t, dir)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	dir = t.TempDir()
	l = openLog(t, dir, Options{Preallocate: -1})
	defer l.Close()
	for range 5 {
		appendN(t, l, 3)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if got, want := fileSize(t, lastSeg(t, dir)), int64(l.Stats().BytesWritten); got != want {
			t.Fatalf("without preallocation the tail holds %d bytes, %d written", got, want)
		}
	}
}

// TestSpareCutWhenTheTailMovesOn: a tail left with spare space by a crash
// and reopened with a smaller segment size is already over it, so the
// next write starts a new segment; the old one is cut to its records
// first, since only the tail may hold spare space.
func TestSpareCutWhenTheTailMovesOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openLog(t, dir, Options{Preallocate: 4096})
	appendN(t, l, 20)
	if err := l.Sync(20); err != nil {
		t.Fatal(err)
	}
	crashed := crashCopy(t, dir)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	entries := fileSize(t, lastSeg(t, dir)) // closed: cut to its records
	old := lastSeg(t, crashed)
	if rep, err := Check(crashed); err != nil || rep.Spare != 4096 {
		t.Fatalf("Check after the crash: %+v, %v; want 4096 spare bytes", rep, err)
	}

	c := openLog(t, crashed, Options{SegmentSize: 100, Preallocate: 4096})
	defer c.Close()
	appendN(t, c, 3)
	if err := c.Sync(23); err != nil {
		t.Fatal(err)
	}
	if got := lastSeg(t, crashed); got == old {
		t.Fatalf("the log wrote on in %s, over its segment size", got)
	}
	if got := fileSize(t, old); got != entries {
		t.Fatalf("the segment moved on from holds %d bytes, its entries %d", got, entries)
	}
	checkTail(t, c)
	verifySegments(t, crashed)
	wantRecords(t, replayAll(t, c, 0), 1, 23)
}
