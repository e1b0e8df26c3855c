package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/internal/vfs"
)

// DefaultSegmentSize is the segment size used when Options.SegmentSize is
// not set: large enough that segments are rarely cut, small enough that a
// truncation after a snapshot frees space soon.
const DefaultSegmentSize = 16 << 20

// DefaultPreallocate is the zero-filled space kept ahead of the tail's
// records when Options.Preallocate is not set: growing the file once per
// megabyte costs one slower fsync per few thousand small commits.
const DefaultPreallocate = 1 << 20

// maxRetained caps the batch buffers kept between writes, so that one burst
// does not pin its memory for the life of the Log.
const maxRetained = 4 << 20

// Options configures a Log. The zero value is ready to use.
type Options struct {
	// SegmentSize is the size in bytes at which the tail segment is closed
	// and a new one started. Default DefaultSegmentSize.
	SegmentSize int

	// FS is the file system the Log works on; nil is the operating
	// system's (vfs.Default). Tests run the Log on a memory file system
	// that can crash, or on one that fails chosen operations.
	FS vfs.FS

	// Failpoint, if set, is called at named points; a non-nil error is treated
	// exactly as if the I/O at that point had failed, so the Log becomes
	// failed. It exists to test the failure paths. The points are:
	//
	//	"append.write"   before appended records are written to the file
	//	"sync"           before the fsync
	//	"sync.after"     after a successful fsync, before waiters are released
	//	"truncate"       in TruncateFront, after the segments are rewritten and
	//	                 before the directory is fsynced
	//	"segment.create" after a write started a new segment, before the
	//	                 directory is fsynced
	Failpoint func(name string) error

	// BeforeWrite, if set, is called each time records are about to be
	// written, after they are taken from the records appended and before
	// any byte of them reaches the file: what they depend on (the values
	// of a value log they refer to, appended before them) is made as
	// durable there as the records are about to be. An error fails the
	// log as a failed write does.
	BeforeWrite func() error

	// OnSync, if set, is told after each successful fsync how long it took
	// and how many records it made durable (the group size). It runs on the
	// syncing goroutine while other syncs wait, so it must be quick.
	OnSync func(d time.Duration, records int)

	// From is the first record the caller will read: the ones before it are
	// covered by a snapshot. Damage confined to them (see CheckFrom) does not
	// stop Open; Replay never reads them and TruncateFront removes them. Zero
	// validates every record.
	From uint64

	// Preallocate is how many bytes of zeros the Log keeps written ahead
	// of the tail segment's last record, so that a commit's fsync has no
	// file growth to make durable (see reserve); it never reaches past
	// SegmentSize. Default DefaultPreallocate; negative for none, which
	// grows the file with each write as tidwall/wal does.
	Preallocate int64

	// Validated, if set, is a Validate of the directory made since it was
	// last changed: Open then skips its own pass over the segments when
	// that one found the log sound with the same From.
	Validated *Validation

	// openFile opens every file the Log writes (FS.OpenFile by default);
	// tests replace it to make writes, fsyncs and creations fail.
	openFile func(name string, flag int, perm fs.FileMode) (segmentFile, error)
	// gathering, if set, is told of each timed wait of a gathering leader
	// (tests).
	gathering func(wait time.Duration)
}

// Stats are running totals since Open. Reading them is cheap and never blocks
// a commit.
type Stats struct {
	Appends      uint64 // records accepted by Append
	Flushes      uint64 // batches written, each with one write call per segment it touches
	Syncs        uint64 // fsyncs of the tail segment
	BytesWritten uint64 // bytes written to segment files, length prefixes included
	SyncNanos    uint64 // time spent in those fsyncs
	// Gathers counts the rounds whose leader waited for committers it
	// expected (a Sync, never a SyncGathered), and GatherMisses those of
	// them whose committers did not all come within the wait's bound.
	Gathers, GatherMisses uint64
	// Groups counts the fsyncs that made records durable by how many they
	// covered (the group size): Groups[i] those of a size GroupRange(i).
	Groups [GroupBuckets]uint64
}

// GroupBuckets is the number of buckets of Stats.Groups: one per group
// size up to 16, then one per power of two, the last open-ended.
const GroupBuckets = 24

