package wal

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"
)

// sizedPayload is record seq's data for the read tests: mostly small, now
// and then larger than a reader's buffer, so that skipping an entry has to
// seek past it.
func sizedPayload(seq uint64) []byte {
	p := payload(seq)
	if seq%37 == 0 {
		p = bytes.Repeat(p, replayBufSize/len(p)+3)
	}
	return p
}

// TestReadAnyOrder reads every record in order, backwards and at random,
// from segments the Log wrote (indexed as written), found on Open (indexed
// on first Read), rewritten by truncations, and from a tail that grows
// between reads.
func TestReadAnyOrder(t *testing.T) {
	t.Parallel()
	const n = 700
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentSize: 64 << 10})
	appendData := func(k int) {
		t.Helper()
		for range k {
			seq := l.LastSeq() + 1
			if err := l.Append(seq, sizedPayload(seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(what string) {
		t.Helper()
		first, last := l.FirstSeq(), l.LastSeq()
		var order []uint64
		for seq := first; seq <= last; seq++ {
			order = append(order, seq)
		}
		for seq := last; seq >= first && seq > 0; seq-- {
			order = append(order, seq)
		}
		for range 300 {
			order = append(order, first+rng.Uint64N(last-first+1))
		}
		for _, seq := range order {
			got, err := l.Read(seq)
			if err != nil {
				t.Fatalf("%s: Read(%d): %v", what, seq, err)
			}
			if !bytes.Equal(got, sizedPayload(seq)) {
				t.Fatalf("%s: Read(%d) returned %d bytes, not its record", what, seq, len(got))
			}
		}
	}
	appendData(n)
	check("written")
	if len(segNames(t, dir)) < 4 {
		t.Fatalf("only %d segments", len(segNames(t, dir)))
	}
	for range 50 { // the tail grows between reads
		appendData(1 + rng.IntN(5))
		seq := l.LastSeq() - rng.Uint64N(8)
		if got, err := l.Read(seq); err != nil || !bytes.Equal(got, sizedPayload(seq)) {
			t.Fatalf("Read(%d) of a growing tail: %d bytes, %v", seq, len(got), err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, Options{SegmentSize: 64 << 10})
	defer l.Close()
	check("reopened")
	if err := l.TruncateFront(l.FirstSeq() + 150); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateBack(l.LastSeq() - 100); err != nil {
		t.Fatal(err)
	}
	check("truncated")
	appendData(200)
	check("written after truncation")
}

// TestReplayAfterIndexing replays from every record of a log whose segments
// carry indexes (written by the Log) and of the same log reopened (no
// indexes until read).
func TestReplayAfterIndexing(t *testing.T) {
	t.Parallel()
	const n = 300
	dir := newLog(t, 2048, n)
	for _, reopen := range []bool{false, true} {
		l := openLog(t, dir, Options{SegmentSize: 2048})
		if !reopen {
			// Reading indexes every segment; Replay then starts at marks.
			readAll(t, l, 1, n)
		}
		for from := uint64(1); from <= n+1; from += 7 {
			wantRecords(t, replayAll(t, l, from), from, n)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogKeepsNoSegmentInMemory writes several segments' worth of records
// and checks that the open Log holds on to far less than one segment: only
// its buffers and an index, not a copy of what it wrote.
func TestLogKeepsNoSegmentInMemory(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	const segSize = 4 << 20
	l := openLog(t, t.TempDir(), Options{SegmentSize: segSize})
	defer l.Close()
	data := bytes.Repeat([]byte("x"), 200)
	write := func(bytes int) {
		for range bytes / len(data) {
			if err := l.Append(l.LastSeq()+1, data); err != nil {
				t.Fatal(err)
			}
			if l.LastSeq()%100 == 0 {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := l.Sync(l.LastSeq()); err != nil {
			t.Fatal(err)
		}
	}
	write(1 << 20) // warm the buffers up
	before := liveHeap()
	write(3 * segSize / 2) // a full segment and half the next
	grew := int64(liveHeap()) - int64(before)
	runtime.KeepAlive(l)
	if grew > segSize/8 {
		t.Fatalf("the open Log grew the live heap by %d bytes writing %d", grew, 3*segSize/2)
	}
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkRead reads records in order and at random from a log of several
// segments.
func BenchmarkRead(b *testing.B) {
	const n = 20000
	l := openLog(b, b.TempDir(), Options{SegmentSize: 1 << 20})
	defer l.Close()
	data := bytes.Repeat([]byte("x"), 128)
	for range n {
		if err := l.Append(l.LastSeq()+1, data); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	b.Run("in order", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if _, err := l.Read(uint64(i%n) + 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("random", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(1, 2))
		b.ReportAllocs()
		for range b.N {
			if _, err := l.Read(rng.Uint64N(n) + 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReplay replays a log of several segments.
func BenchmarkReplay(b *testing.B) {
	const n = 20000
	l := openLog(b, b.TempDir(), Options{SegmentSize: 1 << 20})
	defer l.Close()
	data := bytes.Repeat([]byte("x"), 128)
	for range n {
		if err := l.Append(l.LastSeq()+1, data); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(n * (len(data) + headerSize + 2)))
	for range b.N {
		if err := l.Replay(0, func(uint64, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
