package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// errInjected is what failpoints return in tests.
var errInjected = errors.New("injected failure")

// payload is the deterministic data of record seq, of varying length.
func payload(seq uint64) []byte {
	return []byte(fmt.Sprintf("record %d:%s", seq, strings.Repeat(string(rune('a'+seq%26)), int(seq%41))))
}

func openLog(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return l
}

// appendN appends the next n records with payload data.
func appendN(t testing.TB, l *Log, n int) {
	t.Helper()
	for range n {
		seq := l.LastSeq() + 1
		if err := l.Append(seq, payload(seq)); err != nil {
			t.Fatalf("Append(%d): %v", seq, err)
		}
	}
}

// newLog creates a log in a fresh directory holding records 1..n, closed.
func newLog(t testing.TB, segSize, n int) string {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentSize: segSize})
	appendN(t, l, n)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return dir
}

type record struct {
	seq  uint64
	data []byte
}

func replayAll(t testing.TB, l *Log, from uint64) []record {
	t.Helper()
	var got []record
	err := l.Replay(from, func(seq uint64, data []byte) error {
		got = append(got, record{seq, bytes.Clone(data)})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%d): %v", from, err)
	}
	return got
}

// wantRecords checks that got is exactly records first..last (none when
// last is first-1) with payload data.
func wantRecords(t testing.TB, got []record, first, last uint64) {
	t.Helper()
	if want := last + 1 - first; uint64(len(got)) != want {
		t.Fatalf("got %d records, want %d (%d..%d)", len(got), want, first, last)
	}
	for i, r := range got {
		seq := first + uint64(i)
		if r.seq != seq {
			t.Fatalf("record %d has seq %d, want %d", i, r.seq, seq)
		}
		if !bytes.Equal(r.data, payload(seq)) {
			t.Fatalf("record %d: data %q, want %q", seq, r.data, payload(seq))
		}
	}
}

// reopenAndCheck reopens dir and checks that it holds records first..last.
func reopenAndCheck(t testing.TB, dir string, first, last uint64) {
	t.Helper()
	l := openLog(t, dir, Options{})
	defer l.Close()
	if l.FirstSeq() != first || l.LastSeq() != last {
		t.Fatalf("reopened log holds %d..%d, want %d..%d", l.FirstSeq(), l.LastSeq(), first, last)
	}
	wantRecords(t, replayAll(t, l, 0), first, last)
}

// segNames returns the names of dir's segment files, in order.
func segNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		seq, err := strconv.ParseUint(e.Name(), 10, 64)
		if len(e.Name()) == nameDigits && err == nil && seq > 0 && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

func segPaths(t testing.TB, dir string) []string {
	t.Helper()
	var paths []string
	for _, n := range segNames(t, dir) {
		paths = append(paths, filepath.Join(dir, n))
	}
	return paths
}

func lastSeg(t testing.TB, dir string) string {
	t.Helper()
	p := segPaths(t, dir)
	return p[len(p)-1]
}

// span is where one entry lies in a segment file.
type span struct{ off, end int64 }

// entrySpans splits a segment file into entries by tidwall/wal's framing
// alone, independently of the package's decoder.
func entrySpans(t testing.TB, path string) []span {
	t.Helper()
	buf := readFile(t, path)
	var spans []span
	for off := 0; off < len(buf); {
		size, k := binary.Uvarint(buf[off:])
		if k <= 0 || uint64(len(buf)-off-k) < size {
			t.Fatalf("%s: cannot frame entry at %d", path, off)
		}
		end := off + k + int(size)
		spans = append(spans, span{int64(off), int64(end)})
		off = end
	}
	return spans
}

// verifySegments checks every entry of every segment in dir with a decoder
// written apart from the package's: CRC, version and seq continuity.
func verifySegments(t testing.TB, dir string) {
	t.Helper()
	tab := crc32.MakeTable(crc32.Castagnoli)
	var next uint64
	for i, name := range segNames(t, dir) {
		var first uint64
		fmt.Sscanf(name, "%d", &first)
		if i > 0 && first != next {
			t.Fatalf("segment %s starts at %d, want %d", name, first, next)
		}
		next = first
		path := filepath.Join(dir, name)
		buf := readFile(t, path)
		last := i == len(segNames(t, dir))-1
		for _, s := range entrySpans(t, path) {
			if last && allZero(buf[s.off:]) {
				break // the tail's spare space
			}
			_, k := binary.Uvarint(buf[s.off:])
			rec := buf[s.off+int64(k) : s.end]
			if len(rec) < 13 || rec[0] != 1 {
				t.Fatalf("%s: bad record header at %d", name, s.off)
			}
			if binary.LittleEndian.Uint32(rec[1:5]) != crc32.Checksum(rec[5:], tab) {
				t.Fatalf("%s: bad CRC at %d", name, s.off)
			}
			if got := binary.LittleEndian.Uint64(rec[5:13]); got != next {
				t.Fatalf("%s: seq %d at %d, want %d", name, got, s.off, next)
			}
			next++
		}
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t testing.TB, path string, b []byte) {
	t.Helper()
	writeFile(t, path, append(readFile(t, path), b...))
}

// snapshotDir returns every file in dir with its contents.
func snapshotDir(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string][]byte)
	for _, e := range entries {
		m[e.Name()] = readFile(t, filepath.Join(dir, e.Name()))
	}
	return m
}

func sameDir(t testing.TB, before, after map[string][]byte) {
	t.Helper()
	for name, b := range before {
		a, ok := after[name]
		if !ok {
			t.Fatalf("%s disappeared", name)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("%s changed", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Fatalf("%s appeared", name)
		}
	}
}

// brokenFiles returns the names of the .broken copies in dir.
func brokenFiles(t testing.TB, dir string) []string {
	t.Helper()
	var names []string
	for name := range snapshotDir(t, dir) {
		if strings.Contains(name, brokenSuffix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// checkTail checks the Log's model of its tail segment against the
// directory: it is how the Log knows to fsync the directory.
func checkTail(t testing.TB, l *Log) {
	t.Helper()
	l.wmu.Lock()
	first, size, alloc := l.tail().first, l.tailSize, l.tailAlloc
	l.wmu.Unlock()
	names := segNames(t, l.dir)
	if got, want := names[len(names)-1], segmentName(first); got != want {
		t.Fatalf("tail segment is %s, Log thinks %s", got, want)
	}
	buf := readFile(t, filepath.Join(l.dir, segmentName(first)))
	if int64(len(buf)) != alloc || alloc < size {
		t.Fatalf("tail segment holds %d bytes, Log thinks %d (%d of entries)", len(buf), alloc, size)
	}
	if !allZero(buf[size:]) {
		t.Fatalf("tail segment's spare space after %d bytes of entries is not zeros", size)
	}
	if size > int64(l.opts.SegmentSize) && alloc != size {
		t.Fatalf("tail segment of %d bytes has %d bytes spare past the segment size %d", size, alloc-size, l.opts.SegmentSize)
	}
}

func isErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}