// exactGroups is how many group sizes have a bucket of their own.
const exactGroups = 16

// GroupBucket returns the bucket of Stats.Groups that counts an fsync
// covering n records.
func GroupBucket(n int) int {
	if n <= exactGroups {
		return max(n, 1) - 1
	}
	// 17–32 in exactGroups, 33–64 in the next, and so on.
	return min(exactGroups+bits.Len(uint(n-1))-5, GroupBuckets-1)
}

// GroupRange returns the smallest and the largest group size bucket i of
// Stats.Groups counts; hi is 0 for the last, which has no bound.
func GroupRange(i int) (lo, hi int) {
	if i < exactGroups {
		return i + 1, i + 1
	}
	lo = 1<<(i-exactGroups+4) + 1
	if i < GroupBuckets-1 {
		hi = 1 << (i - exactGroups + 5)
	}
	return lo, hi
}

// Log is an open write-ahead log. Append must not be called concurrently
// with itself (docket's engine calls it under its commit mutex) but may run
// alongside every other method, which are safe for concurrent use.
type Log struct {
	dir      string
	opts     Options
	repaired RepairReport // what Open did to the directory

	// The append side. mu is held only to add a record to pend or to swap
	// pend with spare, never during I/O, so Append does not wait for disks.
	mu     sync.Mutex
	pend   *pending
	spare  *pending // used only by the writer holding wmu
	closed atomic.Bool
	first  atomic.Uint64
	last   atomic.Uint64

	// The I/O side. wmu serialises everything that touches the segment
	// files but Replay: writes, fsyncs, Read, truncation and close.
	wmu       sync.Mutex
	segs      []*segment  // oldest first; the last is the tail, where appends go
	file      segmentFile // the tail's, open for appending; nil while it is replaced
	tailSize  int64       // bytes of entries in the tail segment
	tailAlloc int64       // bytes in its file: tailSize, then zeros (see reserve)
	fclosed   bool        // Close has run: the files are closed or abandoned
	// The tail's file mapped into memory (mapTail), when its file system
	// offers it: appends are then copied into the page cache without a
	// write call. tmapFile is the file the mapping, or its refusal
	// (tmapNo), is of.
	tmap     []byte
	tmapFile segmentFile
	tmapNo   bool
	tmapHeld int64         // bytes tmapFile held when last asked (Stat)
	cur      cursor        // where Read is
	written  atomic.Uint64 // newest record handed to the OS

	// Group commit. One Sync caller at a time (the leader, syncing set)
	// writes and fsyncs; the others wait on cond, then either find their
	// record covered or lead the next round.
	smu     sync.Mutex
	cond    sync.Cond
	syncing bool
	synced  atomic.Uint64 // newest record known to be durable

	// Gathering (see gather): active estimates the committers at work, the
	// records the last fsync covered plus those appended while it ran;
	// lastSync is how long it took. arrived, when set (under mu), is
	// closed by the Append that makes want records pending while a leader
	// gathers.
	active   atomic.Int64
	lastSync atomic.Int64
	arrived  chan struct{}
	want     int

	failure atomic.Pointer[error]

	appends, flushes, syncs, bytes, syncNanos atomic.Uint64
	gathers, gatherMisses                     atomic.Uint64
	groups                                    [GroupBuckets]atomic.Uint64
}

// pending holds appended records not yet written: their entries, framed
// exactly as the segment file holds them, back to back in buf, and where
// each ends.
type pending struct {
	buf   []byte
	ends  []int
	first uint64 // seq of the first record
}

// start returns where entry i begins in buf.
func (p *pending) start(i int) int {
	if i == 0 {
		return 0
	}
	return p.ends[i-1]
}

func (p *pending) reset() {
	if cap(p.buf) > maxRetained {
		p.buf, p.ends = nil, nil
	}
	p.buf, p.ends = p.buf[:0], p.ends[:0]
}

