package wal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	const n = 120
	tests := []struct {
		name    string
		segSize int
		write   func(t *testing.T, l *Log, seq uint64) // after each Append
	}{
		{"sync each", 0, func(t *testing.T, l *Log, seq uint64) {
			if err := l.Sync(seq); err != nil {
				t.Fatal(err)
			}
		}},
		{"flush each", 0, func(t *testing.T, l *Log, seq uint64) {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}},
		{"sync every 7", 0, func(t *testing.T, l *Log, seq uint64) {
			if seq%7 == 0 {
				if err := l.Sync(seq); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"pending until close", 0, func(*testing.T, *Log, uint64) {}},
		{"small segments", 300, func(t *testing.T, l *Log, seq uint64) {
			if seq%5 == 0 {
				if err := l.Sync(seq); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, Options{SegmentSize: tt.segSize})
			if l.FirstSeq() != 1 || l.LastSeq() != 0 {
				t.Fatalf("new log holds %d..%d, want 1..0", l.FirstSeq(), l.LastSeq())
			}
			for seq := uint64(1); seq <= n; seq++ {
				if err := l.Append(seq, payload(seq)); err != nil {
					t.Fatal(err)
				}
				tt.write(t, l, seq)
			}
			wantRecords(t, replayAll(t, l, 0), 1, n)
			wantRecords(t, replayAll(t, l, 50), 50, n)
			wantRecords(t, replayAll(t, l, n+1), n+1, n)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			verifySegments(t, dir)
			reopenAndCheck(t, dir, 1, n)
		})
	}
}

func TestReopenContinuesSequence(t *testing.T) {
	t.Parallel()
	dir := newLog(t, 0, 10)
	l := openLog(t, dir, Options{})
	if l.FirstSeq() != 1 || l.LastSeq() != 10 {
		t.Fatalf("reopened log holds %d..%d, want 1..10", l.FirstSeq(), l.LastSeq())
	}
	isErr(t, l.Append(10, payload(10)), ErrSequence)
	appendN(t, l, 5)
	if err := l.Sync(15); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	reopenAndCheck(t, dir, 1, 15)
}

func TestAppendOutOfSequence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		have int // records already in the log
		seq  uint64
	}{
		{"zero on new log", 0, 0},
		{"two on new log", 0, 2},
		{"repeat last", 5, 5},
		{"skip one", 5, 7},
		{"go back", 5, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openLog(t, t.TempDir(), Options{})
			defer l.Close()
			appendN(t, l, tt.have)
			isErr(t, l.Append(tt.seq, []byte("x")), ErrSequence)
			if l.LastSeq() != uint64(tt.have) {
				t.Fatalf("LastSeq %d after refused Append, want %d", l.LastSeq(), tt.have)
			}
			appendN(t, l, 1) // the log is still usable
		})
	}
}

func TestSyncBeyondLastAppended(t *testing.T) {
	t.Parallel()
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	appendN(t, l, 3)
	isErr(t, l.Sync(4), ErrSequence)
	if err := l.Sync(3); err != nil {
		t.Fatal(err)
	}
}

func TestSyncOfDurableRecordDoesNoIO(t *testing.T) {
	t.Parallel()
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	appendN(t, l, 10)
	if err := l.Sync(10); err != nil {
		t.Fatal(err)
	}
	before := l.Stats()
	for _, seq := range []uint64{0, 1, 5, 10} {
		if err := l.Sync(seq); err != nil {
			t.Fatal(err)
		}
	}
	if after := l.Stats(); after != before {
		t.Fatalf("Sync of durable records changed stats: %+v -> %+v", before, after)
	}
}

