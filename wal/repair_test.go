package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestOpenRepairsOrRefuses damages a closed log in one way per case, then
// checks that Check reports it without changing a byte, that Open cuts a torn
// tail (keeping a .broken copy) or refuses with ErrCorrupt naming the file and
// offset while changing nothing, and that a repaired log takes new records and
// replays them after a reopen.
func TestOpenRepairsOrRefuses(t *testing.T) {
	t.Parallel()
	const n = 30
	tests := []struct {
		name    string
		segSize int // 0: everything in one segment
		// corrupt damages dir; for refused logs it returns the file and
		// offset the error must name.
		corrupt  func(t *testing.T, dir string) (file string, off int64)
		wantLast uint64 // LastSeq after Open; 0 when Open must refuse
	}{
		{
			// Zeros are spare space (TestZeroTailIsSpare) only when
			// nothing else follows the records.
			name: "torn entry, then zeros",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				appendFile(t, lastSeg(t, dir), append([]byte{40, 1, 2, 3}, make([]byte, 4096)...))
				return "", 0
			},
			wantLast: n,
		},
		{
			name: "zeros, then a record",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := lastSeg(t, dir)
				off := int64(len(readFile(t, seg)))
				appendFile(t, seg, append(make([]byte, 4096), appendEntry(nil, n+1, []byte("later"))...))
				return seg, off
			},
		},
		{
			name: "garbage tail",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				garbage := make([]byte, 777)
				rng := rand.New(rand.NewPCG(7, 7))
				for i := range garbage {
					garbage[i] = byte(rng.UintN(256))
				}
				appendFile(t, lastSeg(t, dir), garbage)
				return "", 0
			},
			wantLast: n,
		},
		{
			name: "duplicate of last record",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := lastSeg(t, dir)
				spans := entrySpans(t, seg)
				last := spans[len(spans)-1]
				appendFile(t, seg, readFile(t, seg)[last.off:last.end])
				return "", 0
			},
			wantLast: n,
		},
		{
			name: "half a record then zeros",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := lastSeg(t, dir)
				spans := entrySpans(t, seg)
				last := spans[len(spans)-1]
				b := readFile(t, seg)[:(last.off+last.end)/2]
				writeFile(t, seg, append(b, make([]byte, 512)...))
				return "", 0
			},
			wantLast: n - 1,
		},
		{
			name: "bit flip in last record",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				flip(t, lastSeg(t, dir), -1)
				return "", 0
			},
			wantLast: n - 1,
		},
		{
			name:    "torn tail in a multi-segment log",
			segSize: 256,
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := lastSeg(t, dir)
				if len(entrySpans(t, seg)) == 0 {
					t.Fatal("empty tail segment")
				}
				b := readFile(t, seg)
				writeFile(t, seg, b[:len(b)-3])
				return "", 0
			},
			wantLast: n - 1,
		},
		{
			name:    "bit flip in an older segment",
			segSize: 256,
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := segPaths(t, dir)[0]
				return seg, flip(t, seg, 2)
			},
		},
		{
			name:    "unknown version in an older segment",
			segSize: 256,
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := segPaths(t, dir)[1]
				s := entrySpans(t, seg)[1]
				b := readFile(t, seg)
				b[s.off+1] = 2 // after the one-byte length; the CRC does not cover it
				writeFile(t, seg, b)
				return seg, s.off
			},
		},
		{
			name:    "older segment cut short",
			segSize: 256,
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := segPaths(t, dir)[0]
				spans := entrySpans(t, seg)
				b := readFile(t, seg)
				writeFile(t, seg, b[:len(b)-5])
				return seg, spans[len(spans)-1].off
			},
		},
		{
			name:    "missing middle segment",
			segSize: 256,
			corrupt: func(t *testing.T, dir string) (string, int64) {
				segs := segPaths(t, dir)
				if err := os.Remove(segs[1]); err != nil {
					t.Fatal(err)
				}
				return segs[2], 0
			},
		},
		{
			name: "bit flip mid last segment, valid records after",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := lastSeg(t, dir)
				return seg, flip(t, seg, n/2)
			},
		},
		{
			name: "length prefix damaged mid last segment",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := lastSeg(t, dir)
				s := entrySpans(t, seg)[n/2]
				b := readFile(t, seg)
				b[s.off] = 0x7f // longer than the record: swallows the next one
				writeFile(t, seg, b)
				return seg, s.off
			},
		},
		{
			name: "zeroed record mid last segment",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := lastSeg(t, dir)
				s := entrySpans(t, seg)[n/2]
				b := readFile(t, seg)
				clear(b[s.off:s.end])
				writeFile(t, seg, b)
				return seg, s.off
			},
		},
		{
			name: "records swapped in last segment",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := lastSeg(t, dir)
				spans := entrySpans(t, seg)
				a, b := spans[10], spans[11]
				buf := readFile(t, seg)
				var out []byte
				out = append(out, buf[:a.off]...)
				out = append(out, buf[b.off:b.end]...)
				out = append(out, buf[a.off:a.end]...)
				out = append(out, buf[b.end:]...)
				writeFile(t, seg, out)
				return seg, a.off
			},
		},
		{
			name: "record missing mid last segment",
			corrupt: func(t *testing.T, dir string) (string, int64) {
				seg := lastSeg(t, dir)
				s := entrySpans(t, seg)[n/2]
				buf := readFile(t, seg)
				writeFile(t, seg, append(buf[:s.off:s.off], buf[s.end:]...))
				return seg, s.off
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newLog(t, tt.segSize, n)
			wantFile, wantOff := tt.corrupt(t, dir)
			damaged := snapshotDir(t, dir)

			rep, cerr := Check(dir)
			sameDir(t, damaged, snapshotDir(t, dir))
			l, err := Open(dir, Options{SegmentSize: tt.segSize})

			if tt.wantLast == 0 {
				// Refused: both say where, and nothing was touched.
				where := fmt.Sprintf("%s at offset %d", wantFile, wantOff)
				for _, e := range []error{cerr, err} {
					isErr(t, e, ErrCorrupt)
					if !strings.Contains(e.Error(), where) {
						t.Fatalf("error %q does not name %q", e, where)
					}
				}
				if l != nil {
					t.Fatal("Open returned a Log with an error")
				}
				if d := rep.Corrupt; d == nil || d.File != wantFile || d.Offset != wantOff {
					t.Fatalf("Check reported %+v, want damage in %s at %d", d, wantFile, wantOff)
				}
				sameDir(t, damaged, snapshotDir(t, dir))
				return
			}

			if cerr != nil || rep.Corrupt != nil || rep.Torn == nil || rep.LastSeq != tt.wantLast {
				t.Fatalf("Check: %+v, %v; want a torn tail after %d", rep, cerr, tt.wantLast)
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if l.LastSeq() != tt.wantLast {
				t.Fatalf("LastSeq %d after repair, want %d", l.LastSeq(), tt.wantLast)
			}
			broken := brokenFiles(t, dir)
			if len(broken) != 1 {
				t.Fatalf(".broken copies: %v, want one", broken)
			}
			tail := filepath.Base(lastSeg(t, dir))
			if want := tail + brokenSuffix; broken[0] != want {
				t.Fatalf("copy named %s, want %s", broken[0], want)
			}
			if !bytes.Equal(readFile(t, filepath.Join(dir, broken[0])), damaged[tail]) {
				t.Fatal(".broken copy differs from the damaged segment")
			}
			appendN(t, l, 5)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			verifySegments(t, dir)
			reopenAndCheck(t, dir, 1, tt.wantLast+5)
			if rep, err := Check(dir); err != nil || rep.Torn != nil || rep.LastSeq != tt.wantLast+5 {
				t.Fatalf("Check after repair: %+v, %v", rep, err)
			}
		})
	}
}