// Open opens the log in dir, creating the directory if it is missing. Before
// anything else it validates every segment: a torn tail is cut (the segment
// is kept as <name>.broken), any other damage returns an error wrapping
// ErrCorrupt and leaves the directory untouched.
func Open(dir string, opts Options) (*Log, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.Preallocate == 0 {
		opts.Preallocate = DefaultPreallocate
	}
	fsys := vfs.Or(opts.FS)
	opts.FS = fsys
	if err := createDir(fsys, dir); err != nil {
		return nil, fmt.Errorf("wal: create %s: %w", dir, err)
	}
	if opts.openFile == nil {
		opts.openFile = func(name string, flag int, perm fs.FileMode) (segmentFile, error) {
			return fsys.OpenFile(name, flag, perm)
		}
	}
	s, rep, err := recoverScanned(fsys, dir, opts.From, opts.Validated)
	opts.Validated = nil // used up; the Log keeps opts
	if err != nil {
		return nil, err
	}
	l := &Log{
		dir:      dir,
		opts:     opts,
		repaired: rep,
		pend:     &pending{},
		spare:    &pending{},
	}
	l.cond.L = &l.smu
	for i, seg := range s.layout.segs {
		l.segs = append(l.segs, &segment{first: seg.first, path: seg.final, size: s.sizes[i]})
	}
	if len(l.segs) == 0 {
		// A new log starts with an empty segment for record 1, as
		// tidwall/wal's does.
		path := filepath.Join(dir, segmentName(1))
		f, err := opts.openFile(path, createFlags, filePerm)
		if err != nil {
			return nil, fmt.Errorf("wal: open %s: %w", dir, err)
		}
		l.file = f
		l.segs = []*segment{{first: 1, path: path, indexed: true}}
	} else if err := l.openTail(s.tailSize, s.sizes[len(s.sizes)-1]); err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	first, last := s.report.FirstSeq, s.report.LastSeq
	l.first.Store(first)
	l.last.Store(last)
	l.written.Store(last)
	// After a process crash the tail may still be only in the page cache;
	// the engine is about to act on what it replays, so make it durable. The
	// directory may have gained its first segment.
	if err := l.fsync(true); err != nil {
		// The file stays open: closing it could let a later fsync of the
		// same file succeed without the lost pages being on disk.
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	if err := fsync.DirFS(fsys, dir); err != nil {
		l.closeFile()
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	l.synced.Store(last)
	return l, nil
}

// Repaired reports what Open found and did before opening: the torn tail it
// cut (Cut, with the copy kept in Broken) and the damage it got past because
// it lies before Options.From (Covered).
func (l *Log) Repaired() RepairReport { return l.repaired }

// FirstSeq returns the sequence number of the oldest record held, or
// LastSeq()+1 when the log holds none.
func (l *Log) FirstSeq() uint64 { return l.first.Load() }

// LastSeq returns the sequence number of the newest record appended, whether
// or not it is durable yet; 0 for a log that never held a record.
func (l *Log) LastSeq() uint64 { return l.last.Load() }

// Append adds the record seq, which must be LastSeq()+1, holding a copy of
// data. It only frames data into memory, as the segment file will hold it;
// the record reaches the file with the next Flush or Sync, written from that
// buffer, and is durable once Sync(seq) returns.
func (l *Log) Append(seq uint64, data []byte) error {
	if err := l.failed(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return ErrClosed
	}
	last := l.last.Load()
	if seq != last+1 || seq == 0 {
		l.mu.Unlock()
		return fmt.Errorf("%w: append %d after %d", ErrSequence, seq, last)
	}
	p := l.pend
	if len(p.ends) == 0 {
		p.first = seq
	}
	p.buf = appendEntry(p.buf, seq, data)
	p.ends = append(p.ends, len(p.buf))
	l.last.Store(seq)
	if l.arrived != nil && len(p.ends) >= l.want {
		close(l.arrived) // the gathering leader has what it waited for
		l.arrived = nil
	}
	l.mu.Unlock()
	l.appends.Add(1)
	return nil
}

// Flush writes every appended record to the operating system, in one write,
// without fsyncing. With syncing left to the OS it bounds what a process
// crash (as opposed to a machine crash) can lose.
func (l *Log) Flush() error {
	if err := l.state(); err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.fclosed {
		return ErrClosed
	}
	return l.writePending()
}

// FlushTo returns once every record up to seq is written to the operating
// system. Callers queued behind a write usually find their record written by
// it and return without a write of their own, so concurrent committers share
// write calls the way Sync shares fsyncs.
func (l *Log) FlushTo(seq uint64) error {
	if seq <= l.written.Load() {
		return nil
	}
	if err := l.state(); err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if seq <= l.written.Load() {
		return nil
	}
	if l.fclosed {
		return ErrClosed
	}
	return l.writePending()
}

// Sync returns once every record up to seq is written and fsynced. Callers
// that arrive while an fsync is running wait for it and share the next one,
// so a busy log does far fewer fsyncs than commits. A seq that is already
// durable returns at once without a system call. A commit racing with Close
// learns the truth: its record was appended before Close, which syncs it. On
// a failed Log every Sync fails.
func (l *Log) Sync(seq uint64) error { return l.sync(seq, true) }

// SyncGathered is Sync for a caller that appended every record it expects
// this round to hold before calling (a server answering one request of
// many calls): as leader it does not wait for the committers the last
// fsync released (see gather), who are not about to append but waiting
// for answers elsewhere, and a timed wait shorter than the runtime's timer
// resolution of an idle process (about a millisecond) would cost far more
// than the share of an fsync it is bounded by.
func (l *Log) SyncGathered(seq uint64) error { return l.sync(seq, false) }

func (l *Log) sync(seq uint64, gather bool) error {
	if err := l.failed(); err != nil {
		return err
	}
	if seq <= l.synced.Load() {
		return nil
	}
	if last := l.last.Load(); seq > last {
		if l.closed.Load() {
			return ErrClosed
		}
		return fmt.Errorf("%w: sync %d beyond last appended %d", ErrSequence, seq, last)
	}
	l.smu.Lock()
	for {
		if err := l.failed(); err != nil {
			l.smu.Unlock()
			return err
		}
		if l.synced.Load() >= seq {
			l.smu.Unlock()
			return nil
		}
		if !l.syncing {
			break
		}
		l.cond.Wait()
	}
	l.syncing = true
	l.smu.Unlock()

	if gather {
		l.gather()
	}
	err := l.commit()

	l.smu.Lock()
	l.syncing = false
	l.cond.Broadcast()
	l.smu.Unlock()
	if err != nil {
		return err
	}
	if l.synced.Load() < seq {
		// Only a Close that could not sync leaves seq uncovered.
		if err := l.failed(); err != nil {
			return err
		}
		return ErrClosed
	}
	return nil
}

// Bounds of one gather: the longest it waits, as a fraction of the last
// fsync and absolutely.
const (
	gatherShare = 2 // at most 1/gatherShare of the last fsync
	maxGather   = time.Millisecond
)

// gatherWait is how long a leader that finds pending records appended may
// wait for the ones it expects, active (the records the last fsync covered
// plus those appended while it ran), when that fsync took lastSync: not at
// all when they are all there or it expects at most one committer (a lone
// committer never waits), else up to 1/gatherShare of lastSync and never
// more than maxGather. Waiting is a bet that the committers the last fsync
// released are about to append again; its cost is bounded by a share of
// one fsync, and a round that falls short lowers active for the next.
func gatherWait(pending, active int64, lastSync time.Duration) time.Duration {
	if pending >= active || active <= 1 || lastSync <= 0 {
		return 0
	}
	return min(lastSync/gatherShare, maxGather)
}

// gather lets the committers released by the previous fsync append before
// this round takes the pending records. They are typically about to
// append (a worker that commits again at once) but have not yet, so a
// round that went ahead without them would hold a few records and the
// next the rest, each paying a whole fsync: rounds would alternate small
// and large, each committer making one commit per two fsyncs. The leader
// waits, for as long as gatherWait allows, until as many records are
// pending as it expects; Append tells it once they are, not at every
// record.
func (l *Log) gather() {
	want := l.active.Load()
	l.mu.Lock()
	wait := gatherWait(int64(len(l.pend.ends)), want, time.Duration(l.lastSync.Load()))
	if wait <= 0 {
		l.mu.Unlock()
		runtime.Gosched() // those about to append get one chance
		return
	}
	ch := make(chan struct{})
	l.arrived, l.want = ch, int(want)
	l.mu.Unlock()
	if l.opts.gathering != nil {
		l.opts.gathering(wait)
	}
	l.gathers.Add(1)
	if !await(ch, wait, spins(wait, runtime.GOMAXPROCS(0))) {
		l.gatherMisses.Add(1)
	}
	l.mu.Lock()
	l.arrived = nil
	l.mu.Unlock()
}

// timerGrain is the precision of a Go timer in a process with nothing
// else to run: the netpoller sleeps in whole milliseconds.
const timerGrain = time.Millisecond

// spins reports whether a gathering leader that may wait for wait, with
// procs processors, waits in a loop rather than on a timer (see await):
// only a wait shorter than a timer's grain needs it, and only with a
// second processor.
func spins(wait time.Duration, procs int) bool {
	return wait < timerGrain && procs > 1
}

// await waits until ch is closed or wait has passed, and reports whether
// ch was closed. With spin it yields the processor in a loop until then,
// rather than sleeping on a timer: a Go timer under a millisecond, in a
// process with nothing else to run, fires only at the next millisecond
// (the netpoller sleeps in whole milliseconds), so a gather bounded by
// half of a 100 µs fsync would wait ten times its bound whenever the
// committers it expects do not come (a producer that enqueues at a
// fixed rate rather than as soon as its commit returns). The loop runs
// the goroutines about to append on the leader's own processor, and
// spends the rest of the bound, at most half an fsync, on a processor
// that would otherwise have nothing to do until the fsync. Without a
// second processor (spin false) it sleeps: a loop there would hold off
// the goroutines that the network wakes, which the scheduler finds only
// when it has nothing else to run. A wait of a timer's grain or more
// (a disk whose fsync takes 2 ms or longer) sleeps too: the timer is
// then precise enough, and a loop would spend a millisecond of processor
// a round on a slow disk.
func await(ch <-chan struct{}, wait time.Duration, spin bool) bool {
	if !spin {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ch:
			return true
		case <-t.C:
			return false
		}
	}
	deadline := time.Now().Add(wait)
	for {
		select {
		case <-ch:
			return true
		default:
		}
		if !time.Now().Before(deadline) {
			return false
		}
		runtime.Gosched()
	}
}

// commit writes whatever is pending and fsyncs it: one round of group
// commit, run by the leader.
func (l *Log) commit() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.fclosed {
		return nil // Close synced everything it could; Sync looks at synced
	}
	if err := l.writePending(); err != nil {
		return err
	}
	return l.syncWritten()
}

