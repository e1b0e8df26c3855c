package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
)

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestSnapshotsReuseTheirBuffers: snapshots written, encoded, read and
// decoded in a row take their buffers of writeBufSize and maxReadBuf from
// the ones before, not allocating them anew each time; the records still
// read back whole.
func TestSnapshotsReuseTheirBuffers(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what it is given at random")
	}
	const dir, n = "/snap", 16
	recs := makeRecords(20, 50)
	big := make([][]byte, 12) // a snapshot larger than maxReadBuf: read with a buffer of it
	for i := range big {
		big[i] = bytes.Repeat([]byte{byte(i)}, 100_000)
	}
	m := vfs.NewMem()
	if err := m.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(seq uint64, recs [][]byte) Info {
		t.Helper()
		info, err := Write(dir, seq, Options{FS: m}, fillWith(recs))
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	read := func(info Info, want [][]byte) {
		t.Helper()
		var got [][]byte
		if _, _, err := ReadFS(m, info.Path, func(rec []byte) error { got = append(got, bytes.Clone(rec)); return nil }); err != nil || !equalRecords(got, want) {
			t.Fatalf("read back %d records of %d: %v", len(got), len(want), err)
		}
	}
	small, large := write(1, recs), write(2, big)
	read(large, big)
	var stream bytes.Buffer
	if _, err := Encode(&stream, 3, fillWith(recs)); err != nil {
		t.Fatal(err)
	}
	encoded := stream.Bytes()

	if got := allocated(func() {
		for i := range n {
			write(uint64(10+i), recs)
		}
	}); got > n*writeBufSize/4 {
		t.Errorf("%d Writes of a small snapshot allocated %d bytes, a buffer is %d", n, got, writeBufSize)
	}
	if got := allocated(func() {
		for range n {
			if _, err := Encode(io.Discard, 3, fillWith(recs)); err != nil {
				t.Fatal(err)
			}
		}
	}); got > n*writeBufSize/4 {
		t.Errorf("%d Encodes allocated %d bytes, a buffer is %d", n, got, writeBufSize)
	}
	if got := allocated(func() {
		for range n {
			if _, _, err := ReadFS(m, large.Path, nil); err != nil {
				t.Fatal(err)
			}
			read(small, recs)
		}
	}); got > n*maxReadBuf/4 {
		t.Errorf("%d Reads of a large snapshot and a small one allocated %d bytes, a buffer is %d", n, got, maxReadBuf)
	}
	if got := allocated(func() {
		for range n {
			if _, _, err := Decode(bytes.NewReader(encoded), nil); err != nil {
				t.Fatal(err)
			}
		}
	}); got > n*maxReadBuf/4 {
		t.Errorf("%d Decodes allocated %d bytes, a buffer is %d", n, got, maxReadBuf)
	}
}

// TestBuffersOfTheCallerAreNotKept: a *bufio.Reader or *bufio.Writer a
// caller gives Decode or Encode, as large as the buffers kept for the
// next snapshot, stays the caller's: it is not kept and handed to the next
// snapshot read or written.
func TestBuffersOfTheCallerAreNotKept(t *testing.T) {
	// Not parallel: it empties the pool of readers, so that Decode finds
	// none there.
	recs := makeRecords(20, 50)
	var stream bytes.Buffer
	bw := bufio.NewWriterSize(&stream, writeBufSize)
	if _, err := Encode(bw, 3, fillWith(recs)); err != nil {
		t.Fatal(err)
	}
	if _, err := bw.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	encoded, ok := bytes.CutSuffix(stream.Bytes(), []byte("after"))
	if !ok {
		t.Fatalf("the caller's writer lost what it wrote after Encode: %q", stream.Bytes()[max(stream.Len()-10, 0):])
	}
	for readers.Get() != nil {
	}
	br := bufio.NewReaderSize(bytes.NewReader(encoded), maxReadBuf)
	if _, _, err := Decode(br, nil); err != nil {
		t.Fatal(err)
	}
	// The next snapshots take what was kept: not the caller's.
	for range 4 {
		if _, _, err := Decode(bytes.NewReader(encoded), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := Encode(io.Discard, 3, fillWith(recs)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("the caller's reader after Decode read it to its end: %d bytes, %v", n, err)
	}
	stream.Reset()
	bw.WriteString("still mine")
	if err := bw.Flush(); err != nil || stream.String() != "still mine" {
		t.Fatalf("the caller's writer after Encode: %q, %v", stream.String(), err)
	}
}
