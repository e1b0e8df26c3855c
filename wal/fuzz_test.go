package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// seedSegments are segment files for the fuzz corpora: sound, torn, padded
// and damaged.
func seedSegments() [][]byte {
	var sound []byte
	for seq := uint64(1); seq <= 5; seq++ {
		rec := appendRecord(nil, seq, payload(seq))
		sound = binary.AppendUvarint(sound, uint64(len(rec)))
		sound = append(sound, rec...)
	}
	big := appendRecord(nil, 6, bytes.Repeat([]byte("b"), 300))
	withBig := append(binary.AppendUvarint(bytes.Clone(sound), uint64(len(big))), big...)
	flipped := bytes.Clone(sound)
	flipped[20] ^= 1
	return [][]byte{
		nil,
		{0},
		{0x80},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		{13, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0},
		sound,
		withBig,
		withBig[:len(withBig)-100],
		withBig[:len(sound)+1],
		append(bytes.Clone(sound), make([]byte, 64)...),
		append(bytes.Clone(sound), sound[:30]...),
		append(bytes.Clone(sound), sound...),
		flipped,
		[]byte("garbage that is not a log at all, not even close......"),
	}
}

// FuzzDecode feeds arbitrary bytes to the segment decoder: it must not panic,
// the valid prefix it reports must re-encode to exactly the same bytes, and
// it must stop only at the end or at an invalid entry.
func FuzzDecode(f *testing.F) {
	for _, seg := range seedSegments() {
		f.Add(seg, uint64(1))
	}
	f.Add(seedSegments()[5], uint64(2))
	f.Add(seedSegments()[5], uint64(1<<64-3))
	f.Fuzz(func(t *testing.T, buf []byte, first uint64) {
		s := scanSegment(buf, first, 0)
		if s.good < 0 || s.good > int64(len(buf)) {
			t.Fatalf("valid prefix %d outside a %d-byte file", s.good, len(buf))
		}
		if (s.fault == faultNone) != (s.good == int64(len(buf))) {
			t.Fatalf("fault %v with %d of %d bytes valid", s.fault, s.good, len(buf))
		}
		var re []byte
		off := 0
		for i := range s.count {
			rec, n, f := nextEntry(buf[off:])
			if f != faultNone {
				t.Fatalf("entry %d: %v", i, f)
			}
			data, f := checkRecord(rec, first+i)
			if f != faultNone {
				t.Fatalf("record %d: %v", first+i, f)
			}
			rec = appendRecord(nil, first+i, data)
			re = binary.AppendUvarint(re, uint64(len(rec)))
			re = append(re, rec...)
			off += n
		}
		if !bytes.Equal(re, buf[:s.good]) {
			t.Fatal("valid prefix does not re-encode to the same bytes")
		}
		validAfter(buf, s.good, first+s.count)
	})
}

// FuzzOpen writes arbitrary bytes as a segment file and opens it. Check and
// Open must not panic and must agree; when Open accepts the log, every record
// on disk has a valid CRC and the log keeps working.
func FuzzOpen(f *testing.F) {
	for _, seg := range seedSegments() {
		f.Add(seg, uint64(1))
	}
	f.Add(seedSegments()[5], uint64(9))
	f.Add(seedSegments()[5], uint64(0)) // not a segment name
	f.Fuzz(func(t *testing.T, buf []byte, first uint64) {
		dir := t.TempDir()
		seg := filepath.Join(dir, segmentName(first))
		if err := os.WriteFile(seg, buf, 0o640); err != nil {
			t.Fatal(err)
		}
		before := snapshotDir(t, dir)
		rep, cerr := Check(dir)
		sameDir(t, before, snapshotDir(t, dir))
		if cerr != nil && !errors.Is(cerr, ErrCorrupt) {
			t.Fatalf("Check: %v", cerr)
		}

		l, err := Open(dir, Options{})
		if cerr != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Check found %v, Open returned %v", cerr, err)
			}
			sameDir(t, before, snapshotDir(t, dir))
			return
		}
		if err != nil {
			t.Fatalf("Check passed (%+v), Open failed: %v", rep, err)
		}
		if l.FirstSeq() != rep.FirstSeq || l.LastSeq() != rep.LastSeq {
			t.Fatalf("Open holds %d..%d, Check said %d..%d", l.FirstSeq(), l.LastSeq(), rep.FirstSeq, rep.LastSeq)
		}
		verifySegments(t, dir)
		var n uint64
		err = l.Replay(0, func(seq uint64, _ []byte) error {
			if seq != rep.FirstSeq+n {
				t.Fatalf("replayed %d, want %d", seq, rep.FirstSeq+n)
			}
			n++
			return nil
		})
		if err != nil || n != rep.Records {
			t.Fatalf("replayed %d records, Check counted %d: %v", n, rep.Records, err)
		}
		if l.LastSeq() == 1<<64-1 {
			l.Close()
			return // no room for another record
		}
		next := l.LastSeq() + 1
		if err := l.Append(next, []byte("after")); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, dir, Options{})
		defer l.Close()
		if l.LastSeq() != next {
			t.Fatalf("reopened LastSeq %d, want %d", l.LastSeq(), next)
		}
		verifySegments(t, dir)
	})
}