// writePending writes the pending records to the tail segment, straight
// from the buffer Append framed them in. It holds wmu.
func (l *Log) writePending() error {
	if err := l.failed(); err != nil {
		// Checked under wmu: a failure may have left no tail file open.
		return err
	}
	l.mu.Lock()
	p := l.pend
	l.pend, l.spare = l.spare, p
	l.mu.Unlock()
	if len(p.ends) == 0 {
		return nil
	}
	if l.opts.BeforeWrite != nil {
		if err := l.opts.BeforeWrite(); err != nil {
			return l.fail("write what the records depend on", err)
		}
	}
	if err := l.failpoint("append.write"); err != nil {
		return l.fail("write", err)
	}
	cycled, err := l.writeEntries(p)
	if err != nil {
		return l.fail("write", err)
	}
	l.flushes.Add(1)
	p.reset()
	if cycled {
		// The new segment's directory entry.
		if err := l.failpoint("segment.create"); err != nil {
			return l.fail("create segment", err)
		}
		if err := fsync.DirFS(l.opts.FS, l.dir); err != nil {
			return l.fail("create segment", err)
		}
	}
	return nil
}

// syncWritten fsyncs what has been written, unless that is durable already.
// It holds wmu.
func (l *Log) syncWritten() error {
	if err := l.failed(); err != nil {
		return err
	}
	target := l.written.Load()
	if target <= l.synced.Load() {
		return nil
	}
	if err := l.failpoint("sync"); err != nil {
		return l.fail("fsync", err)
	}
	start := time.Now()
	if err := l.fsync(false); err != nil {
		return l.fail("fsync", err)
	}
	if err := l.failpoint("sync.after"); err != nil {
		return l.fail("fsync", err)
	}
	took := time.Since(start)
	covered := int64(target - l.synced.Load())
	l.groups[GroupBucket(int(covered))].Add(1)
	if l.opts.OnSync != nil {
		l.opts.OnSync(took, int(covered))
	}
	l.mu.Lock()
	waiting := int64(len(l.pend.ends))
	l.mu.Unlock()
	l.active.Store(covered + waiting)
	l.lastSync.Store(int64(took))
	l.synced.Store(target)
	return nil
}

