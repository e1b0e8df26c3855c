package wal

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/docketdb/docket/internal/vfs"
)

// This file is the segment store under the Log: the files of the Files
// section of doc.go, written and read the way tidwall/wal v1.2.1 does, so a
// directory written by either opens with the other. Records reach the tail
// segment straight from the Log's pending buffer, which already holds them
// framed; nothing of a segment is kept in memory but a sparse index.

// markEvery is how many records apart the sparse index of a segment marks
// offsets: a random Read skips at most markEvery-1 entries from a mark, and
// the index costs 8 bytes per markEvery records.
const markEvery = 64

// Read-ahead of a segment reader: Replay reads whole segments, Read the
// entries from a mark to its record (64 of 150 bytes fit in 16 KiB).
const (
	replayBufSize = 64 << 10
	readBufSize   = 16 << 10
)

// segment is one segment file of an open Log.
type segment struct {
	first uint64 // sequence number of its first record: its name
	path  string
	size  int64 // bytes in the file once it is no longer the tail

	// marks[i] is the offset of record first+i*markEvery, for every record
	// the file holds, once indexed is set. A segment the Log started is
	// indexed as it is written; one found on Open or rewritten by a
	// truncation is indexed the first time Read needs it.
	marks   []int64
	indexed bool
}

// segmentFile is what the Log needs of a file it writes: the tail segment,
// a truncation's temporary file. Options.openFile makes them, so that tests
// can make them fail.
type segmentFile interface {
	io.Writer
	io.WriterAt
	Sync() error
	// Datasync makes the file's data durable, and of its metadata only
	// what reading the data back needs (fdatasync where there is one).
	Datasync() error
	Truncate(size int64) error
	Close() error
}

// Flags for opening a tail segment. Appends are written at the end of the
// records, which may lie before the end of the file (see reserve), so the
// file is not opened to append.
const (
	tailFlags   = os.O_RDWR                            // read too: a mapping needs it (mapTail)
	createFlags = os.O_CREATE | os.O_RDWR | os.O_TRUNC // a new segment, as tidwall/wal creates one
)

// zeros is what reserve fills a tail's spare space with.
var zeros = make([]byte, 64<<10)

// reserve makes sure the tail file has room for n more bytes of entries
// beyond its records: when it has not, it writes zeros from the end of the
// file to Options.Preallocate bytes past them (never past the segment's
// size, unless the entries themselves go past it). An fsync of entries
// written over zeros that are on disk already has no file size or block
// allocation to make durable with them, only the data, and on most file
// systems takes far less time than one that extends the file: the cost of
// growing the file is paid once per Preallocate bytes instead of once per
// commit. Open reads an all-zero remainder of the tail as spare space, not
// damage, and the segment is cut to its records when it is closed. It
// holds wmu.
func (l *Log) reserve(n int64) error {
	need := l.tailSize + n
	if need <= l.tailAlloc {
		return nil
	}
	if l.opts.Preallocate <= 0 {
		l.tailAlloc = need // entries are appended as they come
		return nil
	}
	want := max(need, min(need+l.opts.Preallocate, int64(l.opts.SegmentSize)))
	for off := l.tailAlloc; off < want; {
		k := min(int64(len(zeros)), want-off)
		if _, err := l.file.WriteAt(zeros[:k], off); err != nil {
			return err
		}
		off += k
		l.tailAlloc = off
	}
	return nil
}

// trimTail cuts the tail file to its records, dropping the spare space
// reserve added, and fsyncs it: what a segment looks like once the Log is
// done with it. It holds wmu.
func (l *Log) trimTail() error {
	l.unmapTail() // nothing may touch the mapping past the cut
	l.tmapHeld = 0
	if l.tailAlloc > l.tailSize {
		if err := l.file.Truncate(l.tailSize); err != nil {
			return err
		}
		l.tailAlloc = l.tailSize
	}
	return l.file.Sync()
}

