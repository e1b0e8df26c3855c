package vlog

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/docketdb/docket/internal/vfs"
)

// Ref locates one value: the number of its file, the offset of its record
// in that file, and the length of the value.
type Ref struct {
	File uint32
	Off  int64
	Len  uint32
}

func (r Ref) String() string { return fmt.Sprintf("%s@%d+%d", fileName(r.File), r.Off, r.Len) }

// end is the offset just past r's record.
func (r Ref) end() int64 { return r.Off + HeaderSize + int64(r.Len) }

// pos is a place in the log: appends only move it forward.
type pos struct {
	file uint32
	off  int64
}

func (p pos) less(q pos) bool { return p.file < q.file || p.file == q.file && p.off < q.off }

// Options configure a Log.
type Options struct {
	// FS is the file system; nil means the operating system's.
	FS vfs.FS
	// FileSize is the size past which appends go to a new file; 0 means
	// DefaultFileSize. A value larger than it gets a file of its own.
	FileSize int64
}

// DefaultFileSize is Options.FileSize when it is 0.
const DefaultFileSize = 256 << 20

// FileInfo describes one file of the log.
type FileInfo struct {
	Num    uint32
	Size   int64 // bytes appended, synced or not
	Synced int64 // bytes durable
}

// Move is a record that Compact copied: the value of Owner and Kind at Old
// is now also at New.
type Move struct {
	Owner    uint64
	Kind     Kind
	Old, New Ref
}

// Damage is a record whose bytes fail their checksums, or the torn tail a
// crash left. Owner and Kind are known when HeaderOK is set (only the
// value is damaged); a damaged header tells nothing about its record.
type Damage struct {
	File     uint32
	Off      int64
	Size     int64 // bytes up to the next intact record or the end
	Owner    uint64
	Kind     Kind
	HeaderOK bool
	Torn     bool // the tail of the file, as a crash during a write leaves it
	Err      error
}

func (d Damage) String() string {
	what := "damaged header"
	if d.HeaderOK {
		what = fmt.Sprintf("damaged %s of owner %d", d.Kind, d.Owner)
	}
	if d.Torn {
		what = "torn tail"
	}
	return fmt.Sprintf("%s offset %d (%d bytes): %s: %v", fileName(d.File), d.Off, d.Size, what, d.Err)
}

// file is one open file of the log.
type file struct {
	num     uint32
	f       vfs.File // nil until the first Sync writes to it
	synced  int64    // bytes written, which Read may look at (durable unless dirty)
	size    int64    // bytes appended
	dirty   bool     // written by Flush since the file's last fdatasync
	readers int      // Reads, Scans and Compacts using f now
	removed bool     // Remove has begun: no new reader
}

// chunk is appended bytes not yet written, all for one file.
type chunk struct {
	file uint32
	off  int64
	data []byte
}

// maxSpare is the largest append buffer kept from one Sync to the next.
const maxSpare = 4 << 20

// Log is a value log. Its methods are safe for concurrent use.
type Log struct {
	fs       vfs.FS
	dir      string
	fileSize int64
	maxValue int // MaxValueSize, lowered by tests
	batch    int // compactBatch, lowered by tests

	syncMu sync.Mutex // one Sync at a time

	mu      sync.Mutex
	gone    *sync.Cond // signalled when a file's last reader leaves
	files   map[uint32]*file
	pending []chunk
	spare   []byte // a written chunk's buffer, for the next one
	head    pos    // where the next record goes
	synced  pos    // everything before it is written (durable after a Sync)
	// dirEntry says that a Flush created a file whose directory entry the
	// next Sync must make durable.
	dirEntry bool
	failed   error
	closed   bool

	// removeWaiting, when set by a test, is called when Remove starts to
	// wait for readers.
	removeWaiting func(file uint32)
	// closeWaiting, likewise, when Close starts to wait for readers.
	closeWaiting func()
}