// fsync syncs the tail segment. Older segments need none: a segment is
// fsynced before the next is started. A commit's needs only the data (and
// the file's size when a write grew it): full syncs the rest of the
// metadata too.
func (l *Log) fsync(full bool) error {
	start := time.Now()
	var err error
	if full {
		err = l.file.Sync()
	} else {
		err = l.file.Datasync()
	}
	l.syncNanos.Add(uint64(time.Since(start)))
	l.syncs.Add(1)
	return err
}

// Replay calls fn for every record with a sequence number of at least from,
// in order, up to the last one appended before the call; records still
// pending are flushed first. It starts at FirstSeq() if from is below it, so
// a caller that needs the log to reach back to a snapshot compares FirstSeq
// itself. An error from fn stops the replay and is returned. data is only
// valid during the call: its memory is reused for the next record, so fn
// copies what it keeps. Replay reads the segment files with a buffer of its
// own and holds no lock while it does, so appends and writes go on.
func (l *Log) Replay(from uint64, fn func(seq uint64, data []byte) error) error {
	if err := l.Flush(); err != nil {
		return err
	}
	// What to read, taken under the writer lock: records are only added
	// beyond it while the replay runs.
	l.wmu.Lock()
	if l.fclosed {
		l.wmu.Unlock()
		return ErrClosed
	}
	last := l.written.Load()
	seq := max(from, l.first.Load())
	var parts []segment
	if seq <= last {
		for _, s := range l.segs[l.findSegment(seq):] {
			part := *s
			part.size = l.segEnd(s)
			parts = append(parts, part)
		}
	}
	l.wmu.Unlock()

	r := entryReader{size: replayBufSize}
	for i, p := range parts {
		f, err := l.opts.FS.Open(p.path)
		if errors.Is(err, fs.ErrNotExist) {
			return errTruncated(seq)
		}
		if err != nil {
			return fmt.Errorf("wal: replay: %w", err)
		}
		err = l.replaySegment(&r, f, &p, &seq, last, fn)
		f.Close()
		if err != nil || seq > last {
			return err
		}
		if i+1 == len(parts) || parts[i+1].first != seq {
			return l.locate(seq, "segment ends before the record")
		}
	}
	return nil
}

