package vlog

import (
	"errors"
	"fmt"
	"io"
)

// blockSize is how much a scan reads at once.
const blockSize = 256 << 10

// blockReader reads a file sequentially in blocks; the slice bytes
// returns is valid until its next call.
type blockReader struct {
	r    io.ReaderAt
	size int64
	buf  []byte
	off  int64 // file offset of buf[0]
}

// bytes returns the n bytes at off, fewer at the end of the file.
func (br *blockReader) bytes(off int64, n int) ([]byte, error) {
	if off >= br.size {
		return nil, nil
	}
	if rem := br.size - off; int64(n) > rem {
		n = int(rem)
	}
	if off >= br.off && off+int64(n) <= br.off+int64(len(br.buf)) {
		return br.buf[off-br.off : off-br.off+int64(n)], nil
	}
	want := max(n, blockSize)
	if rem := br.size - off; int64(want) > rem {
		want = int(rem)
	}
	if cap(br.buf) < want {
		br.buf = make([]byte, want)
	}
	br.buf = br.buf[:want]
	got, err := br.r.ReadAt(br.buf, off)
	if got < want {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		br.buf = br.buf[:0]
		return nil, err
	}
	br.off = off
	return br.buf[:n], nil
}

// event is what a scan finds at an offset: an intact record, a damaged
// one, or the torn tail a crash leaves.
type event struct {
	off   int64
	h     header // zero for a damaged header or a torn tail
	size  int64  // bytes the event spans
	err   error  // nil for an intact record
	torn  bool
	hdrOK bool // h was read from an intact header (the value is damaged)
}

// scanFile walks the records of a file of size bytes in order and calls
// fn for each event. A record whose header is intact but whose value fails
// its checksum is skipped by its length. After a damaged header it looks
// for the next offset where an intact header starts and goes on from
// there. Damage after which no intact record follows is the torn tail.
func scanFile(r io.ReaderAt, size int64, fn func(ev event) error) error {
	// Damage is held back until an intact record follows it; at the end
	// of the file it is the torn tail: a crash during a write can leave a
	// whole header followed by zeros, which fails as a damaged value.
	var held []event
	flush := func(torn bool) error {
		if torn && len(held) > 0 {
			// One torn tail, from the first damage to the end.
			ev := held[0]
			ev.torn, ev.size = true, size-ev.off
			held = append(held[:0], ev)
		}
		for _, ev := range held {
			if err := fn(ev); err != nil {
				return err
			}
		}
		held = held[:0]
		return nil
	}
	if err := scanEvents(r, size, func(ev event) error {
		if ev.err != nil {
			held = append(held, ev)
			return nil
		}
		if err := flush(false); err != nil {
			return err
		}
		return fn(ev)
	}); err != nil {
		return err
	}
	return flush(true)
}

func scanEvents(r io.ReaderAt, size int64, fn func(ev event) error) error {
	br := &blockReader{r: r, size: size}
	off := int64(0)
	for off < size {
		hb, err := br.bytes(off, HeaderSize)
		if err != nil {
			return err
		}
		h, herr := decodeHeader(hb)
		if herr != nil {
			next, err := resync(br, off+1)
			if err != nil {
				return err
			}
			ev := event{off: off, size: next - off, err: herr}
			if err := fn(ev); err != nil {
				return err
			}
			off = next
			continue
		}
		end := off + HeaderSize + int64(h.len)
		if end > size {
			return fn(event{off: off, h: h, size: size - off, hdrOK: true,
				err: fmt.Errorf("value of %d bytes cut by the end of the file at %d", h.len, size)})
		}
		rec, err := br.bytes(off, int(end-off))
		if err != nil {
			return err
		}
		ev := event{off: off, h: h, size: end - off, hdrOK: true}
		ev.err = checkValue(h, rec)
		if err := fn(ev); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// resync returns the first offset from off on where an intact header
// starts, or the end of the file.
func resync(br *blockReader, off int64) (int64, error) {
	for ; off+HeaderSize <= br.size; off++ {
		b, err := br.bytes(off, HeaderSize)
		if err != nil {
			return 0, err
		}
		if validHeader(b) {
			return off, nil
		}
	}
	return br.size, nil
}
