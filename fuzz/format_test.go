//go:build linux

package fuzz

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
)

// This file reads the on-disk formats as wal/doc.go and snapshot/doc.go
// specify them, independently of the packages that implement them, so the
// tests can say what a directory holds without trusting the code under test.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const walHeader = 1 + 4 + 8 // version, crc, seq

// refEntry splits the entry at the start of b: a minimal uvarint length and
// that many bytes. ok is false when b does not hold a whole entry.
func refEntry(b []byte) (rec []byte, n int, ok bool) {
	size, k := binary.Uvarint(b)
	if k <= 0 || k != len(binary.AppendUvarint(nil, size)) || size > uint64(len(b)-k) {
		return nil, 0, false
	}
	return b[k : k+int(size)], k + int(size), true
}

// refRecord validates rec as the record at position seq and returns its data.
func refRecord(rec []byte, seq uint64) ([]byte, bool) {
	if len(rec) < walHeader || rec[0] != 1 || seq == 0 ||
		binary.LittleEndian.Uint32(rec[1:5]) != crc32.Checksum(rec[5:], castagnoli) ||
		binary.LittleEndian.Uint64(rec[5:13]) != seq {
		return nil, false
	}
	return rec[walHeader:], true
}

// refSegment returns the data of the valid records at the start of a
// segment whose first record is first, and the offset just past them.
func refSegment(buf []byte, first uint64) (recs [][]byte, good int) {
	for off := 0; off < len(buf); {
		rec, n, ok := refEntry(buf[off:])
		if !ok {
			break
		}
		data, ok := refRecord(rec, first+uint64(len(recs)))
		if !ok {
			break
		}
		recs = append(recs, data)
		off += n
		good = off
	}
	return recs, good
}

// refFrame frames data as the wal record seq, with its length prefix.
func refFrame(seq uint64, data []byte) []byte {
	rec := make([]byte, walHeader, walHeader+len(data))
	rec[0] = 1
	binary.LittleEndian.PutUint64(rec[5:], seq)
	rec = append(rec, data...)
	binary.LittleEndian.PutUint32(rec[1:], crc32.Checksum(rec[5:], castagnoli))
	return append(binary.AppendUvarint(nil, uint64(len(rec))), rec...)
}

// segName parses a segment file name (20 digits, nothing else).
func segName(name string) (uint64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(name, 10, 64)
	return n, err == nil && n > 0
}

// snapName parses "snap-<20 digits>.snap".
func snapName(name string) (uint64, bool) {
	if !strings.HasPrefix(name, "snap-") || !strings.HasSuffix(name, ".snap") {
		return 0, false
	}
	return segName(strings.TrimSuffix(strings.TrimPrefix(name, "snap-"), ".snap"))
}

// image is the content of a data directory: relative path to bytes.
type image map[string][]byte

// capture reads every regular file under dir.
func capture(tb testing.TB, dir string) image {
	tb.Helper()
	im := image{}
	files, err := listFiles(dir)
	if err != nil {
		tb.Fatalf("capture %s: %v", dir, err)
	}
	for _, f := range files {
		b, err := vfs.ReadFile(fsOf(dir), filepath.Join(dir, f))
		if err != nil {
			tb.Fatalf("capture %s: %v", dir, err)
		}
		im[f] = b
	}
	im.dropSpare()
	return im
}

// dropSpare cuts the zeros an open log keeps written after the records of
// its tail segment (wal.Options.Preallocate): what a crash leaves there
// reads as spare space, so the image is the same log without them, and
// the steps of a run append to segments as they would without
// preallocation. withSpare puts zeros back to test that they change
// nothing.
func (im image) dropSpare() {
	segs := im.segments()
	if len(segs) == 0 {
		return
	}
	p := segs[len(segs)-1]
	if end := validEnd(im[p], p); end < len(im[p]) && allZero(im[p][end:]) {
		im[p] = im[p][:end]
	}
}

