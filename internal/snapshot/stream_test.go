package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"testing"
)

// TestEncodeIsTheFileFormat: Encode writes the bytes Write puts in a file,
// and Decode reads back the records, seq and count, also of a record too
// large for the read buffer.
func TestEncodeIsTheFileFormat(t *testing.T) {
	t.Parallel()
	recs := append(makeRecords(50, 300), bigRecord(3<<20), nil, []byte("x"))
	var buf bytes.Buffer
	n, err := Encode(&buf, 9, fillWith(recs))
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("Encode = %d, %v (wrote %d)", n, err, buf.Len())
	}
	info := writeSnap(t, t.TempDir(), 9, recs)
	file, err := os.ReadFile(info.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), file) {
		t.Fatal("Encode and Write give different bytes")
	}
	var got [][]byte
	seq, count, err := Decode(bytes.NewReader(file), func(rec []byte) error {
		got = append(got, bytes.Clone(rec))
		return nil
	})
	if err != nil || seq != 9 || count != len(recs) || !equalRecords(got, recs) {
		t.Fatalf("Decode = seq %d, %d records, %v", seq, count, err)
	}
	stop := errors.New("stop")
	if _, _, err := Decode(bytes.NewReader(file), func([]byte) error { return stop }); err != stop {
		t.Fatalf("an error of fn is returned as is: %v", err)
	}
	failing := errWriter{errors.New("disk full")}
	if _, err := Encode(failing, 9, fillWith(recs)); !errors.Is(err, failing.err) {
		t.Fatalf("Encode to a failing writer: %v", err)
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

// TestDecodeRefusesDamage: a stream cut at any byte, with any bit flipped,
// or with a byte after the trailer is corrupt, never a shorter snapshot.
func TestDecodeRefusesDamage(t *testing.T) {
	t.Parallel()
	data := encode(smallSeq, smallRecords())
	for n := range len(data) {
		if _, _, err := Decode(bytes.NewReader(data[:n]), nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d: %v", n, len(data), err)
		}
	}
	for i := range len(data) * 8 {
		b := bytes.Clone(data)
		b[i/8] ^= 1 << (i % 8)
		if _, _, err := Decode(bytes.NewReader(b), nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	if _, _, err := Decode(bytes.NewReader(append(bytes.Clone(data), 0)), nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a byte after the trailer: %v", err)
	}
	failing := io.MultiReader(bytes.NewReader(data[:30]), errReader{})
	if _, _, err := Decode(failing, nil); err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("a read error is not corruption: %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// TestDecodeDamagedLengthDoesNotAllocate: a length field claiming up to
// MaxRecord in a short stream allocates about what the stream holds.
func TestDecodeDamagedLengthDoesNotAllocate(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	data := concat(header(1), binary.AppendUvarint(nil, MaxRecord), make([]byte, 3<<20))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := Decode(bytes.NewReader(data), nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Decode = %v, want ErrCorrupt", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 12<<20 {
		t.Fatalf("Decode allocated %d bytes for a %d-byte stream claiming a %d-byte record", got, len(data), MaxRecord)
	}
}