// tail returns the tail segment. It holds wmu.
func (l *Log) tail() *segment { return l.segs[len(l.segs)-1] }

// findSegment returns the index of the segment that holds seq: the last one
// starting at or before it. It holds wmu.
func (l *Log) findSegment(seq uint64) int {
	i, j := 0, len(l.segs)
	for i < j {
		h := int(uint(i+j) >> 1)
		if seq >= l.segs[h].first {
			i = h + 1
		} else {
			j = h
		}
	}
	return max(i-1, 0)
}

// segEnd returns how many bytes of entries s holds. It holds wmu.
func (l *Log) segEnd(s *segment) int64 {
	if s == l.tail() {
		return l.tailSize
	}
	return s.size
}

// writeEntries writes the pending entries to the tail segment, one write
// call per segment they land in. Like tidwall/wal it starts a new segment
// before the batch when the tail is already over SegmentSize (a log opened
// with a smaller size than it was written with), and right after any entry
// that brings the tail to SegmentSize. It reports whether it started one.
// It holds wmu.
func (l *Log) writeEntries(p *pending) (cycled bool, err error) {
	limit := int64(l.opts.SegmentSize)
	if l.tailSize > limit {
		if err := l.cycle(p.first); err != nil {
			return false, err
		}
		cycled = true
	}
	from := 0 // index in p.ends of the first entry not yet written
	for i, end := range p.ends {
		if l.tailSize+int64(end-p.start(from)) < limit {
			continue
		}
		if err := l.writeTail(p, from, i+1); err != nil {
			return cycled, err
		}
		if err := l.cycle(p.first + uint64(i) + 1); err != nil {
			return cycled, err
		}
		cycled, from = true, i+1
	}
	if from < len(p.ends) {
		if err := l.writeTail(p, from, len(p.ends)); err != nil {
			return cycled, err
		}
	}
	return cycled, nil
}

// writeTail writes entries i..j-1 of p to the tail segment with one write
// call. It holds wmu.
func (l *Log) writeTail(p *pending, i, j int) error {
	start, end := p.start(i), p.ends[j-1]
	if err := l.reserve(int64(end - start)); err != nil {
		return err
	}
	var n int
	var err error
	if m := l.mapTail(l.tailSize + int64(end-start)); m != nil {
		n = copy(m[l.tailSize:], p.buf[start:end])
	} else {
		n, err = l.file.WriteAt(p.buf[start:end], l.tailSize)
	}
	l.bytes.Add(uint64(n))
	if err != nil {
		return err
	}
	t := l.tail()
	if t.indexed {
		// The first of these records that falls on a mark, then every
		// markEvery-th.
		seq := p.first + uint64(i)
		k := (markEvery - (seq-t.first)%markEvery) % markEvery
		for ; i+int(k) < j; k += markEvery {
			t.marks = append(t.marks, l.tailSize+int64(p.start(i+int(k))-start))
		}
	}
	l.tailSize += int64(end - start)
	l.written.Store(p.first + uint64(j) - 1)
	return nil
}

// cycle closes the tail segment, fsynced, and starts the next one at next,
// as tidwall/wal does: only the newest segment can hold unsynced data. The
// caller fsyncs the directory. It holds wmu.
func (l *Log) cycle(next uint64) error {
	if err := l.trimTail(); err != nil {
		return err
	}
	if err := l.file.Close(); err != nil {
		return err
	}
	l.file = nil
	path := filepath.Join(l.dir, segmentName(next))
	f, err := l.opts.openFile(path, createFlags, filePerm)
	if err != nil {
		return err
	}
	l.tail().size = l.tailSize
	l.file, l.tailSize, l.tailAlloc = f, 0, 0
	l.segs = append(l.segs, &segment{first: next, path: path, indexed: true})
	return nil
}

