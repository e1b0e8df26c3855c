package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// smallSeq and smallRecords make a snapshot small enough to damage at every
// byte and bit. Its layout:
//
//	 0..21  header (seq at 9, header CRC at 17)
//	21..26  record 0: length 0, CRC
//	26..32  record 1: length 1, CRC, "a"
//	32..52  record 2: length 15, CRC at 33, data at 37
//	52..57  trailer marker
//	57..65  count, 65..69 stream CRC, 69..77 seq
const smallSeq = 42

func smallRecords() [][]byte {
	return [][]byte{{}, []byte("a"), []byte("hello, snapshot")}
}

// replaceFile writes data as a new file at path, removing what was there:
// truncating a file that has data makes ext4 write it out on close
// (auto_da_alloc), a millisecond per file of a sweep.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data as a snapshot file named for seq in a fresh dir.
func writeFile(t *testing.T, seq uint64, data []byte) string {
	t.Helper()
	path := snapPath(t.TempDir(), seq)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustCorrupt(t *testing.T, path string, err error) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error = %v, want ErrCorrupt", err)
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, " at offset ") {
		t.Fatalf("error %q does not name the file and offset", msg)
	}
}

func header(seq uint64) []byte { return appendHeader(nil, seq) }

func recordBytes(lenField []byte, rec []byte) []byte {
	b := append([]byte{}, lenField...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(rec, castagnoli))
	return append(b, rec...)
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestSmallLayout(t *testing.T) {
	t.Parallel()
	// The offsets the corruption tests rely on.
	if got := len(encode(smallSeq, smallRecords())); got != 77 {
		t.Fatalf("small snapshot is %d bytes, want 77", got)
	}
	if got := len(encode(1, nil)); got != minFileSize || minFileSize != 46 {
		t.Fatalf("empty snapshot is %d bytes, minFileSize %d, want 46", got, minFileSize)
	}
}

func TestCorrupt(t *testing.T) {
	t.Parallel()
	good := encode(smallSeq, smallRecords())
	trailer := good[len(good)-trailerSize:]
	mod := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	tests := []struct {
		name    string
		data    []byte
		fileSeq uint64 // seq in the file name
		off     int64  // expected offset in the error
		msg     string // expected fragment of the error
	}{
		{"empty file", nil, smallSeq, 0, "shorter than an empty snapshot"},
		{"shorter than a header", good[:10], smallSeq, 10, "shorter than an empty snapshot"},
		{"trailing byte", append(bytes.Clone(good), 0), smallSeq, 77, "after the trailer"},
		{"trailing zeros", append(bytes.Clone(good), make([]byte, 4096)...), smallSeq, 77, "after the trailer"},
		{"two snapshots back to back", concat(good, good), smallSeq, 77, "after the trailer"},
		{"name seq differs from header", good, smallSeq + 1, 9, "does not match file name seq"},
		{"bad magic", mod(func(b []byte) { b[0] = 'X' }), smallSeq, 0, "bad magic"},
		{"header checksum", mod(func(b []byte) { b[17] ^= 1 }), smallSeq, 17, "header checksum"},
		{"header seq without checksum fix", mod(func(b []byte) { b[9] ^= 1 }), smallSeq, 17, "header checksum"},
		{"unknown version", mod(func(b []byte) {
			b[8] = 2
			binary.LittleEndian.PutUint32(b[17:], crc32.Checksum(b[:17], castagnoli))
		}), smallSeq, 8, "unsupported format version 2"},
		{"record data", mod(func(b []byte) { b[40] ^= 0x10 }), smallSeq, 32, "record 2 checksum"},
		{"record checksum", mod(func(b []byte) { b[34] ^= 0x80 }), smallSeq, 32, "record 2 checksum"},
		{"record length shorter", mod(func(b []byte) { b[26] = 0 }), smallSeq, 26, "record 1 checksum"},
		{"length claims 4 GiB", concat(header(1), binary.AppendUvarint(nil, 4<<30), make([]byte, 64)), 1, 21, "exceeds MaxRecord"},
		{"length past end of file", concat(header(1), binary.AppendUvarint(nil, 60<<20), make([]byte, 64)), 1, 21, "runs past the end"},
		{"length just past end of file", concat(header(1), recordBytes([]byte{30}, make([]byte, 30)), trailer[:trailerSize-1]), 1, 21, "runs past the end"},
		{"length varint overflows", concat(header(1), bytes.Repeat([]byte{0xff}, 10), make([]byte, 64)), 1, 21, "overflows"},
		{"length varint not minimal", concat(header(1), recordBytes([]byte{0x80, 0x00}, nil),
			appendTrailer(nil, 1, 0, 1)), 1, 21, "not minimally encoded"},
		{"marker not minimal", concat(header(1), []byte{0xff, 0xff, 0xff, 0xff, 0x8f, 0x00},
			appendTrailer(nil, 0, 0, 1)[trailerMarkerSize:]), 1, 21, "not minimally encoded"},
		{"record dropped", concat(encode(smallSeq, smallRecords()[:2])[:32], trailer), smallSeq, 37, "trailer says 3 records, file holds 2"},
		{"records reordered", concat(encode(smallSeq, [][]byte{[]byte("a"), {}, []byte("hello, snapshot")})[:52], trailer),
			smallSeq, 65, "stream checksum"},
		{"trailer count", mod(func(b []byte) { b[57]++ }), smallSeq, 57, "trailer says 4 records"},
		{"trailer stream checksum", mod(func(b []byte) { b[66] ^= 4 }), smallSeq, 65, "stream checksum"},
		{"trailer seq", mod(func(b []byte) { b[69]++ }), smallSeq, 69, "trailer seq 43"},
		{"marker missing", concat(good[:52], good[57:], []byte{0, 0, 0, 0, 0}), smallSeq, 52, ""},
		{"cut inside a big record", encode(3, [][]byte{bigRecord(2 << 20)})[:1<<20], 3, 21, "runs past the end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.fileSeq, tt.data)
			n := 0
			_, rn, err := Read(path, func([]byte) error { n++; return nil })
			mustCorrupt(t, path, err)
			if want := fmt.Sprintf(" at offset %d:", tt.off); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q, want offset %d", err, tt.off)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q, want it to mention %q", err, tt.msg)
			}
			if rn != 0 {
				t.Errorf("Read returned n=%d with an error", rn)
			}
		})
	}
}