// replaySegment is Replay's work in segment p, open as f: the records from
// *seq to last or to the end of the segment, advancing *seq.
func (l *Log) replaySegment(r *entryReader, f vfs.File, p *segment, seq *uint64, last uint64, fn func(uint64, []byte) error) error {
	at, off := p.first, int64(0)
	if p.indexed && *seq > p.first {
		m := (*seq - p.first) / markEvery
		at, off = p.first+m*markEvery, p.marks[m]
	}
	r.reset(f, off, p.size)
	for ; at < *seq; at++ {
		flt, err := r.skip()
		if err != nil {
			return fmt.Errorf("wal: replay: %w", err)
		}
		if flt != faultNone {
			return l.locate(at, flt.String())
		}
	}
	for *seq <= last && !r.done() {
		rec, flt, err := r.next()
		if err != nil {
			return fmt.Errorf("wal: replay: read record %d: %w", *seq, err)
		}
		if flt == faultNone {
			rec, flt = checkRecord(rec, *seq)
		}
		if flt != faultNone {
			return l.locate(*seq, flt.String())
		}
		if err := fn(*seq, rec); err != nil {
			return err
		}
		*seq++
	}
	return nil
}

// locate turns a record that failed to decode during Replay into an error
// that names the file and offset, by validating the directory again.
func (l *Log) locate(seq uint64, why string) error {
	s, err := scan(l.opts.FS, l.dir, l.opts.From)
	if err != nil {
		return err
	}
	if s.report.Torn != nil {
		return s.report.Torn.err()
	}
	return fmt.Errorf("%w: %s: record %d: %s", ErrCorrupt, l.dir, seq, why)
}

