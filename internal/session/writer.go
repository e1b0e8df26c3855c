package session

import (
	"io"
	"runtime"
	"sync"

	"google.golang.org/protobuf/proto"
)

// Writer writes frames to a connection for many senders. A sender that
// finds no write under way writes its frame itself, at once; frames sent
// while a write is under way are appended to a buffer, and the sender
// doing that write writes them too, in one write, before it returns. So a
// lone call costs one system call and no goroutine hop, and under load
// one write carries every frame that queued behind the last.
//
// The bytes queued behind a write under way are bounded (maxPending): a
// sender past the bound waits for that write, so that a peer that does not
// read cannot make the Writer hold more.
//
// Once a write fails, the Writer keeps the error: every later Send returns
// it, and what was buffered is dropped. The caller then closes the
// connection (which ends the reads of both sides).
type Writer struct {
	w io.Writer

	mu      sync.Mutex
	buf     []byte // frames waiting for the write under way to end
	spare   []byte // the buffer last written, reused
	writing bool   // a sender is writing
	kicked  bool   // a flushLater goroutine is on its way
	err     error
	idle    *sync.Cond // signalled when writing turns false, and when the buffer is taken to be written
	waiting int        // senders waiting for room (tests)
	// failed, if set, is told of the error of a write SendLater left to
	// the Writer's goroutine, which no sender sees.
	failed func(error)
}

// OnFail sets f to be called, once, with the error of a failed write that
// no sender returned (one SendLater left to the Writer's goroutine): the
// owner then closes the connection.
func (x *Writer) OnFail(f func(error)) {
	x.mu.Lock()
	x.failed = f
	x.mu.Unlock()
}

// maxKeep bounds the buffers a Writer keeps between writes; one that grew
// past it for a burst of large frames is dropped after its write.
const maxKeep = 1 << 20

// maxPending bounds the bytes queued behind a write under way; a sender
// finding more waits until that write ends.
const maxPending = 4 << 20

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	x := &Writer{w: w, buf: make([]byte, 0, BufSize), spare: make([]byte, 0, BufSize)}
	x.idle = sync.NewCond(&x.mu)
	return x
}

// Send writes m as a frame, itself or through the sender whose write is
// under way. It returns once m is written or handed to that sender; an
// error means m was not (and will not be) written, or an earlier write
// failed. A message that cannot be encoded fails alone.
func (x *Writer) Send(m proto.Message) error {
	x.mu.Lock()
	if err := x.roomLocked(); err != nil {
		x.mu.Unlock()
		return err
	}
	n := len(x.buf)
	b, err := AppendFrame(x.buf, m)
	if err != nil {
		x.buf = x.buf[:n]
		x.mu.Unlock()
		return err
	}
	x.buf = b
	if x.writing {
		x.mu.Unlock()
		return nil
	}
	return x.flushLocked()
}

// SendLater is Send for a sender that has other calls in flight: m is
// appended to the buffer and written by a goroutine of the Writer, which
// by the time it runs usually finds more frames to write with it, rather
// than by the sender, who goes on at once. A sender that writes call after
// call (a pipelined producer) thus pays a system call per batch of calls,
// not per call. A lone call should use Send: it is written without the
// goroutine's hop.
func (x *Writer) SendLater(m proto.Message) error {
	x.mu.Lock()
	if err := x.roomLocked(); err != nil {
		x.mu.Unlock()
		return err
	}
	n := len(x.buf)
	b, err := AppendFrame(x.buf, m)
	if err != nil {
		x.buf = x.buf[:n]
		x.mu.Unlock()
		return err
	}
	x.buf = b
	x.kickLocked()
	x.mu.Unlock()
	return nil
}

// kickLocked starts the Writer's goroutine on what the buffer holds,
// unless a sender is writing (it writes that too) or the goroutine is on
// its way already. It holds mu.
func (x *Writer) kickLocked() {
	if !x.writing && !x.kicked {
		x.kicked = true
		go x.flushLater()
	}
}

// flushLater writes what SendLater left, unless a sender is writing (it
// writes it too) or has written it already. It first yields: the go
// statement made it the next goroutine to run, ahead of the senders made
// runnable with the one that started it (callers whose answers one read
// delivered), which then append their frames before the write instead of
// each paying a write of its own.
func (x *Writer) flushLater() {
	runtime.Gosched()
	x.mu.Lock()
	x.kicked = false
	if x.writing || len(x.buf) == 0 {
		x.idle.Broadcast()
		x.mu.Unlock()
		return
	}
	failed := x.failed
	if err := x.flushLocked(); err != nil && failed != nil {
		failed(err)
	}
}

// SendFramesLater is SendLater for frames already encoded (AppendFrame):
// for answers that finish together on goroutines of their own (the calls
// a replicated log answered in one round), which then share a write.
func (x *Writer) SendFramesLater(b []byte) error {
	x.mu.Lock()
	if err := x.roomLocked(); err != nil {
		x.mu.Unlock()
		return err
	}
	x.buf = append(x.buf, b...)
	x.kickLocked()
	x.mu.Unlock()
	return nil
}

// SendFrames is Send for frames already encoded (AppendFrame): b holds
// whole frames, written together, in order.
func (x *Writer) SendFrames(b []byte) error {
	x.mu.Lock()
	if err := x.roomLocked(); err != nil {
		x.mu.Unlock()
		return err
	}
	x.buf = append(x.buf, b...)
	if x.writing {
		x.mu.Unlock()
		return nil
	}
	return x.flushLocked()
}

// roomLocked waits, with mu held, while the bytes queued behind a write
// under way are over maxPending, and returns the Writer's error.
func (x *Writer) roomLocked() error {
	for x.writing && len(x.buf) >= maxPending && x.err == nil {
		x.waiting++
		x.idle.Wait()
		x.waiting--
	}
	return x.err
}

// flushLocked writes the buffer, and what is appended while it writes,
// until the buffer is empty; it is called with mu held and returns with it
// released.
func (x *Writer) flushLocked() error {
	x.writing = true
	for len(x.buf) > 0 && x.err == nil {
		out := x.buf
		x.buf = x.spare[:0]
		x.idle.Broadcast() // room for the senders waiting in roomLocked
		x.mu.Unlock()
		_, err := x.w.Write(out)
		x.mu.Lock()
		if err != nil {
			x.err = err
			x.buf = nil
		}
		if cap(out) <= maxKeep {
			x.spare = out[:0]
		} else {
			x.spare = make([]byte, 0, BufSize)
		}
	}
	x.writing = false
	err := x.err
	x.idle.Broadcast()
	x.mu.Unlock()
	return err
}

// Err returns the error of a failed write, or nil.
func (x *Writer) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// Wait returns once no write is under way: every frame sent before it
// was called is written (or failed).
func (x *Writer) Wait() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for x.writing || x.kicked {
		x.idle.Wait()
	}
	return x.err
}
