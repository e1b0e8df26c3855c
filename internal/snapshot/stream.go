package snapshot

import (
	"io"
)

// streamName names a stream in errors, where a file would have its path.
const streamName = "snapshot stream"

// Encode writes a snapshot of the state as of seq to w, in the format of a
// snapshot file (header, the records fill adds, trailer), and returns the
// bytes written. It is the form a snapshot takes when something other than
// a directory keeps it, such as a replicated log's snapshot store; Write is
// the same bytes made durable under a file name.
func Encode(w io.Writer, seq uint64, fill func(w *Writer) error) (int64, error) {
	sw := newWriter(w, writeBufSize)
	defer sw.release()
	sw.writeHeader(seq)
	if sw.err != nil {
		return sw.size, sw.err
	}
	if fill != nil {
		if err := fill(sw); err != nil {
			return sw.size, err
		}
	}
	err := sw.finish(seq)
	return sw.size, err
}

// Decode reads a snapshot that Encode (or Write) wrote from r, streaming
// its records to fn as Read does, and returns its seq and record count. It
// reads r to the end: bytes after the trailer are corrupt. Its size being
// unknown, a record is allocated as its bytes arrive, never from its length
// field alone.
func Decode(r io.Reader, fn func(rec []byte) error) (seq uint64, n int, err error) {
	d := decoder{path: streamName, size: -1, br: newReader(r, maxReadBuf)}
	defer releaseReader(d.br)
	seq, n, err = d.decode(fn)
	if err != nil {
		return 0, 0, err
	}
	return seq, n, nil
}
