package wal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	twal "github.com/tidwall/wal"
)

// Earlier versions of this package kept their segments with tidwall/wal
// v1.2.1 and existing directories must keep opening; these tests hold the
// Log to that library's layout, byte for byte, in both directions.

// twalOptions are the settings the package used to open tidwall/wal with.
func twalOptions(segSize int) *twal.Options {
	return &twal.Options{NoSync: true, SegmentSize: segSize, LogFormat: twal.Binary, AllowEmpty: true}
}

func openTwal(t *testing.T, dir string, segSize int) *twal.Log {
	t.Helper()
	tw, err := twal.Open(dir, twalOptions(segSize))
	if err != nil {
		t.Fatalf("tidwall/wal Open(%s): %v", dir, err)
	}
	return tw
}

// layoutPayload is record seq's data in the layout tests: sizes from empty
// to over a whole small segment.
func layoutPayload(rng *rand.Rand, seq uint64) []byte {
	n := rng.IntN(60)
	if rng.IntN(12) == 0 {
		n = 200 + rng.IntN(400)
	}
	return bytes.Repeat([]byte{byte('a' + seq%26)}, n)
}

// TestSameFilesAsTidwall drives the Log and tidwall/wal through the same
// random writes, truncations at both ends and reopenings with other segment
// sizes, and requires the two directories to hold the same files with the
// same bytes after every step.
func TestSameFilesAsTidwall(t *testing.T) {
	t.Parallel()
	steps := 400
	if testing.Short() {
		steps = 80
	}
	rng := rand.New(rand.NewPCG(7, 13))
	ours, theirs := t.TempDir(), t.TempDir()
	segSize := 300
	l := openLog(t, ours, Options{SegmentSize: segSize})
	tw := openTwal(t, theirs, segSize)
	defer func() { l.Close(); tw.Close() }()
	var b twal.Batch
	most := 0 // the most segments seen at once
	for step := range steps {
		var what string
		switch r := rng.IntN(20); {
		case r < 14:
			n := 1 + rng.IntN(12)
			what = fmt.Sprintf("append %d", n)
			for range n {
				seq := l.LastSeq() + 1
				data := layoutPayload(rng, seq)
				if err := l.Append(seq, data); err != nil {
					t.Fatal(err)
				}
				b.Write(seq, appendRecord(nil, seq, data))
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := tw.WriteBatch(&b); err != nil {
				t.Fatal(err)
			}
		case r < 16:
			first, last := l.FirstSeq(), l.LastSeq()
			seq := first + rng.Uint64N(last-first+2)
			what = fmt.Sprintf("truncate front to %d of %d..%d", seq, first, last)
			if err := l.TruncateFront(seq); err != nil {
				t.Fatal(err)
			}
			if err := tw.TruncateFront(seq); err != nil {
				t.Fatal(err)
			}
		case r < 18:
			first, last := l.FirstSeq(), l.LastSeq()
			seq := first - 1 + rng.Uint64N(last-first+2)
			what = fmt.Sprintf("truncate back to %d of %d..%d", seq, first, last)
			if err := l.TruncateBack(seq); err != nil {
				t.Fatal(err)
			}
			if err := tw.TruncateBack(seq); err != nil {
				t.Fatal(err)
			}
		default:
			segSize = []int{100, 300, 1000}[rng.IntN(3)]
			what = fmt.Sprintf("reopen with segments of %d", segSize)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, ours, Options{SegmentSize: segSize})
			tw = openTwal(t, theirs, segSize)
		}
		a, o := snapshotDir(t, ours), snapshotDir(t, theirs)
		if len(a) != len(o) {
			t.Fatalf("step %d (%s): %d files, tidwall/wal has %d: %v vs %v", step, what, len(a), len(o), keys(a), keys(o))
		}
		tail := segNames(t, ours)[len(segNames(t, ours))-1]
		for name, data := range o {
			got, ok := a[name]
			if ok && name == tail && len(got) > len(data) && allZero(got[len(data):]) {
				// The open tail's spare space: zeros past the same bytes.
				got = got[:len(data)]
			}
			if !ok || !bytes.Equal(got, data) {
				t.Fatalf("step %d (%s): %s differs from tidwall/wal's (%d bytes vs %d, present %v)", step, what, name, len(got), len(data), ok)
			}
		}
		first, _ := tw.FirstIndex()
		last, _ := tw.LastIndex()
		if l.FirstSeq() != first || l.LastSeq() != last {
			t.Fatalf("step %d (%s): log holds %d..%d, tidwall/wal %d..%d", step, what, l.FirstSeq(), l.LastSeq(), first, last)
		}
		most = max(most, len(segNames(t, ours)))
	}
	if most < 4 {
		t.Fatalf("never more than %d segments at once; the run should exercise several", most)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestOpensTidwallDirectory opens a directory that tidwall/wal wrote, as the
// package's earlier versions did, reads it, writes on and truncates, and
// then hands the directory back to tidwall/wal, which must read every
// record.
func TestOpensTidwallDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tw := openTwal(t, dir, 256)
	var b twal.Batch
	for seq := uint64(1); seq <= 60; seq++ {
		b.Write(seq, appendRecord(nil, seq, payload(seq)))
		if seq%7 == 0 {
			if err := tw.WriteBatch(&b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}
	if err := tw.TruncateFront(4); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}

	l := openLog(t, dir, Options{SegmentSize: 256})
	if l.FirstSeq() != 4 || l.LastSeq() != 60 {
		t.Fatalf("log holds %d..%d, want 4..60", l.FirstSeq(), l.LastSeq())
	}
	wantRecords(t, replayAll(t, l, 0), 4, 60)
	for i, data := range readAll(t, l, 4, 60) {
		if seq := uint64(4 + i); !bytes.Equal(data, payload(seq)) {
			t.Fatalf("Read(%d) = %q", seq, data)
		}
	}
	appendN(t, l, 30)
	if err := l.TruncateFront(10); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateBack(80); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 5)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	tw = openTwal(t, dir, 256)
	defer tw.Close()
	first, _ := tw.FirstIndex()
	last, _ := tw.LastIndex()
	if first != 10 || last != 85 {
		t.Fatalf("tidwall/wal sees %d..%d, want 10..85", first, last)
	}
	for seq := first; seq <= last; seq++ {
		rec, err := tw.Read(seq)
		if err != nil {
			t.Fatal(err)
		}
		if want := appendRecord(nil, seq, payload(seq)); !bytes.Equal(rec, want) {
			t.Fatalf("tidwall/wal reads record %d as %q, want %q", seq, rec, want)
		}
	}
}
