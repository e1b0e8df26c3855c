package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	v1 "github.com/docketdb/docket/proto/docket/v1"
	"google.golang.org/protobuf/proto"
)

// maxFrame bounds a frame's length, checked before its buffer is made.
const maxFrame = 4 << 20

// bufSize is the size of each side's bufio.Reader and bufio.Writer.
const bufSize = 64 << 10

var errFrameTooLarge = errors.New("transport: frame too large")

// readFrame reads one frame from r into buf (grown if needed) and
// returns the message's bytes. At a frame boundary the end of r is
// io.EOF; within a frame it is io.ErrUnexpectedEOF.
func readFrame(r *bufio.Reader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > maxFrame {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", errFrameTooLarge, n, maxFrame)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// frameBuffered reports whether a whole frame is in r's buffer, so that
// reading it makes no system call.
func frameBuffered(r *bufio.Reader) bool {
	b, _ := r.Peek(r.Buffered()) // no read: at most what is buffered
	n, k := binary.Uvarint(b)
	return k > 0 && uint64(len(b)-k) >= n
}

// writeFrames encodes each message of out as a frame on w and flushes
// when out is empty: the messages queued while one write is under way
// leave together in the next. After a write fails it drains out without
// writing, so that no sender blocks, and returns the error when out is
// closed.
func writeFrames[M proto.Message](w io.Writer, out <-chan M) error {
	bw := bufio.NewWriterSize(w, bufSize)
	var msg []byte
	var err error
	for m := range out {
		if err != nil {
			continue
		}
		if msg, err = appendFrame(bw, msg, m); err != nil {
			continue
		}
		if len(out) == 0 {
			err = bw.Flush()
		}
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// appendFrame encodes m into msg (its scratch buffer, returned for the
// next) and writes it to bw as a frame.
func appendFrame(bw *bufio.Writer, msg []byte, m proto.Message) ([]byte, error) {
	msg, err := proto.MarshalOptions{}.MarshalAppend(msg[:0], m)
	if err != nil {
		return msg, err
	}
	n := uint64(len(msg))
	for ; n >= 0x80; n >>= 7 { // the uvarint byte by byte: a header array would escape
		bw.WriteByte(byte(n) | 0x80)
	}
	if err := bw.WriteByte(byte(n)); err != nil {
		return msg, err
	}
	_, err = bw.Write(msg)
	return msg, err
}

// tcpServer answers framed EnqueueRequests on every connection it
// accepts.
type tcpServer struct {
	ln      net.Listener
	batched bool
	inline  bool // the reader writes each answer itself
	st      *stats
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
}

// startTCP listens on a fresh port of 127.0.0.1 and serves until the test
// or benchmark ends.
func startTCP(tb testing.TB, batched, inline bool, st *stats) *tcpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &tcpServer{ln: countListener{ln, st.srv}, batched: batched, inline: inline, st: st, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	tb.Cleanup(s.close)
	return s
}

func (s *tcpServer) addr() string { return s.ln.Addr().String() }

func (s *tcpServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *tcpServer) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// serve reads calls from c until it fails or ends; a second goroutine
// writes the answers.
func (s *tcpServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	out := make(chan *v1.EnqueueResponse, outQueue)
	werr := make(chan error, 1)
	go func() {
		err := writeFrames(c, out)
		if err != nil {
			c.Close() // the reader stops too
		}
		werr <- err
	}()
	br := bufio.NewReaderSize(c, bufSize)
	if s.inline {
		close(out)
		<-werr
		s.readInline(br, c)
		return
	}
	if s.batched {
		s.readBatches(br, out)
	} else {
		s.readEach(br, out)
	}
	close(out)
	<-werr
}

// readEach answers each call as it is read.
func (s *tcpServer) readEach(br *bufio.Reader, out chan<- *v1.EnqueueResponse) {
	var buf []byte
	for {
		req, b, err := readRequest(br, buf)
		if err != nil {
			return
		}
		buf = b
		s.st.msgs.Add(1)
		out <- answer(req)
	}
}

// readInline answers each call from the reading goroutine, into a
// bufio.Writer it flushes when no further whole frame is buffered: no
// goroutine hands an answer on, and the answers to the calls that came
// in one read leave in one write.
func (s *tcpServer) readInline(br *bufio.Reader, c net.Conn) {
	bw := bufio.NewWriterSize(c, bufSize)
	var buf, msg []byte
	for {
		req, b, err := readRequest(br, buf)
		if err != nil {
			return
		}
		buf = b
		s.st.msgs.Add(1)
		if msg, err = appendFrame(bw, msg, answer(req)); err != nil {
			return
		}
		if !frameBuffered(br) {
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}
}

// readBatches reads one call, then every call whose frame is already
// buffered, and hands them on together to a goroutine that answers each
// batch in reverse.
func (s *tcpServer) readBatches(br *bufio.Reader, out chan<- *v1.EnqueueResponse) {
	batches := make(chan []*v1.EnqueueRequest, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for batch := range batches {
			answerBatch(batch, out)
		}
	}()
	defer func() {
		close(batches)
		<-done
	}()
	var buf []byte
	for {
		req, b, err := readRequest(br, buf)
		if err != nil {
			return
		}
		buf = b
		batch := []*v1.EnqueueRequest{req}
		for frameBuffered(br) {
			req, b, err := readRequest(br, buf)
			if err != nil {
				return
			}
			buf = b
			batch = append(batch, req)
		}
		s.st.msgs.Add(int64(len(batch)))
		s.st.batch()
		batches <- batch
	}
}

// readRequest reads and decodes one call, returning the buffer to read
// the next into.
func readRequest(br *bufio.Reader, buf []byte) (*v1.EnqueueRequest, []byte, error) {
	b, err := readFrame(br, buf)
	if err != nil {
		return nil, buf, err
	}
	req := new(v1.EnqueueRequest)
	if err := proto.Unmarshal(b, req); err != nil {
		return nil, b, err
	}
	return req, b, nil
}

// writeMode is how a tcpSession writes its calls.
type writeMode int

const (
	viaWriter writeMode = iota // send queues each call for the writing goroutine
	inline                     // send writes and flushes each call itself
	// hybrid: send writes and flushes a call itself when no other call is
	// in flight, and queues it for the writing goroutine otherwise.
	hybrid
)

// tcpSession is a client's connection to a tcpServer: send writes a call
// as its writeMode says, recv reads and decodes the next answer.
type tcpSession struct {
	c    net.Conn
	br   *bufio.Reader
	mode writeMode
	out  chan *v1.EnqueueRequest
	werr chan error
	buf  []byte
	once sync.Once

	// Calls sent and not yet answered (hybrid).
	inFlight atomic.Int64

	// bw, under mu, is where send writes itself (inline, hybrid); the
	// hybrid writing goroutine writes there too.
	mu  sync.Mutex
	bw  *bufio.Writer
	msg []byte
}

func dialTCP(tb testing.TB, addr string, mode writeMode, st *stats) *tcpSession {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	c = &countConn{Conn: c, n: st.cli}
	s := &tcpSession{c: c, br: bufio.NewReaderSize(c, bufSize), mode: mode, out: make(chan *v1.EnqueueRequest, outQueue), werr: make(chan error, 1)}
	tb.Cleanup(func() { s.close() })
	switch mode {
	case inline:
		s.bw = bufio.NewWriterSize(c, bufSize)
		close(s.out)
		s.werr <- nil
	case hybrid:
		s.bw = bufio.NewWriterSize(c, bufSize)
		go func() { s.werr <- s.writeShared() }()
	default:
		go func() {
			err := writeFrames(c, s.out)
			if err != nil {
				c.Close()
			}
			s.werr <- err
		}()
	}
	return s
}

// writeShared is writeFrames on the bufio.Writer send also writes to.
func (s *tcpSession) writeShared() error {
	var err error
	for m := range s.out {
		s.mu.Lock()
		if err == nil {
			if s.msg, err = appendFrame(s.bw, s.msg, m); err == nil && len(s.out) == 0 {
				err = s.bw.Flush()
			}
			if err != nil {
				s.c.Close()
			}
		}
		s.mu.Unlock()
	}
	return err
}

func (s *tcpSession) send(m *v1.EnqueueRequest) error {
	if s.mode == inline || s.mode == hybrid && s.inFlight.Add(1) == 1 {
		s.mu.Lock()
		defer s.mu.Unlock()
		var err error
		if s.msg, err = appendFrame(s.bw, s.msg, m); err != nil {
			return err
		}
		return s.bw.Flush()
	}
	s.out <- m
	return nil
}

func (s *tcpSession) recv() (uint64, error) {
	b, err := readFrame(s.br, s.buf)
	if err != nil {
		return 0, err
	}
	s.buf = b
	if s.mode == hybrid {
		s.inFlight.Add(-1)
	}
	resp := new(v1.EnqueueResponse)
	if err := proto.Unmarshal(b, resp); err != nil {
		return 0, err
	}
	return resp.GetEnqueued().GetId(), nil
}

func (s *tcpSession) close() error {
	var err error
	s.once.Do(func() {
		if s.mode != inline {
			close(s.out)
		}
		err = <-s.werr
		if cerr := s.c.Close(); err == nil {
			err = cerr
		}
	})
	return err
}