// Open opens the value log in dir, creating dir if needed. It lists the
// files there and reads no value. Appends go to a new file numbered past
// every file found, so nothing written before is ever overwritten.
func Open(dir string, o Options) (*Log, error) {
	fsys := vfs.Or(o.FS)
	if o.FileSize < 0 {
		return nil, fmt.Errorf("%w: negative FileSize %d", ErrBadRef, o.FileSize)
	}
	if o.FileSize == 0 {
		o.FileSize = DefaultFileSize
	}
	if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		// A directory a power loss can undo would take synced files with it.
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := syncDir(fsys, filepath.Dir(dir)); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	l := &Log{fs: fsys, dir: dir, fileSize: o.FileSize, maxValue: MaxValueSize, batch: compactBatch, files: map[uint32]*file{}}
	l.gone = sync.NewCond(&l.mu)
	var last uint32
	for _, e := range ents {
		n, ok := parseFileName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		f, err := fsys.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			l.closeFiles()
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			l.closeFiles()
			return nil, err
		}
		l.files[n] = &file{num: n, f: f, synced: st.Size(), size: st.Size()}
		last = max(last, n)
	}
	if len(l.files) > 0 {
		if last == ^uint32(0) {
			l.closeFiles()
			return nil, fmt.Errorf("vlog: %s: no file number left", dir)
		}
		l.head = pos{file: last + 1}
	}
	l.synced = l.head
	return l, nil
}

func (l *Log) path(n uint32) string { return filepath.Join(l.dir, fileName(n)) }

func (l *Log) closeFiles() {
	for _, f := range l.files {
		if f.f != nil {
			f.f.Close()
		}
	}
}

// usable returns why the log takes no write, if it does not.
func (l *Log) usable() error {
	switch {
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return fmt.Errorf("%w: %w", ErrFailed, l.failed)
	}
	return nil
}

// Append frames val as a record of owner and kind and returns where it
// goes. It only copies val into memory: nothing reaches the file before
// Sync, and Read refuses the ref with ErrUnsynced until a Sync begun after
// Append returns.
func (l *Log) Append(owner uint64, kind Kind, val []byte) (Ref, error) {
	if !kind.valid() {
		return Ref{}, fmt.Errorf("%w: unknown kind %d", ErrBadRef, kind)
	}
	if len(val) > l.maxValue {
		return Ref{}, fmt.Errorf("%w: value of %d bytes over the maximum %d", ErrBadRef, len(val), l.maxValue)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return Ref{}, err
	}
	size := int64(HeaderSize + len(val))
	if l.head.off > 0 && l.head.off+size > l.fileSize {
		if l.head.file == ^uint32(0) {
			return Ref{}, fmt.Errorf("vlog: %s: no file number left", l.dir)
		}
		l.head = pos{file: l.head.file + 1}
	}
	r := Ref{File: l.head.file, Off: l.head.off, Len: uint32(len(val))}
	if n := len(l.pending); n == 0 || l.pending[n-1].file != r.File {
		l.pending = append(l.pending, chunk{file: r.File, off: r.Off, data: l.spare})
		l.spare = nil
	}
	c := &l.pending[len(l.pending)-1]
	c.data = appendRecord(c.data, owner, kind, val)
	l.head.off += size
	f := l.files[r.File]
	if f == nil {
		f = &file{num: r.File}
		l.files[r.File] = f
	}
	f.size = l.head.off
	return r, nil
}

// Sync writes everything appended so far and makes it durable: the data
// of each file (fdatasync), and the directory entry of each file it
// created. Refs returned by Append before Sync began then read back, after
// a crash too. A failure leaves the log failed (ErrFailed).
func (l *Log) Sync() error { return l.flush(true) }

// Flush writes everything appended so far, without making it durable:
// refs returned by Append before Flush began then read back in this
// process, and survive the process's crash but not the machine's (the
// engine's Durability modes below SyncAlways). A later Sync makes them
// durable. A failure leaves the log failed (ErrFailed).
func (l *Log) Flush() error { return l.flush(false) }