func TestFlushWritesWithoutSync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	defer l.Close()
	before := l.Stats()
	appendN(t, l, 20)
	if fi, _ := os.Stat(lastSeg(t, dir)); fi.Size() != 0 {
		t.Fatalf("Append wrote %d bytes; it must only buffer", fi.Size())
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	after := l.Stats()
	if after.Flushes != before.Flushes+1 || after.Syncs != before.Syncs || after.Appends != 20 {
		t.Fatalf("stats after one Flush of 20 records: %+v (before %+v)", after, before)
	}
	checkTail(t, l)
	l.wmu.Lock()
	size := l.tailSize
	l.wmu.Unlock()
	if uint64(size) != after.BytesWritten {
		t.Fatalf("segment holds %d bytes of entries, BytesWritten %d", size, after.BytesWritten)
	}
	if err := l.Flush(); err != nil { // nothing pending: no write
		t.Fatal(err)
	}
	if got := l.Stats().Flushes; got != after.Flushes {
		t.Fatalf("empty Flush wrote: Flushes %d -> %d", after.Flushes, got)
	}
}

func TestAppendDoesNotAllocate(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	data := bytes.Repeat([]byte("x"), 100)
	// Warm both batch buffers up past what the measurement appends.
	for range 2 {
		for range 1200 {
			if err := l.Append(l.LastSeq()+1, data); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := l.Append(l.LastSeq()+1, data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Append allocates %.1f times per call", allocs)
	}
}

// TestGroupCommit runs the engine's pattern: append under a mutex, then wait
// for durability outside it. The first fsync is held until every committer
// has appended a record, so those pile up behind it and the next fsync
// must cover them all: a log that fsyncs once per Sync fails, whatever the
// machine's speed.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	const goroutines, perG = 8, 150
	dir := t.TempDir()
	var firsts atomic.Int32 // committers that have appended their first record
	allIn := make(chan struct{})
	var held sync.Once
	l := openLog(t, dir, Options{Failpoint: func(name string) error {
		if name == "sync" {
			held.Do(func() { <-allIn })
		}
		return nil
	}})
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, goroutines+1)
	kick := make(chan struct{}, 1)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				mu.Lock()
				seq := l.LastSeq() + 1
				err := l.Append(seq, payload(seq))
				mu.Unlock()
				if i == 0 && firsts.Add(1) == goroutines {
					close(allIn)
				}
				if err == nil {
					err = l.Sync(seq)
				}
				if err != nil {
					errs <- err
					return
				}
				select { // ask for a flush alongside
				case kick <- struct{}{}:
				default:
				}
			}
		}()
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // readers and flushers alongside the commits
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			case <-kick:
			}
			_ = l.Stats()
			if err := l.Flush(); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const n = goroutines * perG
	st := l.Stats()
	t.Logf("%d commits: %+v", n, st)
	if st.Appends != n {
		t.Fatalf("Appends %d, want %d", st.Appends, n)
	}
	if st.Syncs >= n {
		t.Fatalf("%d fsyncs for %d records: no group commit", st.Syncs, n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	reopenAndCheck(t, dir, 1, n)
}

// TestFailureReleasesWaiters: an fsync that fails while every committer
// waits in Sync releases them all with ErrFailed, and no fsync follows. The
// failing fsync is held until all of them are inside Sync.
func TestFailureReleasesWaiters(t *testing.T) {
	t.Parallel()
	const goroutines = 8
	var fsyncs atomic.Int32
	var gate struct {
		sync.Mutex
		in     int  // committers inside Sync
		armed  bool // the failing fsync waits for all of them
		opened bool
		all    chan struct{}
	}
	gate.all = make(chan struct{})
	open := func() { // with gate held
		if gate.armed && gate.in == goroutines && !gate.opened {
			gate.opened = true
			close(gate.all)
		}
	}
	l := openLog(t, t.TempDir(), Options{Failpoint: func(name string) error {
		if name == "sync" && fsyncs.Add(1) == 4 {
			gate.Lock()
			gate.armed = true
			open()
			gate.Unlock()
			<-gate.all
			return errInjected
		}
		return nil
	}})
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				seq := l.LastSeq() + 1
				err := l.Append(seq, payload(seq))
				mu.Unlock()
				if err == nil {
					gate.Lock()
					gate.in++
					open()
					gate.Unlock()
					err = l.Sync(seq)
					gate.Lock()
					gate.in--
					gate.Unlock()
				}
				if err != nil {
					if !errors.Is(err, ErrFailed) {
						t.Errorf("got %v, want ErrFailed", err)
					}
					failed.Add(1)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of %d committers returned; the others hang in Sync", failed.Load(), goroutines)
	}
	if failed.Load() != goroutines {
		t.Fatalf("%d of %d goroutines saw the failure", failed.Load(), goroutines)
	}
	if n := fsyncs.Load(); n != 4 {
		t.Fatalf("%d fsyncs attempted; none may follow the failed one", n)
	}
	isErr(t, l.Close(), ErrFailed)
}

func TestTruncateFront(t *testing.T) {
	t.Parallel()
	const n = 40
	// segStart returns the first seq of segment i (negative: from the end).
	segStart := func(dir string, i int) uint64 {
		names := segNames(t, dir)
		if i < 0 {
			i += len(names)
		}
		seq, _ := strconv.ParseUint(names[i], 10, 64)
		return seq
	}
	tests := []struct {
		name      string
		seq       func(dir string) uint64
		wantFirst func(dir string) uint64 // nil: seq
		wantErr   error
	}{
		{"zero", func(string) uint64 { return 0 }, func(string) uint64 { return 1 }, nil},
		{"at first", func(string) uint64 { return 1 }, nil, nil},
		{"inside first segment", func(string) uint64 { return 3 }, nil, nil},
		{"at a segment start", func(dir string) uint64 { return segStart(dir, 1) }, nil, nil},
		{"inside a middle segment", func(dir string) uint64 { return segStart(dir, 1) + 1 }, nil, nil},
		{"at tail start", func(dir string) uint64 { return segStart(dir, -1) }, nil, nil},
		{"last record", func(string) uint64 { return n }, nil, nil},
		{"everything", func(string) uint64 { return n + 1 }, nil, nil},
		{"beyond last", func(string) uint64 { return n + 2 }, func(string) uint64 { return 1 }, ErrSequence},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newLog(t, 256, n)
			if len(segNames(t, dir)) < 3 {
				t.Fatalf("want at least 3 segments, have %v", segNames(t, dir))
			}
			seq := tt.seq(dir)
			first := seq
			if tt.wantFirst != nil {
				first = tt.wantFirst(dir)
			}
			l := openLog(t, dir, Options{SegmentSize: 256})
			err := l.TruncateFront(seq)
			if tt.wantErr != nil {
				isErr(t, err, tt.wantErr)
			} else if err != nil {
				t.Fatal(err)
			}
			checkTail(t, l)
			if l.FirstSeq() != first || l.LastSeq() != n {
				t.Fatalf("after TruncateFront(%d): %d..%d, want %d..%d", seq, l.FirstSeq(), l.LastSeq(), first, n)
			}
			wantRecords(t, replayAll(t, l, 0), first, n)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if r, err := Check(dir); err != nil || r.FirstSeq != first || r.Records != n-first+1 {
				t.Fatalf("Check after truncation: %+v, %v", r, err)
			}
			reopenAndCheck(t, dir, first, n)

			// The position survives, even for an emptied log.
			l = openLog(t, dir, Options{SegmentSize: 256})
			isErr(t, l.Append(n+2, payload(n+2)), ErrSequence)
			appendN(t, l, 1)
			if err := l.Sync(n + 1); err != nil {
				t.Fatal(err)
			}
			checkTail(t, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			reopenAndCheck(t, dir, first, n+1)
		})
	}
}

func TestTruncateFrontPendingRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	appendN(t, l, 10)
	if err := l.Sync(10); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 5) // not yet written
	if err := l.TruncateFront(13); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, replayAll(t, l, 0), 13, 15)
	if err := l.TruncateFront(16); err != nil {
		t.Fatal(err)
	}
	if l.FirstSeq() != 16 || l.LastSeq() != 15 {
		t.Fatalf("emptied log holds %d..%d, want 16..15", l.FirstSeq(), l.LastSeq())
	}
	if err := l.TruncateFront(14); err != nil { // already gone: nothing to do
		t.Fatal(err)
	}
	appendN(t, l, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	reopenAndCheck(t, dir, 16, 17)
}

// TestSegmentRollover drives tiny segments through random batch sizes and
// checks after every write that the Log tracked its tail segment
// and fsynced the directory whenever a segment appeared.
func TestSegmentRollover(t *testing.T) {
	t.Parallel()
	const segSize = 300
	dir := t.TempDir()
	var dirSyncs atomic.Int32
	opts := Options{SegmentSize: segSize, Failpoint: func(name string) error {
		if name == "segment.create" {
			dirSyncs.Add(1)
		}
		return nil
	}}
	l := openLog(t, dir, opts)
	rng := rand.New(rand.NewPCG(1, 2))
	write := func(sync bool) {
		t.Helper()
		segs, syncs := len(segNames(t, dir)), dirSyncs.Load()
		var err error
		if sync {
			err = l.Sync(l.LastSeq())
		} else {
			err = l.Flush()
		}
		if err != nil {
			t.Fatal(err)
		}
		checkTail(t, l)
		grew := len(segNames(t, dir)) > segs
		if synced := dirSyncs.Load() > syncs; grew != synced {
			t.Fatalf("segments %d -> %d, directory synced: %v", segs, len(segNames(t, dir)), synced)
		}
	}
	for round := range 60 {
		for range rng.IntN(12) + 1 {
			seq := l.LastSeq() + 1
			data := payload(seq)
			if rng.IntN(10) == 0 {
				data = bytes.Repeat(data, 2*segSize/len(data)) // one record over a whole segment
			}
			if err := l.Append(seq, data); err != nil {
				t.Fatal(err)
			}
		}
		write(round%3 == 0)
		if round == 30 {
			// Reopen with smaller segments: the tail is now over the limit,
			// which the Log handles before the next batch.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			opts.SegmentSize = 100
			l = openLog(t, dir, opts)
			checkTail(t, l)
		}
		if round == 45 {
			if err := l.TruncateFront(l.LastSeq() - 3); err != nil {
				t.Fatal(err)
			}
			checkTail(t, l)
		}
	}
	if n := len(segNames(t, dir)); n < 10 {
		t.Fatalf("only %d segments", n)
	}
	first, last := l.FirstSeq(), l.LastSeq()
	var prev uint64
	err := l.Replay(0, func(seq uint64, data []byte) error {
		if prev != 0 && seq != prev+1 {
			t.Fatalf("replay jumped from %d to %d", prev, seq)
		}
		prev = seq
		if !bytes.HasPrefix(data, payload(seq)) {
			t.Fatalf("record %d: wrong data", seq)
		}
		return nil
	})
	if err != nil || prev != last {
		t.Fatalf("replay ended at %d, want %d: %v", prev, last, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	verifySegments(t, dir)
	l = openLog(t, dir, Options{})
	defer l.Close()
	if l.FirstSeq() != first || l.LastSeq() != last {
		t.Fatalf("reopened log holds %d..%d, want %d..%d", l.FirstSeq(), l.LastSeq(), first, last)
	}
	// Replay from the middle of a middle segment.
	names := segNames(t, dir)
	mid, _ := strconv.ParseUint(names[len(names)/2], 10, 64)
	got := 0
	err = l.Replay(mid+1, func(seq uint64, _ []byte) error {
		if want := mid + 1 + uint64(got); seq != want {
			t.Fatalf("replay from %d gave %d, want %d", mid+1, seq, want)
		}
		got++
		return nil
	})
	if err != nil || uint64(got) != last-mid {
		t.Fatalf("replay from %d gave %d records, want %d: %v", mid+1, got, last-mid, err)
	}
}

func TestReplayStopsAtCallbackError(t *testing.T) {
	t.Parallel()
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	appendN(t, l, 10)
	stop := errors.New("stop")
	var seen []uint64
	err := l.Replay(3, func(seq uint64, _ []byte) error {
		seen = append(seen, seq)
		if seq == 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(seen) != 3 {
		t.Fatalf("Replay returned %v after %v, want stop after 3,4,5", err, seen)
	}
}

func TestReplayFindsDamageAfterOpen(t *testing.T) {
	t.Parallel()
	dir := newLog(t, 256, 40)
	l := openLog(t, dir, Options{})
	defer l.Close()
	// Damage an older segment behind the open Log's back; it is read from
	// disk only when Replay reaches it.
	seg := segPaths(t, dir)[1]
	spans := entrySpans(t, seg)
	b := readFile(t, seg)
	b[spans[1].end-1] ^= 0x10
	writeFile(t, seg, b)
	err := l.Replay(0, func(uint64, []byte) error { return nil })
	isErr(t, err, ErrCorrupt)
	if want := filepath.Base(seg) + " at offset " + strconv.FormatInt(spans[1].off, 10); !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	appendN(t, l, 5)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	isErr(t, l.Close(), ErrClosed)
	isErr(t, l.Append(6, nil), ErrClosed)
	if err := l.Sync(5); err != nil { // durable before Close
		t.Fatalf("Sync of a durable record after Close: %v", err)
	}
	isErr(t, l.Flush(), ErrClosed)
	isErr(t, l.TruncateFront(3), ErrClosed)
	isErr(t, l.Replay(0, func(uint64, []byte) error { return nil }), ErrClosed)
	if l.LastSeq() != 5 || l.Stats().Appends != 5 {
		t.Fatalf("LastSeq %d, Stats %+v after Close", l.LastSeq(), l.Stats())
	}
	reopenAndCheck(t, dir, 1, 5)
}

// TestCloseReleasesSyncWaiters: Close called while a leader is inside its
// fsync and other committers wait for records the leader's round does not
// cover writes and syncs those records, and every waiter returns nil.
func TestCloseReleasesSyncWaiters(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	dir := t.TempDir()
	l := openLog(t, dir, Options{Failpoint: func(name string) error {
		if name == "sync" {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	}})
	appendN(t, l, 1)
	errs := make(chan error, 3)
	go func() { errs <- l.Sync(1) }()
	<-entered // the leader wrote record 1 and is inside its fsync
	appendN(t, l, 2)
	for seq := uint64(2); seq <= 3; seq++ {
		go func() { errs <- l.Sync(seq) }()
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	// Close marks the log closed, then waits for the writer lock the
	// leader holds. The flag has no signal of its own; it is set before
	// Close blocks, so yield until it is.
	for !l.closed.Load() {
		runtime.Gosched()
	}
	close(release)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	reopenAndCheck(t, dir, 1, 3)
}

// TestFailpoints injects a failure at each point and checks fail-stop: the
// failing call and every later one return ErrFailed, no fsync is attempted
// again, and reopening gives back every record synced before.
func TestFailpoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		point   string
		segSize int
		op      func(l *Log) error
	}{
		{"append.write", 0, func(l *Log) error { return l.Flush() }},
		{"append.write", 0, func(l *Log) error { return l.Sync(l.LastSeq()) }},
		{"sync", 0, func(l *Log) error { return l.Sync(l.LastSeq()) }},
		{"sync.after", 0, func(l *Log) error { return l.Sync(l.LastSeq()) }},
		{"segment.create", 200, func(l *Log) error { return l.Sync(l.LastSeq()) }},
		{"segment.create", 200, func(l *Log) error { return l.Flush() }},
		{"truncate", 0, func(l *Log) error { return l.TruncateFront(5) }},
		{"sync", 0, func(l *Log) error { return l.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.point, func(t *testing.T) {
			dir := t.TempDir()
			var armed atomic.Bool
			var after atomic.Int32 // I/O points reached after the failure
			var failedAt atomic.Bool
			l := openLog(t, dir, Options{SegmentSize: tt.segSize, Failpoint: func(name string) error {
				if failedAt.Load() {
					after.Add(1)
				}
				if armed.Load() && name == tt.point {
					failedAt.Store(true)
					return errInjected
				}
				return nil
			}})
			appendN(t, l, 10)
			if err := l.Sync(10); err != nil {
				t.Fatal(err)
			}
			appendN(t, l, 10) // crosses a segment when segSize is set
			armed.Store(true)
			err := tt.op(l)
			isErr(t, err, ErrFailed)
			isErr(t, err, errInjected)

			isErr(t, l.Append(l.LastSeq()+1, nil), ErrFailed)
			isErr(t, l.Sync(l.LastSeq()), ErrFailed)
			isErr(t, l.Sync(1), ErrFailed) // even a durable one: the caller must learn
			isErr(t, l.Flush(), ErrFailed)
			isErr(t, l.TruncateFront(2), ErrFailed)
			isErr(t, l.Replay(0, func(uint64, []byte) error { return nil }), ErrFailed)
			if err := l.Close(); !errors.Is(err, ErrFailed) && !errors.Is(err, ErrClosed) {
				t.Fatalf("Close: %v", err)
			}
			isErr(t, l.Close(), ErrClosed)
			if n := after.Load(); n != 0 {
				t.Fatalf("%d I/O points reached after the failure", n)
			}

			if _, err := Check(dir); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, Options{})
			defer l.Close()
			if l.FirstSeq() > 10 || l.LastSeq() < 10 {
				t.Fatalf("reopened log holds %d..%d, want at least ..10 synced before", l.FirstSeq(), l.LastSeq())
			}
			wantRecords(t, replayAll(t, l, 0), l.FirstSeq(), l.LastSeq())
		})
	}
}

// TestReplayWhileAppending replays a log that is being appended to and
// flushed: replay sees a consistent prefix and the race detector stays quiet.
func TestReplayWhileAppending(t *testing.T) {
	t.Parallel()
	l := openLog(t, t.TempDir(), Options{SegmentSize: 1024})
	defer l.Close()
	appendN(t, l, 50)
	done := make(chan error, 1)
	go func() {
		for range 300 {
			seq := l.LastSeq() + 1
			if err := l.Append(seq, payload(seq)); err != nil {
				done <- err
				return
			}
			if seq%10 == 0 {
				if err := l.Flush(); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	for range 5 {
		var next uint64 = 1
		err := l.Replay(0, func(seq uint64, data []byte) error {
			if seq != next || !bytes.Equal(data, payload(seq)) {
				t.Fatalf("replayed %d (%q), want %d", seq, data, next)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func BenchmarkAppend(b *testing.B) {
	l := openLog(b, b.TempDir(), Options{})
	defer l.Close()
	data := bytes.Repeat([]byte("x"), 128)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		if err := l.Append(l.LastSeq()+1, data); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 1023 {
			if err := l.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkGroupCommit measures commits per second and records per fsync
// with many committers, the engine's default durability mode.
func BenchmarkGroupCommit(b *testing.B) {
	l := openLog(b, b.TempDir(), Options{})
	defer l.Close()
	data := bytes.Repeat([]byte("x"), 128)
	var mu sync.Mutex
	before := l.Stats()
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			seq := l.LastSeq() + 1
			err := l.Append(seq, data)
			mu.Unlock()
			if err == nil {
				err = l.Sync(seq)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := l.Stats()
	syncs := st.Syncs - before.Syncs
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	if syncs > 0 {
		b.ReportMetric(float64(b.N)/float64(syncs), "records/fsync")
	}
}