func TestOtherNamesAreNotCheckedAgainstSeq(t *testing.T) {
	t.Parallel()
	// Copies under inspection keep their meaning under any name.
	path := filepath.Join(t.TempDir(), "copy-of-snapshot.bin")
	if err := os.WriteFile(path, encode(smallSeq, smallRecords()), 0o644); err != nil {
		t.Fatal(err)
	}
	if seq, n, err := Verify(path); err != nil || seq != smallSeq || n != 3 {
		t.Fatalf("Verify = %d, %d, %v", seq, n, err)
	}
}

func TestTruncatedAtEveryOffset(t *testing.T) {
	t.Parallel()
	files := []struct {
		seq  uint64
		recs [][]byte
	}{
		{smallSeq, smallRecords()},
		{7, nil},
		{1000, makeRecords(20, 200)}, // multi-byte length varints
	}
	for _, f := range files {
		data := encode(f.seq, f.recs)
		dir := t.TempDir()
		path := snapPath(dir, f.seq)
		for cut := 0; cut < len(data); cut++ {
			replaceFile(t, path, data[:cut])
			seq, n, err := Read(path, nil)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("seq %d cut at %d of %d: Read = %d, %d, %v; want ErrCorrupt", f.seq, cut, len(data), seq, n, err)
			}
		}
	}
}

func TestBitFlipAtEveryBit(t *testing.T) {
	t.Parallel()
	want := smallRecords()
	data := encode(smallSeq, want)
	dir := t.TempDir()
	path := snapPath(dir, smallSeq)
	undetected := 0
	for i := 0; i < len(data)*8; i++ {
		flipped := bytes.Clone(data)
		flipped[i/8] ^= 1 << (i % 8)
		replaceFile(t, path, flipped)
		seq, got, err := readAll(path)
		if errors.Is(err, ErrCorrupt) {
			continue
		}
		if err != nil {
			t.Fatalf("bit %d: unexpected error %v", i, err)
		}
		// Only acceptable if the flip cannot have mattered.
		if seq != smallSeq || !equalRecords(got, want) {
			t.Fatalf("bit %d: flip read back as seq %d with %d different records", i, seq, len(got))
		}
		undetected++
	}
	if undetected > 0 {
		t.Errorf("%d bit flips went undetected (records identical)", undetected)
	}
}

func TestOversizedLengthDoesNotAllocate(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	tests := []struct {
		name   string
		length uint64
	}{
		{"4 GiB", 4 << 30},
		{"just over MaxRecord", MaxRecord + 1},
		{"MaxRecord in a small file", MaxRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, 1, concat(header(1), binary.AppendUvarint(nil, tt.length), make([]byte, 100)))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _, err := Read(path, nil)
			runtime.ReadMemStats(&after)
			mustCorrupt(t, path, err)
			if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
				t.Errorf("Read allocated %d bytes for a %d-byte file", got, minFileSize+100)
			}
		})
	}
}