func (l *Log) flush(durable bool) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return err
	}
	chunks, upto := l.pending, l.head
	l.pending = nil
	// Files the chunks go to stay in the map: Remove refuses them while
	// they are at or past l.synced.
	handles := make([]*file, len(chunks))
	for i, c := range chunks {
		handles[i] = l.files[c.file]
	}
	// Files an earlier Flush wrote and no fdatasync followed.
	var dirty []*file
	dirEntry := false
	if durable {
		for _, f := range l.files {
			if f.dirty && f.f != nil && !f.removed && !slices.Contains(handles, f) {
				f.readers++ // Remove waits for the fdatasync
				dirty = append(dirty, f)
			}
		}
		dirEntry = l.dirEntry
	}
	l.mu.Unlock()

	err := l.write(chunks, handles, dirty, durable, dirEntry)
	for _, f := range dirty {
		l.release(f)
	}
	if err != nil {
		l.mu.Lock()
		l.failed = err
		l.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	l.mu.Lock()
	for i, c := range chunks {
		handles[i].synced = c.off + int64(len(c.data))
		handles[i].dirty = !durable
	}
	for _, f := range dirty {
		f.dirty = false
	}
	if durable {
		l.dirEntry = false
	}
	l.synced = upto
	if n := len(chunks); n > 0 && cap(chunks[n-1].data) <= maxSpare {
		l.spare = chunks[n-1].data[:0]
	}
	l.mu.Unlock()
	return nil
}

// write writes chunks and, when durable, syncs them, the files in dirty
// and, when dirEntry, the directory; it runs under syncMu only, so that
// appends go on meanwhile.
func (l *Log) write(chunks []chunk, handles []*file, dirty []*file, durable, dirEntry bool) error {
	created := false
	for i, c := range chunks {
		h := handles[i]
		if h.f == nil {
			f, err := l.fs.OpenFile(l.path(c.file), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			l.mu.Lock()
			h.f = f
			l.mu.Unlock()
			created = true
		}
		if _, err := h.f.WriteAt(c.data, c.off); err != nil {
			return err
		}
		if durable {
			if err := h.f.Datasync(); err != nil {
				return err
			}
		}
	}
	if !durable {
		if created {
			l.mu.Lock()
			l.dirEntry = true
			l.mu.Unlock()
		}
		return nil
	}
	for _, f := range dirty {
		if err := f.f.Datasync(); err != nil {
			return err
		}
	}
	if created || dirEntry {
		return l.syncDir()
	}
	return nil
}

func (l *Log) syncDir() error { return syncDir(l.fs, l.dir) }

func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// acquire returns file n for reading, counted as a reader until release.
// It checks that [off, end) was synced.
func (l *Log) acquire(n uint32, off, end int64) (*file, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	f := l.files[n]
	switch {
	case f == nil || f.removed:
		if !(pos{n, off}).less(l.synced) && (pos{n, off}).less(l.head) {
			return nil, fmt.Errorf("%w: %s offset %d", ErrUnsynced, fileName(n), off)
		}
		return nil, fmt.Errorf("%w: no file %s", ErrMissing, fileName(n))
	case end > f.synced && end <= f.size:
		return nil, fmt.Errorf("%w: %s offset %d", ErrUnsynced, fileName(n), off)
	case end > f.synced:
		return nil, fmt.Errorf("%w: %s holds %d bytes, the record at %d needs %d", ErrMissing, fileName(n), f.synced, off, end)
	}
	f.readers++
	return f, nil
}

func (l *Log) release(f *file) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.readers--
	if f.readers == 0 && (f.removed || l.closed) {
		l.gone.Broadcast()
	}
}

