package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/internal/vfs"
)

// writeBufSize batches the many small records of a snapshot into few large
// write calls.
const writeBufSize = 1 << 20

// writers keeps the buffers of writeBufSize of the snapshots written, for
// the next one: a snapshot written often (a small DB's, a test's) would
// otherwise allocate and clear its megabyte each time. The pool lets the
// collector free them once snapshots stop.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufSize) }}

// Failpoint names passed to Options.Failpoint, in the order Write reaches them.
const (
	fpWriteMiddle  = "write.middle"
	fpSyncBefore   = "sync.before"
	fpRenameBefore = "rename.before"
	fpRenameAfter  = "rename.after"
	fpDirsyncAfter = "dirsync.after"
)

var errWriterDone = errors.New("snapshot: Writer used after Write returned")

// Options tunes Write. The zero value is ready to use.
type Options struct {
	// Failpoint, if set, is called at named points of Write; a non-nil error
	// aborts the write at that point exactly as an I/O error would, leaving
	// whatever is on disk at that moment. It exists so tests can check that a
	// failure or crash at each step leaves the directory recoverable.
	//
	// Points, in order:
	//   - "write.middle": after the first record has been added and the
	//     buffered bytes flushed to the temp file, so a partial temp file is
	//     on disk; for a snapshot without records, after fill returns, before
	//     the trailer. Write streams records without knowing their number, so
	//     the first record is the one point every non-empty snapshot passes.
	//   - "sync.before": the complete temp file is written, not yet fsynced.
	//   - "rename.before": the temp file is fsynced and closed.
	//   - "rename.after": the snapshot has its final name; the directory is
	//     not yet fsynced.
	//   - "dirsync.after": the directory is fsynced; the snapshot is durable.
	Failpoint func(name string) error

	// FS is the file system to write on; nil is the operating system's.
	FS vfs.FS
}

func (o *Options) fail(name string) error {
	if o.Failpoint == nil {
		return nil
	}
	return o.Failpoint(name)
}

// Info describes one snapshot file.
type Info struct {
	Seq  uint64 // log sequence number the snapshot's state is as of
	Path string // file path, joined with the directory given to List or Write
	Size int64  // file size in bytes
}

// Writer appends records to a snapshot being written by Write. It is not safe
// for concurrent use and is only valid inside the fill function.
type Writer struct {
	bw      *bufio.Writer
	pooled  bool   // bw is from writers
	n       uint64 // records added
	crc     uint32 // stream CRC of the record section so far
	size    int64  // bytes handed to bw
	err     error  // sticky: once set, the snapshot is abandoned
	scratch [binary.MaxVarintLen64 + crcSize]byte

	// middle runs once after the first record; nil unless a failpoint is set.
	middle      func() error
	middleFired bool
}

// newWriter returns a Writer to dst buffering size bytes; one of
// writeBufSize takes its buffer from writers, and release gives it back.
func newWriter(dst io.Writer, size int) *Writer {
	if size != writeBufSize {
		return &Writer{bw: bufio.NewWriterSize(dst, size)}
	}
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(dst)
	return &Writer{bw: bw, pooled: true}
}

// release ends w: every later use of it fails with errWriterDone, and its
// buffer goes back to writers (no longer holding dst) for the next one.
func (w *Writer) release() {
	w.err = errWriterDone
	if w.pooled {
		w.bw.Reset(nil)
		writers.Put(w.bw)
	}
	w.bw, w.pooled = nil, false
}

// Add appends one record. The bytes are copied before Add returns, so the
// caller may reuse rec at once. An error is sticky: every later Add returns
// it and Write fails with it even if fill ignores it, because a snapshot
// missing a record must never be renamed into place.
func (w *Writer) Add(rec []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(rec) > MaxRecord {
		w.err = fmt.Errorf("snapshot: record %d is %d bytes, more than MaxRecord (%d)", w.n, len(rec), MaxRecord)
		return w.err
	}
	k := binary.PutUvarint(w.scratch[:], uint64(len(rec)))
	binary.LittleEndian.PutUint32(w.scratch[k:], crc32.Checksum(rec, castagnoli))
	w.write(w.scratch[:k+crcSize])
	w.write(rec)
	if w.err != nil {
		return w.err
	}
	w.crc = crc32.Update(w.crc, castagnoli, w.scratch[:k+crcSize])
	w.crc = crc32.Update(w.crc, castagnoli, rec)
	w.n++
	w.fireMiddle()
	return w.err
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.bw.Write(b)
	w.size += int64(n)
	w.err = err
}