// withSpare returns im with n zero bytes after its tail segment's records.
func (im image) withSpare(n int) image {
	segs := im.segments()
	if len(segs) == 0 {
		return im
	}
	out := im.clone()
	p := segs[len(segs)-1]
	out[p] = append(bytes.Clone(out[p]), make([]byte, n)...)
	return out
}

// validEnd is the offset just past the last valid record of the segment
// buf at path p.
func validEnd(buf []byte, p string) int {
	first, _ := segName(filepath.Base(p))
	off := 0
	for n := uint64(0); off < len(buf); n++ {
		rec, size, ok := refEntry(buf[off:])
		if !ok {
			break
		}
		if _, ok := refRecord(rec, first+n); !ok {
			break
		}
		off += size
	}
	return off
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (im image) clone() image {
	out := make(image, len(im))
	for k, v := range im {
		out[k] = v
	}
	return out
}

// materialize makes dir hold exactly the files of im.
func (im image) materialize(tb testing.TB, dir string) {
	tb.Helper()
	fsys := fsOf(dir)
	if onScratch(dir) {
		scratch.RemoveAll(dir)
	} else if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
	for _, d := range []string{"wal", "snap"} {
		if err := fsys.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for name, b := range im {
		p := filepath.Join(dir, name)
		if err := fsys.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := writeFile(fsys, p, b); err != nil {
			tb.Fatal(err)
		}
	}
}

func (im image) hash() [32]byte {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(im)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		binary.Write(h, binary.LittleEndian, uint64(len(im[k])))
		h.Write(im[k])
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// segments returns the log segment paths of im in log order.
func (im image) segments() []string {
	var out []string
	for p := range im {
		dir, name := filepath.Split(p)
		if dir == "wal/" {
			if _, ok := segName(name); ok {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// snapshots returns the snapshot paths of im, oldest first.
func (im image) snapshots() []string {
	var out []string
	for p := range im {
		dir, name := filepath.Split(p)
		if dir == "snap/" {
			if _, ok := snapName(name); ok {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// lastSeq is the sequence number a correct recovery of im reaches: the last
// valid record of an unbroken run of segments, or the newest snapshot's seq
// if the log holds nothing after it. ok is false when the segments do not
// follow one another (which no crash can cause).
func (im image) lastSeq() (seq uint64, ok bool) {
	segs := im.segments()
	next := uint64(0)
	for i, p := range segs {
		first, _ := segName(filepath.Base(p))
		if i > 0 && first != next {
			return 0, false
		}
		recs, good := refSegment(im[p], first)
		if i < len(segs)-1 && good != len(im[p]) {
			return 0, false
		}
		next = first + uint64(len(recs))
	}
	if next > 0 {
		seq = next - 1
	}
	if s := im.snapshots(); len(s) > 0 {
		if sn, _ := snapName(filepath.Base(s[len(s)-1])); sn > seq {
			seq = sn
		}
	}
	return seq, true
}

// tailEntry returns the last segment of im and the offsets of its valid
// entries' starts.
func (im image) tailEntries() (string, []int) {
	segs := im.segments()
	if len(segs) == 0 {
		return "", nil
	}
	p := segs[len(segs)-1]
	first, _ := segName(filepath.Base(p))
	var starts []int
	buf := im[p]
	for off := 0; off < len(buf); {
		rec, n, ok := refEntry(buf[off:])
		if !ok {
			break
		}
		if _, ok := refRecord(rec, first+uint64(len(starts))); !ok {
			break
		}
		starts = append(starts, off)
		off += n
	}
	return p, starts
}

// extends reports whether b starts with a.
func extends(b, a []byte) bool { return len(b) >= len(a) && bytes.Equal(b[:len(a)], a) }

// valueFiles returns the value log file paths of im in number order.
func (im image) valueFiles() []string {
	var out []string
	for p := range im {
		if dir, name := filepath.Split(p); dir == "vlog/" && strings.HasSuffix(name, ".vlog") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