// Read returns the value r locates, checking the record's checksum and
// that it belongs to owner and kind. The value is read into dst when it
// has the capacity (HeaderSize + r.Len), into a new slice otherwise. A ref
// into a torn or lost part of a file fails with ErrCorrupt or ErrMissing,
// never with wrong bytes; one not yet synced fails with ErrUnsynced.
func (l *Log) Read(r Ref, owner uint64, kind Kind, dst []byte) ([]byte, error) {
	if !kind.valid() {
		return nil, fmt.Errorf("%w: unknown kind %d", ErrBadRef, kind)
	}
	if r.Off < 0 || r.Len > MaxValueSize {
		return nil, fmt.Errorf("%w: %v", ErrBadRef, r)
	}
	f, err := l.acquire(r.File, r.Off, r.end())
	if err != nil {
		return nil, err
	}
	defer l.release(f)
	need := HeaderSize + int(r.Len)
	buf := dst[:0]
	if cap(buf) < need {
		buf = make([]byte, need)
	}
	buf = buf[:need]
	if n, err := f.f.ReadAt(buf, r.Off); n < need {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s holds less than the record at %d needs", ErrMissing, fileName(r.File), r.Off)
		}
		return nil, err
	}
	h, err := decodeHeader(buf)
	if err != nil {
		return nil, corruptf(r.File, r.Off, "%v", err)
	}
	if h.len != r.Len {
		if int64(h.len) > int64(r.Len) {
			// The checksum covers bytes the ref does not name: the
			// record is intact or not, but not the one asked for.
			return nil, fmt.Errorf("%w: %s offset %d holds %d bytes, the ref says %d", ErrMismatch, fileName(r.File), r.Off, h.len, r.Len)
		}
		buf = buf[:HeaderSize+int(h.len)]
	}
	if err := checkValue(h, buf); err != nil {
		return nil, corruptf(r.File, r.Off, "%v", err)
	}
	if h.owner != owner || h.kind != kind || h.len != r.Len {
		return nil, fmt.Errorf("%w: %s offset %d holds %d bytes of %s of owner %d, want %d bytes of %s of owner %d",
			ErrMismatch, fileName(r.File), r.Off, h.len, h.kind, h.owner, r.Len, kind, owner)
	}
	n := copy(buf, buf[HeaderSize:])
	return buf[:n], nil
}

// Head returns the number of the file appends go to now. Files numbered
// below it take no more appends.
func (l *Log) Head() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head.file
}

// Files lists the files of the log by number.
func (l *Log) Files() []FileInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]FileInfo, 0, len(l.files))
	for _, f := range l.files {
		if !f.removed {
			out = append(out, FileInfo{Num: f.num, Size: f.size, Synced: f.synced})
		}
	}
	slices.SortFunc(out, func(a, b FileInfo) int { return cmp.Compare(a.Num, b.Num) })
	return out
}

// scan runs fn over the events of file n's synced bytes.
func (l *Log) scan(n uint32, fn func(ev event) error) error {
	f, err := l.acquire(n, 0, 0)
	if err != nil {
		return err
	}
	defer l.release(f)
	l.mu.Lock()
	h, size := f.f, f.synced
	l.mu.Unlock()
	if h == nil {
		return nil
	}
	return scanFile(h, size, fn)
}

// Scan calls fn, in order, for every intact record of file n's synced
// bytes, and stops at fn's first error, which it returns. Damaged records
// and a torn tail are skipped, not reported: Check reports them. After a
// damaged header Scan goes on at the next intact header, which a value
// holding record bytes of its own could imitate; fn should treat a ref it
// does not know as dead.
func (l *Log) Scan(n uint32, fn func(owner uint64, kind Kind, r Ref) error) error {
	return l.scan(n, func(ev event) error {
		if ev.err != nil {
			return nil
		}
		return fn(ev.h.owner, ev.h.kind, Ref{File: n, Off: ev.off, Len: ev.h.len})
	})
}

// Check verifies the checksums of every record of every file and returns
// the damaged ones and torn tails, by file and offset.
func (l *Log) Check() ([]Damage, error) {
	var out []Damage
	for _, fi := range l.Files() {
		err := l.scan(fi.Num, func(ev event) error {
			if ev.err != nil {
				out = append(out, Damage{File: fi.Num, Off: ev.off, Size: ev.size, Owner: ev.h.owner, Kind: ev.h.kind, HeaderOK: ev.hdrOK, Torn: ev.torn, Err: ev.err})
			}
			return nil
		})
		if err != nil && !errors.Is(err, ErrMissing) {
			return out, err
		}
	}
	return out, nil
}

// compactBatch is how many bytes Compact appends between Syncs, which
// bounds the memory it holds.
const compactBatch = 4 << 20

// Compact copies the records of file n for which live returns true to the
// head of the log, syncs them, and returns each copy's old and new ref.
// It is CompactBatch with live asked of one record at a time.
func (l *Log) Compact(n uint32, live func(owner uint64, kind Kind, r Ref) bool) ([]Move, error) {
	return l.CompactBatch(n, func(recs []Record, keep []bool) {
		for i, r := range recs {
			keep[i] = live(r.Owner, r.Kind, r.Ref)
		}
	})
}

