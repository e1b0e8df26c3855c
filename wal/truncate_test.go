package wal

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// altPayload is data that differs from payload(seq), to tell records written
// after a truncation from the ones they replace.
func altPayload(seq uint64) []byte { return []byte(fmt.Sprintf("replacement %d", seq)) }

// readAll reads records first..last with Read and returns their data.
func readAll(t testing.TB, l *Log, first, last uint64) [][]byte {
	t.Helper()
	var out [][]byte
	for seq := first; seq <= last; seq++ {
		b, err := l.Read(seq)
		if err != nil {
			t.Fatalf("Read(%d): %v", seq, err)
		}
		out = append(out, b)
	}
	return out
}

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentSize: 256})
	defer l.Close()
	appendN(t, l, 50)
	if err := l.Sync(40); err != nil {
		t.Fatal(err)
	}
	// 41..50 are appended, some not yet written: Read must see them too.
	for i, b := range readAll(t, l, 1, 50) {
		if seq := uint64(i + 1); !bytes.Equal(b, payload(seq)) {
			t.Fatalf("Read(%d) = %q, want %q", seq, b, payload(seq))
		}
	}
	// The copy is the caller's.
	b, _ := l.Read(7)
	b[0] ^= 0xff
	if b2, _ := l.Read(7); !bytes.Equal(b2, payload(7)) {
		t.Fatalf("Read returned memory the log still uses")
	}
	if err := l.TruncateFront(10); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{0, 1, 9, 51, 1 << 40} {
		if _, err := l.Read(seq); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Read(%d) = %v, want ErrNotFound", seq, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(20); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %v, want ErrClosed", err)
	}
}

func TestReadCorrupt(t *testing.T) {
	t.Parallel()
	dir := newLog(t, 128, 20)
	l := openLog(t, dir, Options{SegmentSize: 128})
	defer l.Close()
	// Flip a byte of record 5's data behind the Log's back, in the first
	// segment: Read reads it from the file.
	path := segPaths(t, dir)[0]
	spans := entrySpans(t, path)
	buf := readFile(t, path)
	buf[spans[4].end-1] ^= 0x01
	writeFile(t, path, buf)
	if _, err := l.Read(5); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read of a damaged record = %v, want ErrCorrupt", err)
	}
}

func TestTruncateBack(t *testing.T) {
	t.Parallel()
	for _, keep := range []uint64{0, 1, 5, 17, 39, 40} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, Options{SegmentSize: 128})
			appendN(t, l, 40)
			if err := l.Sync(30); err != nil { // 31..40 still pending
				t.Fatal(err)
			}
			if err := l.TruncateBack(keep); err != nil {
				t.Fatalf("TruncateBack(%d): %v", keep, err)
			}
			if l.FirstSeq() != 1 || l.LastSeq() != keep {
				t.Fatalf("after TruncateBack(%d) the log holds %d..%d", keep, l.FirstSeq(), l.LastSeq())
			}
			checkTail(t, l)
			if _, err := l.Read(keep + 1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Read(%d) after truncation = %v, want ErrNotFound", keep+1, err)
			}
			if err := l.Append(keep+2, nil); !errors.Is(err, ErrSequence) {
				t.Fatalf("Append leaving a gap = %v, want ErrSequence", err)
			}
			for seq := keep + 1; seq <= keep+10; seq++ {
				if err := l.Append(seq, altPayload(seq)); err != nil {
					t.Fatalf("Append(%d): %v", seq, err)
				}
			}
			if err := l.Sync(keep + 10); err != nil {
				t.Fatal(err)
			}
			checkTail(t, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			verifySegments(t, dir)
			l = openLog(t, dir, Options{SegmentSize: 128})
			defer l.Close()
			if l.FirstSeq() != 1 || l.LastSeq() != keep+10 {
				t.Fatalf("reopened log holds %d..%d, want 1..%d", l.FirstSeq(), l.LastSeq(), keep+10)
			}
			for i, b := range readAll(t, l, 1, keep+10) {
				seq := uint64(i + 1)
				want := payload(seq)
				if seq > keep {
					want = altPayload(seq)
				}
				if !bytes.Equal(b, want) {
					t.Fatalf("record %d = %q, want %q", seq, b, want)
				}
			}
		})
	}
}

