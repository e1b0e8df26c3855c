package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead feeds arbitrary bytes to Read as a snapshot file. Read must not
// panic, and must either report ErrCorrupt or return records that encode back
// to exactly the same bytes: no damaged file may pass for a valid one.
func FuzzRead(f *testing.F) {
	small := encode(smallSeq, smallRecords())
	f.Add([]byte{})
	f.Add([]byte(magic))
	f.Add(encode(0, nil))
	f.Add(encode(1, [][]byte{{}}))
	f.Add(small)
	f.Add(small[:len(small)-1])
	f.Add(small[:52])
	f.Add(append(bytes.Clone(small), 0))
	f.Add(encode(1<<40, makeRecords(40, 300)))
	f.Add(concat(header(1), binary.AppendUvarint(nil, 4<<30), make([]byte, 64)))
	f.Add(concat(header(1), recordBytes([]byte{0x80, 0x00}, nil), appendTrailer(nil, 1, 0, 1)))
	f.Add(concat(header(1), []byte{0xff, 0xff, 0xff, 0xff, 0x8f, 0x00}, appendTrailer(nil, 0, 0, 1)[trailerMarkerSize:]))

	// One directory for the whole run: a fresh one per input would cost more
	// than the read. Inputs run one at a time within a process.
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		// Name the file after the seq in its header when there is one, so the
		// fuzzer gets past the name check and into the records.
		name := "fuzz.snap"
		if len(data) >= headerSize {
			name = fileName(binary.LittleEndian.Uint64(data[len(magic)+1:]), snapExt)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		recs := [][]byte{}
		seq, n, err := Read(path, func(rec []byte) error {
			recs = append(recs, bytes.Clone(rec))
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if n != len(recs) {
			t.Fatalf("Read returned n=%d, delivered %d records", n, len(recs))
		}
		if again := encode(seq, recs); !bytes.Equal(again, data) {
			t.Fatalf("accepted file does not re-encode to itself:\n got %x\nwant %x", again, data)
		}
	})
}
