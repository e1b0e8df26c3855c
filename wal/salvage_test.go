package wal

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// segFirst returns the first seq of each segment of dir, in order.
func segFirsts(t *testing.T, dir string) []uint64 {
	t.Helper()
	var out []uint64
	for _, n := range segNames(t, dir) {
		seq, ok := parseSeg(n)
		if !ok {
			t.Fatalf("segment name %q", n)
		}
		out = append(out, seq)
	}
	return out
}

func parseSeg(name string) (uint64, bool) {
	var seq uint64
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
		seq = seq*10 + uint64(c-'0')
	}
	return seq, len(name) == nameDigits
}

// TestFromSkipsCoveredDamage: a record a snapshot covers (below From) that is
// damaged in a way that keeps the framing - a checksum, version or seq
// flip - or a whole older segment that no longer decodes, does not stop
// Open, Check or Scan from From; the same damage at or after From still does.
func TestFromSkipsCoveredDamage(t *testing.T) {
	t.Parallel()
	t.Run("flipped record in the segment holding From", func(t *testing.T) {
		dir := newLog(t, 1<<20, 20)            // one segment
		off := flip(t, segPaths(t, dir)[0], 4) // record 5
		if _, err := Check(dir); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Check without From: %v, want ErrCorrupt", err)
		}
		if _, err := CheckFrom(dir, 5); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("CheckFrom(5), damage at 5: %v, want ErrCorrupt", err)
		}
		rep, err := CheckFrom(dir, 6)
		if err != nil || len(rep.Covered) != 1 || rep.Covered[0].Offset != off || rep.FirstSeq != 1 || rep.LastSeq != 20 {
			t.Fatalf("CheckFrom(6): %+v, %v", rep, err)
		}
		before := snapshotDir(t, dir)
		if _, err := Open(dir, Options{From: 5}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open From 5: %v, want ErrCorrupt", err)
		}
		sameDir(t, before, snapshotDir(t, dir))
		var seen []uint64
		if err := Scan(dir, 6, func(seq uint64, _ []byte) error { seen = append(seen, seq); return nil }); err != nil || len(seen) != 15 || seen[0] != 6 {
			t.Fatalf("Scan from 6: %v %v", seen, err)
		}
		l := openLog(t, dir, Options{From: 6})
		if got := l.Repaired().Covered; len(got) != 1 {
			t.Fatalf("Repaired().Covered = %+v", got)
		}
		wantRecords(t, replayAll(t, l, 6), 6, 20)
		appendN(t, l, 3)
		if err := l.TruncateFront(8); err != nil {
			t.Fatal(err)
		}
		l.Close()
		// Once truncated past it, the damage is gone.
		if rep, err := Check(dir); err != nil || rep.FirstSeq != 8 || rep.LastSeq != 23 {
			t.Fatalf("after truncation: %+v %v", rep, err)
		}
	})
	t.Run("undecodable older segment", func(t *testing.T) {
		dir := newLog(t, 256, 60)
		firsts := segFirsts(t, dir)
		if len(firsts) < 3 {
			t.Fatalf("want 3 segments, have %d", len(firsts))
		}
		// Garbage over the first segment's length prefixes: no framing left.
		p := segPaths(t, dir)[0]
		b := readFile(t, p)
		for i := range b {
			b[i] = 0xff
		}
		writeFile(t, p, b)
		if _, err := CheckFrom(dir, firsts[1]-1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("From inside the damaged segment: %v, want ErrCorrupt", err)
		}
		rep, err := CheckFrom(dir, firsts[1])
		if err != nil || len(rep.Covered) != 1 || rep.LastSeq != 60 {
			t.Fatalf("CheckFrom(%d): %+v %v", firsts[1], rep, err)
		}
		l := openLog(t, dir, Options{From: firsts[1]})
		wantRecords(t, replayAll(t, l, firsts[1]), firsts[1], 60)
		l.Close()
	})
	t.Run("missing older segment", func(t *testing.T) {
		dir := newLog(t, 256, 60)
		firsts := segFirsts(t, dir)
		if err := os.Remove(segPaths(t, dir)[1]); err != nil {
			t.Fatal(err)
		}
		if _, err := CheckFrom(dir, firsts[2]-1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("From inside the missing segment: %v, want ErrCorrupt", err)
		}
		if rep, err := CheckFrom(dir, firsts[2]); err != nil || len(rep.Covered) != 1 {
			t.Fatalf("CheckFrom(%d): %+v %v", firsts[2], rep, err)
		}
	})
}