func TestTruncateBackAfterFront(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentSize: 128})
	appendN(t, l, 30)
	if err := l.TruncateFront(12); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	if err := l.TruncateBack(10); !errors.Is(err, ErrSequence) {
		t.Fatalf("TruncateBack below FirstSeq()-1 = %v, want ErrSequence", err)
	}
	sameDir(t, before, snapshotDir(t, dir))
	if err := l.TruncateBack(30); err != nil { // at LastSeq: nothing to do
		t.Fatal(err)
	}
	if err := l.TruncateBack(11); err != nil { // everything
		t.Fatal(err)
	}
	if l.FirstSeq() != 12 || l.LastSeq() != 11 {
		t.Fatalf("emptied log holds %d..%d, want 12..11", l.FirstSeq(), l.LastSeq())
	}
	appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	reopenAndCheck(t, dir, 12, 14)
}

func TestTruncateBackFailpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fail := false
	l := openLog(t, dir, Options{SegmentSize: 128, Failpoint: func(name string) error {
		if fail && name == "truncate.back" {
			return errInjected
		}
		return nil
	}})
	appendN(t, l, 30)
	if err := l.Sync(30); err != nil {
		t.Fatal(err)
	}
	fail = true
	if err := l.TruncateBack(10); !errors.Is(err, ErrFailed) || !errors.Is(err, errInjected) {
		t.Fatalf("TruncateBack at a failpoint = %v, want ErrFailed wrapping the cause", err)
	}
	if _, err := l.Read(5); !errors.Is(err, ErrFailed) {
		t.Fatalf("Read on a failed log = %v, want ErrFailed", err)
	}
	l.Close()
	reopenAndCheck(t, dir, 1, 30)
}

func TestReset(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		front      uint64 // TruncateFront before the reset, if not 0
		next, want uint64
	}{
		{"forward", 0, 100, 100},
		{"to the position it has", 0, 1, 1},
		{"backward", 20, 3, 3},
		{"empty log", 41, 1000, 1000},
		{"empty log, same place", 41, 41, 41},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, Options{SegmentSize: 128})
			appendN(t, l, 40)
			if tc.front != 0 {
				if err := l.TruncateFront(tc.front); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Reset(tc.next); err != nil {
				t.Fatalf("Reset(%d): %v", tc.next, err)
			}
			if l.FirstSeq() != tc.want || l.LastSeq() != tc.want-1 {
				t.Fatalf("after Reset(%d) the log holds %d..%d", tc.next, l.FirstSeq(), l.LastSeq())
			}
			checkTail(t, l)
			if got := segNames(t, dir); len(got) != 1 || got[0] != segmentName(tc.want) {
				t.Fatalf("segments after Reset: %v", got)
			}
			appendN(t, l, 20)
			if err := l.Sync(l.LastSeq()); err != nil {
				t.Fatal(err)
			}
			checkTail(t, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			verifySegments(t, dir)
			reopenAndCheck(t, dir, tc.want, tc.want+19)
		})
	}
}

func TestResetZero(t *testing.T) {
	t.Parallel()
	dir := newLog(t, 128, 10)
	l := openLog(t, dir, Options{SegmentSize: 128})
	defer l.Close()
	before := snapshotDir(t, dir)
	if err := l.Reset(0); !errors.Is(err, ErrSequence) {
		t.Fatalf("Reset(0) = %v, want ErrSequence", err)
	}
	sameDir(t, before, snapshotDir(t, dir))
	if l.LastSeq() != 10 {
		t.Fatalf("LastSeq after refused Reset = %d", l.LastSeq())
	}
}

// A crash between removing the old segment and creating the new one leaves
// an empty directory: an empty log at 1, which a caller resets again.
func TestResetFailpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentSize: 128, Failpoint: func(name string) error {
		if name == "reset.remove" {
			return errInjected
		}
		return nil
	}})
	appendN(t, l, 30)
	if err := l.Reset(500); !errors.Is(err, ErrFailed) {
		t.Fatalf("Reset at a failpoint = %v, want ErrFailed", err)
	}
	if err := l.Append(31, nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append on a failed log = %v, want ErrFailed", err)
	}
	l.Close()
	reopenAndCheck(t, dir, 1, 0)
	l = openLog(t, dir, Options{SegmentSize: 128})
	if err := l.Reset(500); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2)
	l.Close()
	reopenAndCheck(t, dir, 500, 501)
}
