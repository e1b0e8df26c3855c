package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"sync"

	"github.com/docketdb/docket/internal/vfs"
)

// maxReadBuf bounds the read buffer; records that fit in it are handed to fn
// straight from the buffer without a copy.
const maxReadBuf = 1 << 20

// readers keeps the read buffers of maxReadBuf of the snapshots read, for
// the next read (the one of any size that finds one there); smaller ones,
// sized to their file, are not kept. The pool lets the collector free
// them once reads stop.
var readers sync.Pool

// newReader returns a reader of r buffering size bytes, or more: a kept
// buffer of maxReadBuf when there is one. It is never r itself (as
// bufio.NewReaderSize returns a large enough *bufio.Reader), so that
// releaseReader never keeps a caller's reader.
func newReader(r io.Reader, size int) *bufio.Reader {
	if br, ok := readers.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	br := bufio.NewReaderSize(nil, size)
	br.Reset(r)
	return br
}

// releaseReader keeps br, from newReader, for the next read if its buffer
// is of maxReadBuf, no longer holding what it read.
func releaseReader(br *bufio.Reader) {
	if br.Size() == maxReadBuf {
		br.Reset(nil)
		readers.Put(br)
	}
}

// Read streams the records of the snapshot at path to fn and returns the
// snapshot's seq and record count.
//
// Each record's checksum is verified before fn sees it, but the trailer
// (record count, stream checksum, seq) can only be checked after the last
// record, so fn sees records before the file as a whole is known to be good:
// if Read returns an error, the caller must discard whatever it built. rec is
// only valid during the call to fn. A nil fn just verifies.
//
// Any validation failure returns an error wrapping ErrCorrupt that names the
// file and byte offset. An error from fn is returned as is and stops the read.
// On error seq and n are zero.
func Read(path string, fn func(rec []byte) error) (seq uint64, n int, err error) {
	return ReadFS(vfs.Default, path, fn)
}

// ReadFS is Read on fsys.
func ReadFS(fsys vfs.FS, path string, fn func(rec []byte) error) (seq uint64, n int, err error) {
	f, err := fsys.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, 0, fmt.Errorf("snapshot: %s is not a regular file", path)
	}
	// The stream CRC covers the file's bytes from the first record to the
	// trailer's marker: computed as the file is read, in the reader's
	// large blocks, it costs a third of a record at a time.
	cr := &crcReader{r: f, lo: int64(headerSize), hi: st.Size() - int64(trailerSize)}
	d := decoder{
		path:   path,
		size:   st.Size(),
		br:     newReader(cr, int(min(max(st.Size(), 16), maxReadBuf))),
		stream: cr,
	}
	defer releaseReader(d.br)
	d.nameSeq, d.named = parseName(filepath.Base(path), snapExt)
	seq, n, err = d.decode(fn)
	if err != nil {
		return 0, 0, err
	}
	return seq, n, nil
}

// Verify checks the snapshot at path end to end without keeping its records.
func Verify(path string) (seq uint64, n int, err error) {
	return Read(path, nil)
}

// LoadNewest reads the snapshot with the highest seq in dir, streaming its
// records to fn as Read does. It returns ErrNotFound if dir holds none.
//
// It does not fall back to an older snapshot when the newest is corrupt: the
// log may already be truncated past the older one, and replaying from it
// would silently lose acknowledged writes. An operator who decides otherwise
// can use List and Read.
func LoadNewest(dir string, fn func(rec []byte) error) (Info, int, error) {
	infos, err := List(dir)
	if err != nil {
		return Info{}, 0, err
	}
	if len(infos) == 0 {
		return Info{}, 0, fmt.Errorf("%w in %s", ErrNotFound, dir)
	}
	newest := infos[0]
	_, n, err := Read(newest.Path, fn)
	if err != nil {
		return Info{}, 0, err
	}
	return newest, n, nil
}

type decoder struct {
	path    string
	size    int64 // -1 for a stream of unknown size
	off     int64 // offset of the next byte br returns
	br      *bufio.Reader
	nameSeq uint64
	named   bool
	big     []byte // records too large for br's buffer; grown to fit, reused
	peeked  int    // bytes of the current record still to discard

	// frame holds the current record's length varint and then its CRC, as
	// they appear in the file, for the stream CRC.
	frame  [binary.MaxVarintLen64 + crcSize]byte
	frameN int
	// stream, for a file, computes the stream CRC over the bytes read
	// from it; nil for a stream, whose CRC is computed record by record.
	stream *crcReader
}