// entryReader reads the entries of one segment file in order, from a given
// offset up to the end of what the Log knows the file holds.
type entryReader struct {
	f    vfs.File
	off  int64 // offset of the next entry
	end  int64 // offset past the last entry
	size int   // read-ahead
	sr   io.SectionReader
	br   *bufio.Reader
	buf  []byte // the last record read
}

// reset makes r read f's entries from off up to end.
func (r *entryReader) reset(f vfs.File, off, end int64) {
	r.f, r.off, r.end = f, off, end
	r.sr = *io.NewSectionReader(f, off, end-off)
	if r.br == nil {
		r.br = bufio.NewReaderSize(&r.sr, cmp.Or(r.size, readBufSize))
	} else {
		r.br.Reset(&r.sr)
	}
}

// done reports whether r is at the end.
func (r *entryReader) done() bool { return r.off >= r.end }

// header decodes the length prefix of the next entry: k bytes announcing a
// record of size bytes. A file shorter than the Log knows it to be shows as
// a fault too: it changed behind the Log's back.
func (r *entryReader) header() (size uint64, k int, f fault, err error) {
	b, err := r.br.Peek(int(min(binary.MaxVarintLen64, r.end-r.off)))
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, faultNone, err
	}
	size, k = binary.Uvarint(b)
	switch {
	case k == 0:
		return 0, 0, faultShortLen, nil
	case k < 0 || k != uvarintLen(size):
		return 0, 0, faultBadLen, nil
	case size > uint64(r.end-r.off-int64(k)):
		return 0, 0, faultPastEnd, nil
	}
	return size, k, faultNone, nil
}

// next reads the next entry and returns its record, valid until the next
// call.
func (r *entryReader) next() ([]byte, fault, error) {
	size, k, f, err := r.header()
	if f != faultNone || err != nil {
		return nil, f, err
	}
	r.br.Discard(k)
	if uint64(cap(r.buf)) < size {
		r.buf = make([]byte, size)
	}
	r.buf = r.buf[:size]
	if _, err := io.ReadFull(r.br, r.buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, faultPastEnd, nil
		}
		return nil, faultNone, err
	}
	r.off += int64(k) + int64(size)
	return r.buf, faultNone, nil
}

// skip steps over the next entry without reading its record from the file
// unless it is already buffered.
func (r *entryReader) skip() (fault, error) {
	size, k, f, err := r.header()
	if f != faultNone || err != nil {
		return f, err
	}
	n := int64(k) + int64(size)
	if n <= int64(r.br.Buffered()) {
		r.br.Discard(int(n))
		r.off += n
	} else {
		r.reset(r.f, r.off+n, r.end)
	}
	return faultNone, nil
}

// cursor is Read's open segment: a reader positioned at record next of seg.
type cursor struct {
	seg  *segment
	next uint64
	r    entryReader
}

// dropCursor closes Read's file, before a truncation replaces or removes
// segments. It holds wmu.
func (l *Log) dropCursor() {
	if c := &l.cur; c.seg != nil {
		c.r.f.Close()
		c.seg, c.r.f = nil, nil
	}
}

// position leaves Read's cursor at record seq, which the log holds, and
// returns its segment. With index set it first indexes the segment if it is
// not yet. Damage found on the way is returned as the fault. It holds wmu.
func (l *Log) position(seq uint64, index bool) (*segment, fault, error) {
	s := l.segs[l.findSegment(seq)]
	c := &l.cur
	end := l.segEnd(s)
	switch {
	case c.seg != s:
		l.dropCursor()
		f, err := l.opts.FS.Open(s.path)
		if err != nil {
			return nil, faultNone, err
		}
		c.seg, c.next = s, s.first
		c.r.reset(f, 0, end)
	case c.r.end != end:
		c.r.reset(c.r.f, c.r.off, end) // the tail grew
	}
	if index && !s.indexed {
		if f, err := l.index(s); f != faultNone || err != nil {
			c.next = 0
			return s, f, err
		}
	}
	// Start from the nearest mark at or before seq, unless the cursor is
	// already between it and seq (the common case of reading in order).
	from, off := s.first, int64(0)
	if s.indexed {
		m := (seq - s.first) / markEvery
		from, off = s.first+m*markEvery, s.marks[m]
	}
	if c.next == 0 || c.next < from || c.next > seq {
		c.r.reset(c.r.f, off, end)
		c.next = from
	}
	for c.next < seq {
		if f, err := c.r.skip(); f != faultNone || err != nil {
			c.next = 0
			return s, f, err
		}
		c.next++
	}
	return s, faultNone, nil
}