// Record is a record of a file that CompactBatch asks about.
type Record struct {
	Owner uint64
	Kind  Kind
	Ref   Ref
}

// liveBatch is how many records CompactBatch asks live about at once.
const liveBatch = 256

// CompactBatch copies the records of file n that live keeps to the head
// of the log, syncs them, and returns each copy's old and new ref. live
// is asked about the records in order, up to liveBatch at a time: it sets
// keep[i] for each recs[i] still referred to, so that a caller answering
// under a lock takes it once a batch, not once a record. If n is the file
// appends go to, later appends go to a new one first. Appends and Reads
// go on meanwhile. File n is left as it was: the caller points its refs at
// the copies (durably), then calls Remove(n). A crash or error during
// CompactBatch loses nothing: file n is untouched, and copies that were
// written are records no ref points to, reclaimed when their own file is
// compacted. A damaged record that live keeps, or a damaged header, makes
// CompactBatch fail with ErrCorrupt: it never drops a value silently.
//
// live must keep every value the engine may still refer to, including one
// appended by a commit not yet applied to its index: CompactBatch cannot
// tell such a value from a dead one. The engine compacts only files every
// commit appending to which has been applied, such as files numbered
// below the Head it read once those commits were applied. A value kept
// that dies before it is copied is copied all the same: its copy is a
// record no ref points to.
func (l *Log) CompactBatch(n uint32, live func(recs []Record, keep []bool)) ([]Move, error) {
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	if l.files[n] == nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: no file %s", ErrMissing, fileName(n))
	}
	if l.head.file == n {
		l.head = pos{file: n + 1}
	}
	l.mu.Unlock()
	// Whatever was appended to n is synced before it is read.
	if err := l.Sync(); err != nil {
		return nil, err
	}
	var moves []Move
	batch := 0
	val := make([]byte, 0, 4096)
	f, err := l.acquire(n, 0, 0)
	if err != nil {
		return nil, err
	}
	defer l.release(f)
	l.mu.Lock()
	fh, size := f.f, f.synced
	l.mu.Unlock()
	if fh == nil {
		return nil, nil
	}
	// The events whose record live is asked about, held until a batch is
	// full; torn tails and damaged headers are decided without it.
	var held []event
	recs := make([]Record, 0, liveBatch)
	keep := make([]bool, liveBatch)
	copyLive := func(ev event) error {
		r := Ref{File: n, Off: ev.off, Len: ev.h.len}
		val = val[:0]
		if cap(val) < HeaderSize+int(r.Len) {
			val = make([]byte, 0, HeaderSize+int(r.Len))
		}
		buf := val[:HeaderSize+int(r.Len)]
		if _, err := fh.ReadAt(buf, r.Off); err != nil {
			return err
		}
		// Checked again: the scan saw these bytes, this is a second read.
		if err := checkValue(ev.h, buf); err != nil {
			return corruptf(n, ev.off, "%v", err)
		}
		nr, err := l.Append(ev.h.owner, ev.h.kind, buf[HeaderSize:])
		if err != nil {
			return err
		}
		moves = append(moves, Move{Owner: ev.h.owner, Kind: ev.h.kind, Old: r, New: nr})
		if batch += HeaderSize + int(r.Len); batch >= l.batch {
			batch = 0
			return l.Sync()
		}
		return nil
	}
	decide := func() error {
		if len(held) == 0 {
			return nil
		}
		recs = recs[:0]
		for _, ev := range held {
			recs = append(recs, Record{Owner: ev.h.owner, Kind: ev.h.kind, Ref: Ref{File: n, Off: ev.off, Len: ev.h.len}})
		}
		clear(keep)
		live(recs, keep[:len(recs)])
		for i, ev := range held {
			switch {
			case !keep[i]:
			case ev.torn:
				return corruptf(n, ev.off, "live %s of owner %d cut by the end of the file", ev.h.kind, ev.h.owner)
			case ev.err != nil:
				return corruptf(n, ev.off, "live %s of owner %d: %v", ev.h.kind, ev.h.owner, ev.err)
			default:
				if err := copyLive(ev); err != nil {
					return err
				}
			}
		}
		held = held[:0]
		return nil
	}
	err = scanFile(fh, size, func(ev event) error {
		switch {
		case ev.torn && !ev.hdrOK:
			return nil
		case ev.err != nil && !ev.hdrOK:
			return corruptf(n, ev.off, "damaged header: %v", ev.err)
		}
		if held = append(held, ev); len(held) == liveBatch {
			return decide()
		}
		return nil
	})
	if err == nil {
		err = decide()
	}
	if err != nil {
		return nil, err
	}
	if err := l.Sync(); err != nil {
		return nil, err
	}
	return moves, nil
}

