// Package session is the framing of docket's session protocol: the bytes
// that open a session, the frames that carry its messages, a writer that
// coalesces the frames of concurrent senders into few writes, and a
// poller that waits a little for the peer's next frame without sleeping. The
// messages themselves (Hello, Welcome, Call, Reply) are in
// proto/docket/v1/session.proto; what a call does is the server's and the
// client's business.
//
// A session runs over TCP or TLS on the server's API port. In cleartext
// the client's first bytes are Preface, which no HTTP/1.1 request, the
// HTTP/2 preface or a TLS record begins with, so that one listener serves
// both; under TLS the client asks for the ALPN protocol ALPN instead. Then
// each side writes frames: the length of a message as a uvarint, then the
// message's protobuf bytes. The client's first frame is a Hello and the
// server's a Welcome; after that the client writes Calls and the server
// Replies, each side as fast as it likes.
package session

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
)

// Version is the protocol version this package speaks.
const Version = 1

// Preface opens a session in cleartext: "DKT" and the version.
const Preface = "DKT\x01"

// ALPN is the TLS application protocol of a session.
const ALPN = "docket/1"

// BufSize is the size of the buffered reader and the initial size of the
// writer's buffer on each side.
const BufSize = 64 << 10

// MaxHelloBytes bounds the first frame of a session (a Hello or a
// Welcome): a token and a few names.
const MaxHelloBytes = 16 << 10

// ErrFrameTooLarge is the error of a frame longer than the reader's bound.
var ErrFrameTooLarge = errors.New("docket: session frame too large")

// ErrBadFrame is the error of bytes that are not a frame: a length that
// is not a uvarint of at most 10 bytes.
var ErrBadFrame = errors.New("docket: malformed session frame")

// IsPreface reports whether b, the first bytes a client sent, begin a
// session; b needs at least len(Preface) bytes.
func IsPreface(b []byte) bool {
	return len(b) >= len(Preface) && string(b[:len(Preface)]) == Preface
}

// ReadFrame reads one frame from r and returns its message's bytes, in
// buf when it is large enough (the caller must be done with them before
// the next read into buf). A frame longer than max is refused with
// ErrFrameTooLarge before anything is allocated or read past its length.
// At a frame's boundary the end of r is io.EOF; within a frame it is
// io.ErrUnexpectedEOF.
func ReadFrame(r *bufio.Reader, max int, buf []byte) ([]byte, error) {
	n, err := ReadLen(r, max)
	if err != nil {
		return nil, err
	}
	return ReadBody(r, n, buf)
}

// ReadLen reads the length of a frame from r: ReadFrame's first half, for
// a reader that decides what to do before the frame's bytes are read. A
// length over max is ErrFrameTooLarge.
func ReadLen(r *bufio.Reader, max int) (int, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, err
		}
		return 0, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	if n > uint64(max) {
		return 0, fmt.Errorf("%w: %d bytes, at most %d", ErrFrameTooLarge, n, max)
	}
	return int(n), nil
}

// ReadBody reads the n bytes of a frame whose length ReadLen read, in buf
// when it is large enough. The end of r is io.ErrUnexpectedEOF. A frame
// larger than buf is read into a buffer that grows as its bytes arrive,
// so that what a peer makes the reader hold is what it sent, not what its
// length announced.
func ReadBody(r *bufio.Reader, n int, buf []byte) ([]byte, error) {
	if cap(buf) < n {
		buf = make([]byte, 0, min(n, BufSize))
	}
	buf = buf[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		k, err := r.Read(buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+k]
		if err != nil && len(buf) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// FrameBuffered reports whether a whole frame is in r's buffer, so that
// ReadFrame would return it without reading from r's source.
func FrameBuffered(r *bufio.Reader) bool {
	b, _ := r.Peek(r.Buffered()) // no read: at most what is buffered
	n, k := binary.Uvarint(b)
	return k > 0 && uint64(len(b)-k) >= n
}

// AppendFrame appends m to b as a frame.
func AppendFrame(b []byte, m proto.Message) ([]byte, error) {
	o := proto.MarshalOptions{UseCachedSize: true}
	n := o.Size(m)
	b = binary.AppendUvarint(b, uint64(n))
	return o.MarshalAppend(b, m)
}

// WriteFrame writes m to w as one frame.
func WriteFrame(w io.Writer, m proto.Message) error {
	b, err := AppendFrame(nil, m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// ReadMessage reads one frame of at most max bytes from r into m.
func ReadMessage(r *bufio.Reader, max int, m proto.Message) error {
	b, err := ReadFrame(r, max, nil)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	return nil
}