// index builds the sparse index of s from its file through Read's cursor,
// which is open on it. It holds wmu.
func (l *Log) index(s *segment) (fault, error) {
	c := &l.cur
	c.r.reset(c.r.f, 0, c.r.end)
	c.next = 0
	var marks []int64
	for seq := s.first; !c.r.done(); seq++ {
		if (seq-s.first)%markEvery == 0 {
			marks = append(marks, c.r.off)
		}
		if f, err := c.r.skip(); f != faultNone || err != nil {
			return f, err
		}
	}
	s.marks, s.indexed = marks, true
	c.r.reset(c.r.f, 0, c.r.end)
	c.next = s.first
	return faultNone, nil
}

// atomicWrite writes name with what src holds by way of a temporary file,
// fsynced and then renamed into place, as tidwall/wal does for the segment
// a truncation rewrites. It returns the bytes written.
func (l *Log) atomicWrite(name string, src io.Reader) (int64, error) {
	temp := name + tempSuffix
	defer l.opts.FS.Remove(temp) // gone already once renamed
	f, err := l.opts.openFile(temp, os.O_CREATE|os.O_RDWR|os.O_TRUNC, filePerm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, src)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	return n, l.opts.FS.Rename(temp, name)
}

// truncateFront removes every record before seq, first < seq <= last+1,
// with every appended record written: the segment holding seq is rewritten
// to start there (as <seq>.START, then renamed to <seq>) and the ones before
// it are removed, in tidwall/wal's order, which Open knows how to finish
// after a crash. The caller fsyncs the directory. It holds wmu.
func (l *Log) truncateFront(seq uint64) error {
	i := len(l.segs) - 1
	var src io.Reader = eofReader{}
	if seq <= l.written.Load() {
		s, f, err := l.position(seq, false)
		if err == nil && f != faultNone {
			err = l.locate(seq, f.String())
		}
		if err != nil {
			return err
		}
		i = l.findSegment(seq)
		src = io.NewSectionReader(l.cur.r.f, l.cur.r.off, l.segEnd(s)-l.cur.r.off)
	}
	name := filepath.Join(l.dir, segmentName(seq))
	n, err := l.atomicWrite(name+startSuffix, src)
	l.dropCursor()
	if err != nil {
		return err
	}
	tail := i == len(l.segs)-1
	if tail {
		if err := l.closeFile(); err != nil {
			return err
		}
	}
	for _, s := range l.segs[:i+1] {
		if err := l.opts.FS.Remove(s.path); err != nil {
			return err
		}
	}
	if err := l.opts.FS.Rename(name+startSuffix, name); err != nil {
		return err
	}
	s := &segment{first: seq, path: name, size: n}
	l.segs = append([]*segment{s}, l.segs[i+1:]...)
	if tail {
		return l.openTail(n, n)
	}
	return nil
}