// Remove deletes file n. Reads of n that are running finish first (Remove
// waits for them); Reads that begin after Remove fail with ErrMissing. The
// file appends go to, or one with unsynced appends, is refused with
// ErrActive. Remove keeps the highest file number on disk, creating an
// empty head file if it must, so that a reopened log never reuses n.
func (l *Log) Remove(n uint32) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	f := l.files[n]
	switch {
	case f == nil || f.removed:
		l.mu.Unlock()
		return fmt.Errorf("%w: no file %s", ErrMissing, fileName(n))
	case n >= l.synced.file || n >= l.head.file:
		l.mu.Unlock()
		return fmt.Errorf("%w: %s is where appends go", ErrActive, fileName(n))
	}
	f.removed = true
	if f.readers > 0 && l.removeWaiting != nil {
		l.removeWaiting(n)
	}
	for f.readers > 0 {
		l.gone.Wait()
	}
	if l.closed {
		f.removed = false
		l.mu.Unlock()
		return ErrClosed
	}
	higher := false
	for m, g := range l.files {
		if m > n && g.f != nil && !g.removed {
			higher = true
		}
	}
	l.mu.Unlock()

	if !higher {
		// Keep a file numbered past n on disk: Open numbers the next
		// file after the highest it finds.
		if err := l.keepHead(); err != nil {
			l.undoRemove(f)
			return err
		}
	}
	l.mu.Lock()
	h := f.f
	f.f = nil // Close must not close it again
	l.mu.Unlock()
	if h != nil {
		h.Close()
	}
	if err := l.fs.Remove(l.path(n)); err != nil {
		// The file stays, readable, for Remove to try again.
		h, oerr := l.fs.Open(l.path(n))
		l.mu.Lock()
		if oerr == nil {
			f.f, f.removed = h, false
		} else {
			delete(l.files, n)
		}
		l.mu.Unlock()
		return err
	}
	l.mu.Lock()
	delete(l.files, n)
	l.mu.Unlock()
	// A removal a crash undoes leaves a file no ref points into.
	return l.syncDir()
}

func (l *Log) undoRemove(f *file) {
	l.mu.Lock()
	f.removed = false
	l.mu.Unlock()
}

// keepHead creates the head file empty and syncs the directory, under
// syncMu as Sync creates files.
func (l *Log) keepHead() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return err
	}
	n := l.head.file
	h := l.files[n]
	if h == nil {
		h = &file{num: n}
		l.files[n] = h
	}
	l.mu.Unlock()
	if h.f != nil {
		return nil
	}
	fh, err := l.fs.OpenFile(l.path(n), os.O_RDWR|os.O_CREATE, 0o644)
	if err == nil {
		err = l.syncDir()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if fh != nil {
		h.f = fh
	}
	if err != nil {
		l.failed = err
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	return nil
}

// Close closes the files. Values appended since the last Sync are lost;
// it does not sync them. Running Reads, Scans and Compacts end first
// (a Compact with ErrClosed), then a running Sync. Calls after Close fail
// with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	for _, f := range l.files {
		if f.readers > 0 && l.closeWaiting != nil {
			l.closeWaiting()
			l.closeWaiting = nil
		}
		for f.readers > 0 {
			l.gone.Wait()
		}
	}
	l.mu.Unlock()
	// Not held while waiting for readers: a Compact syncs its copies.
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	for _, f := range l.files {
		if f.f != nil {
			if cerr := f.f.Close(); err == nil {
				err = cerr
			}
			f.f = nil
		}
	}
	l.pending = nil
	return err
}