// TestSalvage: damage after From is refused by Open and Repair; Salvage keeps
// records up to the one before it, keeps copies of everything it cut or
// moved, says which sequence numbers were lost and hands back the lost
// records that still verify.
func TestSalvage(t *testing.T) {
	t.Parallel()
	dir := newLog(t, 256, 60)
	firsts := segFirsts(t, dir)
	paths := segPaths(t, dir)
	// Damage record firsts[1]+2, in the second segment.
	flip(t, paths[1], 2)
	bad := firsts[1] + 2
	before := snapshotDir(t, dir)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
	if _, err := Repair(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Repair: %v, want ErrCorrupt", err)
	}
	sameDir(t, before, snapshotDir(t, dir))

	rep, err := Salvage(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damage == nil || rep.LostFirst != bad || rep.LostLast != 60 || rep.LastSeq != bad-1 || rep.FirstSeq != 1 {
		t.Fatalf("report: %+v", rep)
	}
	if len(rep.Readable) != int(60-bad) || rep.Readable[0].Seq != bad+1 || string(rep.Readable[0].Data) != string(payload(bad+1)) {
		t.Fatalf("readable lost records: %d, first %+v", len(rep.Readable), rep.Readable[0])
	}
	if len(rep.Kept) != len(paths)-1 {
		t.Fatalf("kept %v, want copies of %d segments", rep.Kept, len(paths)-1)
	}
	for _, k := range rep.Kept {
		if !strings.Contains(filepath.Base(k), brokenSuffix) {
			t.Fatalf("kept copy %s", k)
		}
		if _, err := os.Stat(k); err != nil {
			t.Fatal(err)
		}
	}
	reopenAndCheck(t, dir, 1, bad-1)
	// A sound log salvages to itself.
	again, err := Salvage(dir, 1)
	if err != nil || again.Damage != nil || again.LostFirst != 0 || again.LastSeq != bad-1 {
		t.Fatalf("second salvage: %+v %v", again, err)
	}
}

// TestSalvageRefusesToCutBelowFrom: when the framing breaks before From in
// the segment holding it, no valid prefix reaches the snapshot: refused,
// nothing changed.
func TestSalvageRefusesToCutBelowFrom(t *testing.T) {
	t.Parallel()
	dir := newLog(t, 1<<20, 20)
	p := segPaths(t, dir)[0]
	s := entrySpans(t, p)[4]
	b := readFile(t, p)
	b[s.off] = 0xff // record 5's length prefix: no framing after it
	writeFile(t, p, b)
	before := snapshotDir(t, dir)
	if _, err := Salvage(dir, 8); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Salvage(8): %v, want ErrCorrupt", err)
	}
	sameDir(t, before, snapshotDir(t, dir))
	rep, err := Salvage(dir, 5)
	if err != nil || rep.LostFirst != 5 || rep.LostLast != 20 || rep.LastSeq != 4 {
		t.Fatalf("Salvage(5): %+v %v", rep, err)
	}
}

// TestSalvageFirstRecord: damage in the very first record leaves an empty
// log that keeps its position.
func TestSalvageFirstRecord(t *testing.T) {
	t.Parallel()
	dir := newLog(t, 1<<20, 5)
	flip(t, segPaths(t, dir)[0], 0)
	rep, err := Salvage(dir, 0)
	if err != nil || rep.LostFirst != 1 || rep.LostLast != 5 || rep.LastSeq != 0 || len(rep.Readable) != 4 {
		t.Fatalf("%+v %v", rep, err)
	}
	l := openLog(t, dir, Options{})
	if l.FirstSeq() != 1 || l.LastSeq() != 0 {
		t.Fatalf("log %d..%d", l.FirstSeq(), l.LastSeq())
	}
	appendN(t, l, 2)
	l.Close()
	reopenAndCheck(t, dir, 1, 2)
}

// TestCoveredSegmentWithExtraEntries: damage in a segment the snapshot
// covers may make it read as more entries than it held (a length prefix
// cut short leaves framed debris, skipped as covered); the next segment's
// name, not that count, says where it starts, so the log still opens from
// From.
func TestCoveredSegmentWithExtraEntries(t *testing.T) {
	t.Parallel()
	dir := newLog(t, 256, 60)
	firsts := segFirsts(t, dir)
	if len(firsts) < 3 {
		t.Fatalf("want 3 segments, have %d", len(firsts))
	}
	// The first segment gets one more framed entry after its last: a copy
	// of that last entry, whose seq is then one short of its position.
	p := segPaths(t, dir)[0]
	b := readFile(t, p)
	off, last := 0, 0
	for off < len(b) {
		size, k := binary.Uvarint(b[off:])
		last = off
		off += k + int(size)
	}
	writeFile(t, p, append(b, b[last:]...))
	if _, err := Check(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check without From: %v, want ErrCorrupt", err)
	}
	from := firsts[2] // both older segments covered
	rep, err := CheckFrom(dir, from)
	if err != nil || rep.LastSeq != 60 || len(rep.Covered) != 2 {
		t.Fatalf("CheckFrom(%d): %+v %v", from, rep, err)
	}
	l := openLog(t, dir, Options{From: from})
	wantRecords(t, replayAll(t, l, from), from, 60)
	l.Close()
}