// TruncateFront drops every record before seq, once a snapshot holds their
// effect, and fsyncs the directory. seq may be LastSeq()+1: the log is then
// empty but keeps its position, and the next Append is seq. A seq at or below
// FirstSeq() does nothing.
func (l *Log) TruncateFront(seq uint64) error {
	if err := l.lockWriter(); err != nil {
		return err
	}
	defer l.wmu.Unlock()
	if seq <= l.first.Load() {
		return nil
	}
	if last := l.last.Load(); seq > last+1 {
		return fmt.Errorf("%w: truncate before %d, beyond last appended %d", ErrSequence, seq, last)
	}
	// The segment rewritten must hold every record from seq on.
	if err := l.writePending(); err != nil {
		return err
	}
	if err := l.truncateFront(seq); err != nil {
		return l.fail("truncate", err)
	}
	l.first.Store(seq)
	if err := l.failpoint("truncate"); err != nil {
		return l.fail("truncate", err)
	}
	if err := fsync.DirFS(l.opts.FS, l.dir); err != nil {
		return l.fail("truncate", err)
	}
	return nil
}

// Stats returns the running totals.
func (l *Log) Stats() Stats {
	s := Stats{
		Appends:      l.appends.Load(),
		Flushes:      l.flushes.Load(),
		Syncs:        l.syncs.Load(),
		BytesWritten: l.bytes.Load(),
		SyncNanos:    l.syncNanos.Load(),
		Gathers:      l.gathers.Load(),
		GatherMisses: l.gatherMisses.Load(),
	}
	for i := range l.groups {
		s.Groups[i] = l.groups[i].Load()
	}
	return s
}

// Abandon closes the log without writing the records appended and not
// yet written: a caller that failed before making them durable (the value
// log they refer to could not be written) never acknowledged them, and
// they must not reach the file. Later calls fail with ErrFailed.
func (l *Log) Abandon() error {
	l.fail("abandon", errAbandoned)
	return l.Close()
}

var errAbandoned = errors.New("abandoned")

// Close writes and fsyncs every appended record and closes the files. Sync
// callers waiting at the time are released. Calling it again returns
// ErrClosed. On a failed Log it does no I/O and returns the failure.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed.Store(true) // from here on Append refuses, so pend only shrinks
	l.mu.Unlock()

	l.wmu.Lock()
	defer l.wmu.Unlock()
	err := l.failed()
	if err == nil {
		if err = l.writePending(); err == nil {
			err = l.syncWritten()
		}
	}
	l.dropCursor()
	if err == nil {
		if terr := l.trimTail(); terr != nil {
			err = l.fail("close", terr)
		}
	}
	if err == nil {
		if cerr := l.closeFile(); cerr != nil {
			err = l.fail("close", cerr)
		}
	}
	// A failed Log leaves the tail's file open: closing it would let an
	// fsync of the same file elsewhere succeed without the pages lost by the
	// failed one being on disk. It is closed when the Log is garbage
	// collected. Its mapping goes: nothing writes any more.
	l.unmapTail()
	l.fclosed = true

	l.smu.Lock()
	l.cond.Broadcast()
	l.smu.Unlock()
	return err
}

// failpoint runs the test hook for name.
func (l *Log) failpoint(name string) error {
	if l.opts.Failpoint == nil {
		return nil
	}
	return l.opts.Failpoint(name)
}

// fail marks the Log failed because op hit err, and returns the error every
// later call gets. The first failure is kept: it is the cause.
func (l *Log) fail(op string, err error) error {
	l.smu.Lock()
	defer l.smu.Unlock()
	if prev := l.failure.Load(); prev != nil {
		return *prev
	}
	ferr := fmt.Errorf("%w: %s %s: %w", ErrFailed, op, l.dir, err)
	l.failure.Store(&ferr)
	l.cond.Broadcast()
	return ferr
}

// failed returns the failure, if any.
func (l *Log) failed() error {
	if p := l.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// state returns why a call cannot proceed: a failure outranks Close, since
// it is the news a caller needs.
func (l *Log) state() error {
	if err := l.failed(); err != nil {
		return err
	}
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}