// crcReader computes the CRC of the bytes at offsets lo to hi of what it
// reads from r.
type crcReader struct {
	r      io.Reader
	off    int64
	lo, hi int64
	crc    uint32
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if a, b := max(c.off, c.lo), min(c.off+int64(n), c.hi); a < b {
		c.crc = crc32.Update(c.crc, castagnoli, p[a-c.off:b-c.off])
	}
	c.off += int64(n)
	return n, err
}

func (d *decoder) corrupt(off int64, format string, args ...any) error {
	return corruptf(d.path, off, format, args...)
}

// readErr classifies a failed read: running out of bytes is a cut-off file;
// anything else is an I/O error, not corruption.
func (d *decoder) readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if d.size < 0 {
			return d.corrupt(d.off, "unexpected end of the stream")
		}
		return d.corrupt(d.off, "unexpected end of file (file is %d bytes)", d.size)
	}
	return fmt.Errorf("snapshot: read %s at offset %d: %w", d.path, d.off, err)
}

func (d *decoder) readFull(b []byte) error {
	n, err := io.ReadFull(d.br, b)
	d.off += int64(n)
	if err != nil {
		return d.readErr(err)
	}
	return nil
}

// uvarint reads a minimal unsigned varint, so that every accepted file has
// exactly one encoding.
func (d *decoder) uvarint() (uint64, error) {
	start := d.off
	var v uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		c, err := d.br.ReadByte()
		if err != nil {
			return 0, d.readErr(err)
		}
		d.off++
		d.frame[i] = c
		d.frameN = i + 1
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return 0, d.corrupt(start, "length varint overflows 64 bits")
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, d.corrupt(start, "length varint is not minimally encoded")
			}
			return v, nil
		}
	}
	panic("unreachable: the tenth varint byte either ends the varint or is rejected")
}