// truncateBack removes every record after seq, first-1 <= seq < last, with
// every appended record written: the segment holding seq is rewritten to end
// there (as <name>.END, then renamed over <name>) and the ones after it are
// removed, in tidwall/wal's order. The caller fsyncs the directory. It holds
// wmu.
func (l *Log) truncateBack(seq uint64) error {
	i := 0
	var src io.Reader = eofReader{}
	if seq >= l.first.Load() {
		_, f, err := l.position(seq, false)
		if err == nil && f == faultNone {
			f, err = l.cur.r.skip()
		}
		if err == nil && f != faultNone {
			err = l.locate(seq, f.String())
		}
		if err != nil {
			return err
		}
		i = l.findSegment(seq)
		src = io.NewSectionReader(l.cur.r.f, 0, l.cur.r.off)
	}
	s := l.segs[i]
	n, err := l.atomicWrite(s.path+endSuffix, src)
	l.dropCursor()
	if err != nil {
		return err
	}
	if err := l.closeFile(); err != nil {
		return err
	}
	for _, s := range l.segs[i:] {
		if err := l.opts.FS.Remove(s.path); err != nil {
			return err
		}
	}
	if err := l.opts.FS.Rename(s.path+endSuffix, s.path); err != nil {
		return err
	}
	l.segs = append(l.segs[:i:i], &segment{first: s.first, path: s.path})
	return l.openTail(n, n)
}

// openTail opens the tail segment for appending; it holds size bytes of
// entries in a file of alloc bytes, zeros after them. It holds wmu.
func (l *Log) openTail(size, alloc int64) error {
	f, err := l.opts.openFile(l.tail().path, tailFlags, filePerm)
	if err != nil {
		return err
	}
	l.file, l.tailSize, l.tailAlloc = f, size, max(alloc, size)
	return nil
}

// mapTail returns the tail's file mapped into memory over at least its
// first need bytes, or nil when it cannot be: then entries are written
// with write calls. A copy into the mapping puts the bytes in the page
// cache as a write does (a process crash loses nothing copied; an fsync
// of the file makes them durable), without a system call per write. Only
// bytes the file holds are touched (a mapping faults past the file's
// end): need is within tailAlloc, which reserve grew with zeros written,
// so the tail is mapped only when the Log preallocates. The mapping
// covers the segment's size and its preallocation, so that it is made
// once per segment. It holds wmu.
func (l *Log) mapTail(need int64) []byte {
	if l.tmapFile != l.file {
		l.unmapTail()
		l.tmapFile, l.tmapNo, l.tmapHeld = l.file, false, 0
	}
	if need <= l.tmapHeld && int64(len(l.tmap)) >= need {
		return l.tmap
	}
	if l.tmapNo || l.opts.Preallocate <= 0 || need > l.tailAlloc {
		return nil
	}
	mf, ok := l.file.(mappable)
	if !ok {
		l.tmapNo = true
		return nil
	}
	// What the file holds, asked of the file itself: bytes past its end
	// would be lost in the mapping's last page, or fault.
	fi, err := mf.Stat()
	if err != nil {
		l.tmapNo = true
		return nil
	}
	if l.tmapHeld = fi.Size(); need > l.tmapHeld {
		return nil // the write call grows the file
	}
	if int64(len(l.tmap)) >= need {
		return l.tmap
	}
	l.unmapTail()
	b, err := mf.Map(int(max(l.tailAlloc, int64(l.opts.SegmentSize)+l.opts.Preallocate)))
	if err != nil {
		l.tmapNo = true // a file system that cannot map: write calls
		return nil
	}
	l.tmap = b
	return b
}

// mappable is a tail file mapTail can map.
type mappable interface {
	vfs.Mapper
	Stat() (fs.FileInfo, error)
}

// unmapTail removes the tail's mapping, if there is one. It holds wmu.
func (l *Log) unmapTail() {
	if l.tmap != nil {
		vfs.Unmap(l.tmap)
		l.tmap = nil
	}
}

// closeFile closes the tail segment's file. It holds wmu.
func (l *Log) closeFile() error {
	l.unmapTail()
	f := l.file
	l.file = nil
	if f == nil {
		return nil
	}
	return f.Close()
}

// eofReader is an empty reader: the content of a segment a truncation
// empties.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// errTruncated says that records a Replay was reading were truncated away.
func errTruncated(seq uint64) error {
	return fmt.Errorf("wal: replay: record %d was truncated away during the replay", seq)
}
