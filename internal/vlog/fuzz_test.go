package vlog

import (
	"bytes"
	"testing"
)

// seedFiles are files for the fuzz corpus: sound, torn, padded, damaged.
func seedFiles() [][]byte {
	var sound []byte
	for i := uint64(1); i <= 5; i++ {
		sound = appendRecord(sound, i, kindOf(i), value(i))
	}
	flipValue := bytes.Clone(sound)
	flipValue[30] ^= 1
	flipHeader := bytes.Clone(sound)
	flipHeader[59+12] ^= 0x10
	empty := appendRecord(nil, 7, Payload, nil)
	return [][]byte{
		nil,
		{0},
		make([]byte, HeaderSize),
		empty,
		empty[:HeaderSize-1],
		sound,
		sound[:len(sound)-1],
		sound[:100],
		append(bytes.Clone(sound), make([]byte, 64)...),
		append(bytes.Clone(sound), sound[:30]...),
		flipValue,
		flipHeader,
		append(bytes.Repeat([]byte{0xff}, 10), sound...),
		[]byte("not a value log at all, nowhere near one, no"),
	}
}

// FuzzScan feeds arbitrary bytes to the record decoder as a file: it must
// not panic; its events must tile the file in order; every intact record
// must re-encode to exactly its bytes; the torn tail, if any, is last.
func FuzzScan(f *testing.F) {
	for _, b := range seedFiles() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<16 {
			return
		}
		var at int64
		torn := false
		err := scanFile(bytes.NewReader(b), int64(len(b)), func(ev event) error {
			if torn {
				t.Fatalf("event at %d after the torn tail", ev.off)
			}
			if ev.off != at || ev.size <= 0 || ev.off+ev.size > int64(len(b)) {
				t.Fatalf("event at %d of %d bytes, want one at %d in %d bytes", ev.off, ev.size, at, len(b))
			}
			at = ev.off + ev.size
			torn = ev.torn
			if ev.err != nil {
				return nil
			}
			rec := b[ev.off:at]
			if ev.size != HeaderSize+int64(ev.h.len) {
				t.Fatalf("record at %d: %d bytes for a value of %d", ev.off, ev.size, ev.h.len)
			}
			if re := appendRecord(nil, ev.h.owner, ev.h.kind, rec[HeaderSize:]); !bytes.Equal(re, rec) {
				t.Fatalf("record at %d does not re-encode to its bytes", ev.off)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if at != int64(len(b)) {
			t.Fatalf("events end at %d of %d", at, len(b))
		}
	})
}

// TestSeedsDecode: the sound seed decodes to its records, the damaged
// ones report damage.
func TestSeedsDecode(t *testing.T) {
	t.Parallel()
	count := func(b []byte) (intact, damaged int) {
		scanFile(bytes.NewReader(b), int64(len(b)), func(ev event) error {
			if ev.err == nil {
				intact++
			} else {
				damaged++
			}
			return nil
		})
		return
	}
	s := seedFiles()
	for i, want := range map[int][2]int{5: {5, 0}, 6: {4, 1}, 10: {4, 1}, 11: {4, 1}, 12: {5, 1}, 13: {0, 1}} {
		if in, dm := count(s[i]); in != want[0] || dm != want[1] {
			t.Errorf("seed %d: %d intact, %d damaged, want %v", i, in, dm, want)
		}
	}
}

// FuzzHeader: validHeader agrees with decodeHeader on every input.
func FuzzHeader(f *testing.F) {
	for _, b := range seedFiles() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeHeader(b)
		if (err == nil) != validHeader(b) {
			t.Fatalf("decodeHeader: %v, validHeader: %v", err, validHeader(b))
		}
	})
}