func (w *Writer) fireMiddle() {
	if w.middle == nil || w.middleFired || w.err != nil {
		return
	}
	w.middleFired = true
	w.err = w.middle()
}

func (w *Writer) writeHeader(seq uint64) {
	var b [headerSize]byte
	w.write(appendHeader(b[:0], seq))
}

// finish writes the trailer and flushes everything to the destination.
func (w *Writer) finish(seq uint64) error {
	w.fireMiddle()
	var b [trailerSize]byte
	w.write(appendTrailer(b[:0], w.n, w.crc, seq))
	if w.err == nil {
		w.err = w.bw.Flush()
	}
	return w.err
}

// Write creates the snapshot of the state as of log sequence seq in dir.
//
// It writes "snap-<seq>.tmp", calls fill to add the records, writes the
// trailer, fsyncs and closes the file, renames it to "snap-<seq>.snap" and
// fsyncs dir, so that a crash at any moment leaves either no new snapshot or
// a complete valid one. An existing snapshot with the same seq is replaced
// atomically. On any error the temp file is removed (best effort) and the
// error returned; an error from fill or from Add is returned as is.
//
// Once the rename has happened (failures at "rename.after", in the directory
// fsync, or at "dirsync.after") the snapshot is complete and valid but not
// known to be durable; Write still reports the error so the caller can stop
// rather than truncate its log on the strength of it.
//
// Write must not run concurrently with another Write of the same seq, or
// with Prune or RemoveTemp on the same dir, which delete temp files.
func Write(dir string, seq uint64, opts Options, fill func(w *Writer) error) (Info, error) {
	tmp := filepath.Join(dir, fileName(seq, tmpExt))
	final := filepath.Join(dir, fileName(seq, snapExt))

	fsys := vfs.Or(opts.FS)
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return Info{}, err
	}
	w := newWriter(f, writeBufSize)
	closed, renamed := false, false
	defer func() {
		// Runs on success too; any use of w after Write returns is a bug in
		// fill (it kept the Writer), so refuse it loudly.
		w.release()
		if !closed {
			f.Close()
		}
		if !renamed {
			fsys.Remove(tmp)
		}
	}()

	if opts.Failpoint != nil {
		w.middle = func() error {
			// Flush so the failpoint really leaves a partial file on disk.
			if err := w.bw.Flush(); err != nil {
				return err
			}
			return opts.fail(fpWriteMiddle)
		}
	}

	w.writeHeader(seq)
	if w.err != nil {
		return Info{}, w.err
	}
	if fill != nil {
		if err := fill(w); err != nil {
			return Info{}, err
		}
	}
	if err := w.finish(seq); err != nil {
		return Info{}, err
	}
	if err := opts.fail(fpSyncBefore); err != nil {
		return Info{}, err
	}
	if err := f.Sync(); err != nil {
		return Info{}, err
	}
	closed = true
	if err := f.Close(); err != nil {
		return Info{}, err
	}
	if err := opts.fail(fpRenameBefore); err != nil {
		return Info{}, err
	}
	if err := fsys.Rename(tmp, final); err != nil {
		return Info{}, err
	}
	renamed = true
	if err := opts.fail(fpRenameAfter); err != nil {
		return Info{}, err
	}
	if err := fsync.DirFS(fsys, dir); err != nil {
		return Info{}, err
	}
	if err := opts.fail(fpDirsyncAfter); err != nil {
		return Info{}, err
	}
	return Info{Seq: seq, Path: final, Size: w.size}, nil
}
