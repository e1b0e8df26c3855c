package wal

import (
	"sync"
	"testing"
	"time"
)

// TestOnSyncReportsGroups checks that OnSync sees every fsync with the
// number of records it made durable, so group sizes add up to the records.
func TestOnSyncReportsGroups(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls, records int
	l := openLog(t, t.TempDir(), Options{OnSync: func(d time.Duration, n int) {
		mu.Lock()
		defer mu.Unlock()
		if d <= 0 || n <= 0 {
			t.Errorf("OnSync(%v, %d)", d, n)
		}
		calls++
		records += n
	}})
	for seq := uint64(1); seq <= 10; seq++ {
		if err := l.Append(seq, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if seq%5 == 0 {
			if err := l.Sync(seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 || records != 10 {
		t.Fatalf("OnSync saw %d fsyncs covering %d records, want 2 covering 10", calls, records)
	}
	var want [GroupBuckets]uint64
	want[GroupBucket(5)] = 2
	if got := l.Stats().Groups; got != want {
		t.Fatalf("Stats().Groups = %v, want two groups of 5: %v", got, want)
	}
}

// TestGroupBuckets checks that the buckets of Stats.Groups cover every
// group size once, in order, exactly up to 16.
func TestGroupBuckets(t *testing.T) {
	t.Parallel()
	next := 1
	for i := range GroupBuckets {
		lo, hi := GroupRange(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		if i < 16 && hi != lo {
			t.Fatalf("bucket %d is %d-%d, want %d alone", i, lo, hi, lo)
		}
		if (hi == 0) != (i == GroupBuckets-1) {
			t.Fatalf("bucket %d is %d-%d: only the last is open-ended", i, lo, hi)
		}
		last := hi
		if hi == 0 {
			last = lo + 1000
		}
		for n := lo; n <= last; n++ {
			if b := GroupBucket(n); b != i {
				t.Fatalf("GroupBucket(%d) = %d, want %d (%d-%d)", n, b, i, lo, hi)
			}
		}
		next = hi + 1
	}
	if b := GroupBucket(1 << 40); b != GroupBuckets-1 {
		t.Fatalf("GroupBucket(2^40) = %d, want the last bucket", b)
	}
}

func TestFlushToSharesWrites(t *testing.T) {
	t.Parallel()
	l := openLog(t, t.TempDir(), Options{})
	for seq := uint64(1); seq <= 3; seq++ {
		if err := l.Append(seq, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.FlushTo(1); err != nil {
		t.Fatal(err)
	}
	before := l.Stats().Flushes
	for seq := uint64(1); seq <= 3; seq++ {
		if err := l.FlushTo(seq); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.Stats().Flushes; got != before {
		t.Fatalf("FlushTo of written records wrote again: %d flushes, want %d", got, before)
	}
	if err := l.Append(4, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := l.FlushTo(4); err != nil || l.Stats().Flushes != before+1 {
		t.Fatalf("FlushTo(4): %v, flushes %d", err, l.Stats().Flushes)
	}
	var n int
	if err := l.Replay(1, func(uint64, []byte) error { n++; return nil }); err != nil || n != 4 {
		t.Fatalf("replay %d %v", n, err)
	}
}

// TestGatherWait: the policy of a gathering leader. A lone committer, a
// round that has everyone it expects and a log that never synced do not
// wait; otherwise the wait is a share of the last fsync, never beyond
// maxGather.
func TestGatherWait(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		pending, active int64
		lastSync        time.Duration
		want            time.Duration
	}{
		{1, 1, ms, 0},   // a lone committer
		{1, 0, ms, 0},   // nothing known yet
		{0, 1, ms, 0},   // one expected: the leader itself
		{16, 16, ms, 0}, // everyone is there
		{20, 16, ms, 0}, // more than expected
		{1, 16, 0, 0},   // no fsync measured yet
		{1, 16, ms, ms / gatherShare},
		{15, 16, 400 * time.Microsecond, 400 * time.Microsecond / gatherShare},
		{1, 2, 10 * ms, maxGather}, // a slow disk: bounded
	}
	for _, tt := range tests {
		if got := gatherWait(tt.pending, tt.active, tt.lastSync); got != tt.want {
			t.Errorf("gatherWait(%d pending, %d active, last fsync %v) = %v, want %v",
				tt.pending, tt.active, tt.lastSync, got, tt.want)
		}
	}
}

// TestAppendWakesTheGatherer: a gathering leader is woken by the Append
// that makes as many records pending as it waits for, and not before.
func TestAppendWakesTheGatherer(t *testing.T) {
	t.Parallel()
	l := openLog(t, t.TempDir(), Options{})
	if err := l.Append(1, []byte("a")); err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	l.mu.Lock()
	l.arrived, l.want = ch, 3
	l.mu.Unlock()
	woken := func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if err := l.Append(2, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if woken() {
		t.Fatal("woken with 2 of 3 records pending")
	}
	if err := l.Append(3, []byte("c")); err != nil {
		t.Fatal(err)
	}
	if !woken() {
		t.Fatal("not woken with 3 of 3 records pending")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.arrived != nil {
		t.Fatal("the gatherer's channel is still set once it was woken")
	}
}

// TestSyncGatheredDoesNotGather: a leader that expects more committers
// than it finds waits for them in Sync, and not in SyncGathered, whose
// caller appended all it expects; both make the record durable.
func TestSyncGatheredDoesNotGather(t *testing.T) {
	t.Parallel()
	var waits []time.Duration
	l := openLog(t, t.TempDir(), Options{gathering: func(d time.Duration) { waits = append(waits, d) }})
	expect := func() {
		l.active.Store(16)
		l.lastSync.Store(int64(time.Hour))
	}
	if err := l.Append(1, []byte("a")); err != nil {
		t.Fatal(err)
	}
	expect()
	if err := l.SyncGathered(1); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 0 || l.Stats().Gathers != 0 {
		t.Fatalf("SyncGathered waited %v for committers (%+v)", waits, l.Stats())
	}
	if err := l.Append(2, []byte("b")); err != nil {
		t.Fatal(err)
	}
	expect()
	if err := l.Sync(2); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0] != maxGather {
		t.Fatalf("Sync's waits for committers: %v, want one of %v", waits, maxGather)
	}
	// No one appended while it waited: a gather that missed.
	if st := l.Stats(); st.Gathers != 1 || st.GatherMisses != 1 {
		t.Fatalf("gathers %d, missed %d; want 1 and 1", st.Gathers, st.GatherMisses)
	}
	if got := l.synced.Load(); got != 2 {
		t.Fatalf("synced through %d, want 2", got)
	}
}

// TestAwait: a gathering leader's wait, spinning and sleeping alike, ends
// as soon as the channel is closed, even one closed while it waits with a
// bound it would never reach, and otherwise ends at its bound reporting
// that nothing arrived.
func TestAwait(t *testing.T) {
	t.Parallel()
	for _, spin := range []bool{true, false} {
		t.Run(map[bool]string{true: "spin", false: "sleep"}[spin], func(t *testing.T) {
			closed := make(chan struct{})
			close(closed)
			if !await(closed, time.Hour, spin) {
				t.Fatal("a closed channel was not seen")
			}
			if await(make(chan struct{}), 50*time.Microsecond, spin) {
				t.Fatal("an open channel was reported closed")
			}
			ch := make(chan struct{})
			started := make(chan struct{})
			done := make(chan bool)
			go func() {
				close(started)
				done <- await(ch, time.Hour, spin)
			}()
			<-started
			close(ch)
			if !<-done {
				t.Fatal("a channel closed while waiting was not seen")
			}
		})
	}
}

// TestSpins: a gathering leader waits in a loop only for a wait shorter
// than a timer's grain, and only with a second processor.
func TestSpins(t *testing.T) {
	t.Parallel()
	tests := []struct {
		wait  time.Duration
		procs int
		want  bool
	}{
		{50 * time.Microsecond, 2, true},
		{timerGrain - 1, 8, true},
		{timerGrain, 2, false}, // a slow disk: the timer is precise enough
		{maxGather, 2, false},
		{50 * time.Microsecond, 1, false}, // one processor: the loop would hold it
	}
	for _, tt := range tests {
		if got := spins(tt.wait, tt.procs); got != tt.want {
			t.Errorf("spins(%v, %d) = %v, want %v", tt.wait, tt.procs, got, tt.want)
		}
	}
}