func (d *decoder) decode(fn func(rec []byte) error) (uint64, int, error) {
	if d.size >= 0 && d.size < int64(minFileSize) {
		return 0, 0, d.corrupt(d.size, "file is %d bytes, shorter than an empty snapshot (%d)", d.size, minFileSize)
	}
	var hdr [headerSize]byte
	if err := d.readFull(hdr[:]); err != nil {
		return 0, 0, err
	}
	if string(hdr[:len(magic)]) != magic {
		return 0, 0, d.corrupt(0, "bad magic %q", hdr[:len(magic)])
	}
	crcOff := headerSize - crcSize
	if got, want := crc32.Checksum(hdr[:crcOff], castagnoli), binary.LittleEndian.Uint32(hdr[crcOff:]); got != want {
		return 0, 0, d.corrupt(int64(crcOff), "header checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	if v := hdr[len(magic)]; v != version {
		return 0, 0, d.corrupt(int64(len(magic)), "unsupported format version %d (this build reads %d)", v, version)
	}
	seqOff := len(magic) + 1
	seq := binary.LittleEndian.Uint64(hdr[seqOff:])
	if d.named && seq != d.nameSeq {
		return 0, 0, d.corrupt(int64(seqOff), "header seq %d does not match file name seq %d", seq, d.nameSeq)
	}

	var (
		n      uint64
		stream uint32
	)
	for {
		start := d.off
		length, err := d.uvarint()
		if err != nil {
			return 0, 0, err
		}
		if length == trailerMarker {
			break
		}
		if length > MaxRecord {
			return 0, 0, d.corrupt(start, "record %d length %d exceeds MaxRecord (%d)", n, length, MaxRecord)
		}
		// Checked before any allocation: a record and a trailer must still fit.
		if d.size >= 0 && crcSize+length+trailerSize > uint64(d.size-d.off) {
			return 0, 0, d.corrupt(start, "record %d length %d runs past the end of the file (%d bytes)", n, length, d.size)
		}
		rec, want, err := d.record(int(length))
		if err != nil {
			return 0, 0, err
		}
		if got := crc32.Checksum(rec, castagnoli); got != want {
			return 0, 0, d.corrupt(start, "record %d checksum mismatch (stored %08x, computed %08x)", n, want, got)
		}
		if d.stream == nil {
			binary.LittleEndian.PutUint32(d.frame[d.frameN:], want)
			stream = crc32.Update(stream, castagnoli, d.frame[:d.frameN+crcSize])
			stream = crc32.Update(stream, castagnoli, rec)
		}
		if fn != nil {
			if err := fn(rec); err != nil {
				return 0, 0, err
			}
		}
		if err := d.done(); err != nil {
			return 0, 0, err
		}
		n++
	}

	markerOff := d.off - trailerMarkerSize
	checkStream := true
	if d.stream != nil {
		// A marker anywhere but where the trailer fits the file's end
		// fails the checks of the file's end below.
		stream, checkStream = d.stream.crc, markerOff == d.stream.hi
	}
	var tr [trailerSize - trailerMarkerSize]byte
	if err := d.readFull(tr[:]); err != nil {
		return 0, 0, err
	}
	if count := binary.LittleEndian.Uint64(tr[0:]); count != n {
		return 0, 0, d.corrupt(markerOff+trailerMarkerSize, "trailer says %d records, file holds %d", count, n)
	}
	if want := binary.LittleEndian.Uint32(tr[8:]); checkStream && want != stream {
		return 0, 0, d.corrupt(markerOff+trailerMarkerSize+8, "stream checksum mismatch (stored %08x, computed %08x)", want, stream)
	}
	if tseq := binary.LittleEndian.Uint64(tr[12:]); tseq != seq {
		return 0, 0, d.corrupt(markerOff+trailerMarkerSize+12, "trailer seq %d does not match header seq %d", tseq, seq)
	}
	if _, err := d.br.ReadByte(); err == nil {
		return 0, 0, d.corrupt(d.off, "unexpected bytes after the trailer")
	} else if err != io.EOF {
		return 0, 0, d.readErr(err)
	}
	if d.size >= 0 && d.off != d.size {
		// The file shrank or grew under us; what we read is not the file.
		return 0, 0, d.corrupt(d.off, "trailer ends at %d but the file is %d bytes", d.off, d.size)
	}
	return seq, int(n), nil
}

// record returns the next record's bytes and stored checksum without
// consuming them (see done). Records that fit in br's buffer are returned in
// place; larger ones are read into d.big, grown to exactly their length.
func (d *decoder) record(length int) (rec []byte, crc uint32, err error) {
	total := crcSize + length
	if total <= d.br.Size() {
		b, err := d.br.Peek(total)
		if err != nil {
			return nil, 0, d.readErr(err)
		}
		d.peeked = total
		return b[crcSize:], binary.LittleEndian.Uint32(b), nil
	}
	var c [crcSize]byte
	if err := d.readFull(c[:]); err != nil {
		return nil, 0, err
	}
	if d.size < 0 {
		// The length is not yet known to fit in what a stream holds: grow
		// with the bytes that arrive, so a damaged length cannot make the
		// decoder allocate what is not there.
		rec = d.big[:0]
		for len(rec) < length {
			k := min(length-len(rec), 1<<20)
			rec = slices.Grow(rec, k)
			if err := d.readFull(rec[len(rec) : len(rec)+k]); err != nil {
				return nil, 0, err
			}
			rec = rec[:len(rec)+k]
		}
		d.big = rec
		return rec, binary.LittleEndian.Uint32(c[:]), nil
	}
	if cap(d.big) < length {
		d.big = make([]byte, length)
	}
	rec = d.big[:length]
	if err := d.readFull(rec); err != nil {
		return nil, 0, err
	}
	return rec, binary.LittleEndian.Uint32(c[:]), nil
}

// done consumes a record returned by record. It runs after fn so a peeked
// record stays valid for the whole call.
func (d *decoder) done() error {
	if d.peeked == 0 {
		return nil // read into d.big, already consumed
	}
	n, err := d.br.Discard(d.peeked)
	d.peeked = 0
	d.off += int64(n)
	if err != nil {
		return d.readErr(err)
	}
	return nil
}