// flip flips one bit in the data of entry i of the segment at path (negative
// i counts from the end) and returns the entry's offset.
func flip(t *testing.T, path string, i int) int64 {
	t.Helper()
	spans := entrySpans(t, path)
	if i < 0 {
		i += len(spans)
	}
	s := spans[i]
	b := readFile(t, path)
	b[s.end-1] ^= 0x04
	writeFile(t, path, b)
	return s.off
}

// TestTornLastRecordEveryCut cuts the final record at every byte, as a crash
// during its write could, and checks that Open drops exactly that record.
func TestTornLastRecordEveryCut(t *testing.T) {
	t.Parallel()
	const n = 6
	src := t.TempDir()
	l := openLog(t, src, Options{})
	appendN(t, l, n-1)
	// Long enough for a two-byte length prefix, so the cuts split that too.
	if err := l.Append(n, bytes.Repeat([]byte("z"), 200)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	name := segNames(t, src)[0]
	whole := readFile(t, filepath.Join(src, name))
	spans := entrySpans(t, filepath.Join(src, name))
	last := spans[len(spans)-1]
	if last.end != int64(len(whole)) {
		t.Fatal("last entry does not end the file")
	}
	for cut := last.off; cut < last.end; cut++ {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			t.Parallel() // mostly waiting for fsyncs
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, name), whole[:cut])
			torn := cut > last.off // cut at the boundary: a sound shorter log

			rep, err := Check(dir)
			if err != nil || rep.LastSeq != n-1 || (rep.Torn != nil) != torn {
				t.Fatalf("Check: %+v, %v", rep, err)
			}
			if torn && (rep.Torn.Offset != last.off || rep.Torn.Size != cut-last.off) {
				t.Fatalf("torn tail reported at %d (+%d), want %d (+%d)", rep.Torn.Offset, rep.Torn.Size, last.off, cut-last.off)
			}
			l, err := Open(dir, Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if l.LastSeq() != n-1 {
				t.Fatalf("LastSeq %d, want %d", l.LastSeq(), n-1)
			}
			if got, want := len(brokenFiles(t, dir)), map[bool]int{false: 0, true: 1}[torn]; got != want {
				t.Fatalf("%d .broken copies, want %d", got, want)
			}
			if err := l.Append(n, payload(n)); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			reopenAndCheck(t, dir, 1, n)
		})
	}
}

