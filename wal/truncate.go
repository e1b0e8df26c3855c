package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/docketdb/docket/internal/fsync"
)

// ErrNotFound reports a Read of a sequence number the log does not hold.
var ErrNotFound = errors.New("wal: record not found")

// The failpoints of this file, in addition to those listed on Options:
//
//	"truncate.back"  in TruncateBack, before the segments are rewritten
//	"reset.remove"   in Reset, after the old empty segment is removed and
//	                 before the new one is created
//
// A failpoint that fires leaves the Log failed, like any I/O error.

// Read returns a copy of the data of record seq, which must lie between
// FirstSeq() and LastSeq(); otherwise the error wraps ErrNotFound. A record
// that is appended but not yet written is written first. A record that no
// longer decodes gives an error wrapping ErrCorrupt that names the file.
//
// Read waits while the Log writes or fsyncs, so a caller that reads the newest
// records often keeps a cache of its own. Reading records in order is
// cheapest: Read keeps its place in the segment file between calls.
func (l *Log) Read(seq uint64) ([]byte, error) {
	if err := l.state(); err != nil {
		return nil, err
	}
	if first, last := l.first.Load(), l.last.Load(); seq < first || seq > last {
		return nil, fmt.Errorf("%w: %d, the log holds %d..%d", ErrNotFound, seq, first, last)
	}
	if err := l.FlushTo(seq); err != nil {
		return nil, err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.fclosed {
		return nil, ErrClosed
	}
	if err := l.failed(); err != nil {
		return nil, err
	}
	if seq < l.first.Load() || seq > l.written.Load() {
		// Truncated between the range check and the lock.
		return nil, fmt.Errorf("%w: %d", ErrNotFound, seq)
	}
	_, f, err := l.position(seq, true)
	var rec []byte
	if err == nil && f == faultNone {
		rec, f, err = l.cur.r.next()
	}
	if err != nil {
		l.dropCursor()
		return nil, fmt.Errorf("wal: read record %d: %w", seq, err)
	}
	if f == faultNone {
		l.cur.next = seq + 1
		rec, f = checkRecord(rec, seq)
	}
	if f != faultNone {
		l.dropCursor()
		return nil, l.locate(seq, f.String())
	}
	return bytes.Clone(rec), nil
}

// TruncateBack drops every record after seq, which must be at least
// FirstSeq()-1 (drop them all), and fsyncs the directory; the next Append is
// then seq+1. A seq at or beyond LastSeq() does nothing. Records the call
// drops may have been acknowledged: it exists for a replicated log, whose
// consensus decides that an uncommitted suffix is replaced. It must not run
// concurrently with Append, nor with a Sync of a record it drops.
//
// A crash during the call leaves either the old log or the truncated one;
// Open finishes an interrupted truncation.
func (l *Log) TruncateBack(seq uint64) error {
	if err := l.lockWriter(); err != nil {
		return err
	}
	defer l.wmu.Unlock()
	first, last := l.first.Load(), l.last.Load()
	if seq >= last {
		return nil
	}
	if seq+1 < first {
		return fmt.Errorf("%w: truncate after %d, before first held %d", ErrSequence, seq, first)
	}
	if err := l.writePending(); err != nil {
		return err
	}
	if err := l.failpoint("truncate.back"); err != nil {
		return l.fail("truncate back", err)
	}
	if err := l.truncateBack(seq); err != nil {
		return l.fail("truncate back", err)
	}
	l.last.Store(seq)
	l.written.Store(seq)
	if l.synced.Load() > seq {
		l.synced.Store(seq)
	}
	if err := fsync.DirFS(l.opts.FS, l.dir); err != nil {
		return l.fail("truncate back", err)
	}
	return nil
}

// Reset drops every record and moves the log to next: FirstSeq() becomes
// next and the next Append is next. It is how a replicated log that installed
// a snapshot starts again after it, since the records it must hold next need
// not follow the ones it had. It must not run concurrently with Append.
//
// A crash during the call leaves the old log, a prefix of it, or an empty log
// (at the old position, at next, or at 1 as a fresh directory is); a caller
// that reopens an empty log at the wrong position calls Reset again.
func (l *Log) Reset(next uint64) error {
	if next == 0 {
		return fmt.Errorf("%w: reset to 0, sequence numbers start at 1", ErrSequence)
	}
	if err := l.TruncateBack(l.first.Load() - 1); err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.fclosed {
		return ErrClosed
	}
	if err := l.failed(); err != nil {
		return err
	}
	if next == l.first.Load() {
		return nil
	}
	// Replace the only segment, which is empty: remove it first, so that
	// no crash leaves two empty segments that do not follow one another.
	if err := l.closeFile(); err != nil {
		return l.fail("reset", err)
	}
	lay, err := readLayout(l.opts.FS, l.dir)
	if err != nil {
		return l.fail("reset", err)
	}
	for _, s := range slices.Backward(lay.segs) {
		if err := l.opts.FS.Remove(s.path); err != nil {
			return l.fail("reset", err)
		}
	}
	if err := fsync.DirFS(l.opts.FS, l.dir); err != nil {
		return l.fail("reset", err)
	}
	if err := l.failpoint("reset.remove"); err != nil {
		return l.fail("reset", err)
	}
	path := filepath.Join(l.dir, segmentName(next))
	f, err := l.opts.openFile(path, os.O_CREATE|os.O_EXCL|tailFlags, filePerm)
	if err != nil {
		return l.fail("reset", err)
	}
	l.file = f
	if err := f.Sync(); err != nil {
		return l.fail("reset", err)
	}
	if err := fsync.DirFS(l.opts.FS, l.dir); err != nil {
		return l.fail("reset", err)
	}
	l.segs = []*segment{{first: next, path: path, indexed: true}}
	l.tailSize, l.tailAlloc = 0, 0
	l.first.Store(next)
	l.last.Store(next - 1)
	l.written.Store(next - 1)
	l.synced.Store(next - 1)
	return nil
}

// lockWriter takes the writer lock of a log that is open and has not
// failed; on success the caller unlocks wmu.
func (l *Log) lockWriter() error {
	if err := l.state(); err != nil {
		return err
	}
	l.wmu.Lock()
	if l.fclosed {
		l.wmu.Unlock()
		return ErrClosed
	}
	if err := l.failed(); err != nil {
		l.wmu.Unlock()
		return err
	}
	return nil
}