func TestRepair(t *testing.T) {
	t.Parallel()
	dir := newLog(t, 0, 10)
	seg := lastSeg(t, dir)
	good := readFile(t, seg)

	rep, err := Repair(dir) // nothing to do
	if err != nil || rep.Cut != nil || rep.LastSeq != 10 || rep.Records != 10 {
		t.Fatalf("Repair of a sound log: %+v, %v", rep, err)
	}

	for i, want := range []string{".broken", ".broken.1"} {
		torn := append(bytes.Clone(good), 0x20, 1, 2, 3)
		writeFile(t, seg, torn)
		rep, err := Repair(dir)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Cut == nil || rep.Cut.File != seg || rep.Cut.Offset != int64(len(good)) || rep.Cut.Size != 4 {
			t.Fatalf("repair %d cut %+v, want 4 bytes at %d of %s", i, rep.Cut, len(good), seg)
		}
		if rep.Broken != seg+want {
			t.Fatalf("repair %d kept %s, want %s", i, rep.Broken, seg+want)
		}
		if !bytes.Equal(readFile(t, rep.Broken), torn) {
			t.Fatalf("repair %d: copy differs from the torn segment", i)
		}
		if !bytes.Equal(readFile(t, seg), good) {
			t.Fatalf("repair %d: segment not cut back to its valid records", i)
		}
	}
	reopenAndCheck(t, dir, 1, 10)

	// Damage Repair must not paper over.
	flip(t, seg, 3)
	before := snapshotDir(t, dir)
	_, err = Repair(dir)
	isErr(t, err, ErrCorrupt)
	sameDir(t, before, snapshotDir(t, dir))
}

// TestOpenFinishesInterruptedTruncation builds the files a crash in the
// middle of tidwall/wal's truncation leaves, and checks that Check and Open
// see the log as tidwall/wal resolves it.
func TestOpenFinishesInterruptedTruncation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		leave     func(t *testing.T, dir string) (first, last uint64)
		wantError bool
	}{
		{
			name: "front truncation with the old segments still there",
			leave: func(t *testing.T, dir string) (uint64, uint64) {
				seg := segPaths(t, dir)[1]
				spans := entrySpans(t, seg)
				var first uint64
				fmt.Sscanf(filepath.Base(seg), "%d", &first)
				first += 2
				writeFile(t, filepath.Join(dir, segmentName(first)+startSuffix), readFile(t, seg)[spans[2].off:])
				writeFile(t, filepath.Join(dir, segmentName(first+1)+startSuffix+tempSuffix), []byte("half-written"))
				return first, 40
			},
		},
		{
			name: "front truncation at a segment start",
			leave: func(t *testing.T, dir string) (uint64, uint64) {
				seg := segPaths(t, dir)[2]
				writeFile(t, seg+startSuffix, readFile(t, seg))
				var first uint64
				fmt.Sscanf(filepath.Base(seg), "%d", &first)
				return first, 40
			},
		},
		{
			name: "back truncation",
			leave: func(t *testing.T, dir string) (uint64, uint64) {
				seg := segPaths(t, dir)[1]
				spans := entrySpans(t, seg)
				writeFile(t, seg+endSuffix, readFile(t, seg)[:spans[1].end])
				var first uint64
				fmt.Sscanf(filepath.Base(seg), "%d", &first)
				return 1, first + 1
			},
		},
		{
			name: "both at once",
			leave: func(t *testing.T, dir string) (uint64, uint64) {
				seg := segPaths(t, dir)[1]
				writeFile(t, seg+startSuffix, readFile(t, seg))
				writeFile(t, seg+endSuffix, readFile(t, seg))
				return 0, 0
			},
			wantError: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newLog(t, 256, 40)
			first, last := tt.leave(t, dir)
			before := snapshotDir(t, dir)
			rep, err := Check(dir)
			sameDir(t, before, snapshotDir(t, dir))
			if tt.wantError {
				isErr(t, err, ErrCorrupt)
				_, err = Open(dir, Options{})
				isErr(t, err, ErrCorrupt)
				sameDir(t, before, snapshotDir(t, dir))
				return
			}
			if err != nil || rep.FirstSeq != first || rep.LastSeq != last {
				t.Fatalf("Check: %+v, %v; want %d..%d", rep, err, first, last)
			}
			reopenAndCheck(t, dir, first, last)
			for name := range snapshotDir(t, dir) {
				if len(name) != nameDigits {
					t.Fatalf("%s left behind", name)
				}
			}
			verifySegments(t, dir)
		})
	}
}

func TestOpenCreatesDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a", "b", "wal")
	l := openLog(t, dir, Options{})
	appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	reopenAndCheck(t, dir, 1, 3)

	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, nil)
	if _, err := Open(file, Options{}); err == nil {
		t.Fatal("Open of a regular file succeeded")
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	t.Run("missing directory", func(t *testing.T) {
		if _, err := Check(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v, want not-exist", err)
		}
	})
	t.Run("empty directory", func(t *testing.T) {
		rep, err := Check(t.TempDir())
		if err != nil || !reflect.DeepEqual(rep, CheckReport{FirstSeq: 1}) {
			t.Fatalf("got %+v, %v", rep, err)
		}
	})
	t.Run("sound log", func(t *testing.T) {
		dir := newLog(t, 256, 40)
		var size int64
		for _, p := range segPaths(t, dir) {
			size += int64(len(readFile(t, p)))
		}
		rep, err := Check(dir)
		want := CheckReport{Segments: len(segNames(t, dir)), FirstSeq: 1, LastSeq: 40, Records: 40, Bytes: size}
		if err != nil || !reflect.DeepEqual(rep, want) {
			t.Fatalf("got %+v, %v; want %+v", rep, err, want)
		}
	})
	t.Run("ignores other files", func(t *testing.T) {
		dir := newLog(t, 0, 5)
		for _, name := range []string{"notes.txt", "00000000000000000000", "0000000000000000000x", segmentName(1) + ".broken", segmentName(9) + ".bak"} {
			writeFile(t, filepath.Join(dir, name), []byte("junk"))
		}
		if err := os.Mkdir(filepath.Join(dir, segmentName(7)), 0o750); err != nil {
			t.Fatal(err)
		}
		rep, err := Check(dir)
		if err != nil || rep.LastSeq != 5 || rep.Segments != 1 {
			t.Fatalf("got %+v, %v", rep, err)
		}
		reopenAndCheck(t, dir, 1, 5)
	})
}

func TestSegmentName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		seq  uint64
		want string
	}{
		{1, "00000000000000000001"},
		{4097, "00000000000000004097"},
		{1<<64 - 1, "18446744073709551615"},
	} {
		if got := segmentName(tt.seq); got != tt.want {
			t.Errorf("segmentName(%d) = %s, want %s", tt.seq, got, tt.want)
		}
	}
	// The frame is what doc.go says it is.
	rec := appendRecord(nil, 0x0102030405060708, []byte("hi"))
	if len(rec) != headerSize+2 || rec[0] != 1 || binary.LittleEndian.Uint64(rec[5:13]) != 0x0102030405060708 || string(rec[13:]) != "hi" {
		t.Fatalf("frame % x", rec)
	}
}

func TestScan(t *testing.T) {
	t.Parallel()
	collect := func(dir string, from uint64) ([]record, error) {
		var got []record
		err := Scan(dir, from, func(seq uint64, data []byte) error {
			got = append(got, record{seq, bytes.Clone(data)})
			return nil
		})
		return got, err
	}
	dir := newLog(t, 256, 40)
	for _, from := range []uint64{0, 1, 17, 40, 41} {
		got, err := collect(dir, from)
		if err != nil {
			t.Fatal(err)
		}
		wantRecords(t, got, max(from, 1), 40)
	}

	// A torn tail is left out and left alone.
	appendFile(t, lastSeg(t, dir), []byte{0x30, 1, 2})
	before := snapshotDir(t, dir)
	got, err := collect(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantRecords(t, got, 1, 40)
	sameDir(t, before, snapshotDir(t, dir))

	// Damage Open refuses is refused before any record is passed on.
	flip(t, segPaths(t, dir)[1], 1)
	got, err = collect(dir, 0)
	isErr(t, err, ErrCorrupt)
	if len(got) != 0 {
		t.Fatalf("%d records passed on before the damage was reported", len(got))
	}

	stop := errors.New("stop")
	dir = newLog(t, 0, 5)
	if err := Scan(dir, 0, func(uint64, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("got %v, want the callback's error", err)
	}
}
