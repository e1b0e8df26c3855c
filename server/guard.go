package server

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/internal/session"
)

// The guards against hostile requests: a bound on the time a body may take
// to arrive and on its size, raw and inflated, and the Host check of a
// loopback server.

// DefaultBodyTimeout is how long a request's body may take to arrive
// (Options.BodyTimeout).
const DefaultBodyTimeout = 10 * time.Second

// DefaultBusyPoll is how long a session's reader asks for its client's
// next call in a loop before it waits (Options.BusyPoll).
const DefaultBusyPoll = session.DefaultBusyPoll

// Compressed requests: a body may inflate to at most the request limit, and,
// beyond its first compressionFreeBytes, to at most maxCompressionRatio
// times the compressed bytes read so far. Both are checked as the body
// inflates, so a small body that would inflate to gigabytes is refused
// after a little over compressionFreeBytes.
const (
	maxCompressionRatio  = 32
	compressionFreeBytes = 1 << 20
	inflateChunk         = 64 << 10 // the most one Read inflates
)

// errRequestTooLarge is wrapped by the refusal of a request over
// MaxRequestBytes.
var errRequestTooLarge = errors.New("docket: request too large")

func errTooLarge(n, limit int64) *connect.Error {
	if n < 0 {
		return connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("%w: the body is over the limit of %d bytes (docket serve -max-request)", errRequestTooLarge, limit))
	}
	return connect.NewError(connect.CodeResourceExhausted,
		fmt.Errorf("%w: %d bytes, over the limit of %d (docket serve -max-request)", errRequestTooLarge, n, limit))
}

// guardedBody is a request's body as the handler reads it: over
// the request limit it fails at once (and the connection is closed after the
// answer, the rest unread), and it must arrive before the read deadline
// guardBody set. The deadline is lifted once the body has been read whole,
// so that it does not cut the answer of a long-poll claim; a body that
// failed keeps it, so that whatever would still read it (the server,
// looking for the end of a body to reuse the connection) cannot wait for
// a client that sends nothing.
type guardedBody struct {
	s       *Server
	ctx     context.Context
	read    int64
	large   bool          // holds the server's largeBodies slot
	body    io.ReadCloser // an http.MaxBytesReader
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	limit   int64
	done    bool
	over    bool // the body passed the limit

	deadline time.Time
}

// Large bodies: past its first largeBodyBytes, a body is read only while
// it holds one of the server's largeBodies slots, so that the bodies held
// in memory at once, and the processor spent reading them, stay bounded
// whatever the number of clients sending them. A body waits for a slot
// until its deadline.
const (
	largeBodyBytes = 1 << 20
	largeBodies    = 1
)

// waitLarge takes a large-body slot for b.
func (b *guardedBody) waitLarge() error {
	t := time.NewTimer(time.Until(b.deadline))
	defer t.Stop()
	select {
	case b.s.large <- struct{}{}:
		b.large = true
		return nil
	case <-t.C:
		b.w.Header().Set("Connection", "close")
		return connect.NewError(connect.CodeDeadlineExceeded,
			fmt.Errorf("docket: the request body did not arrive within %v (docket serve -body-timeout)", b.timeout))
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
}

// releaseLarge gives the large-body slot back, once.
func (b *guardedBody) releaseLarge() {
	if b.large {
		b.large = false
		<-b.s.large
	}
}

// guardBody sets the read deadline of r's body, before anything else is
// done with the request, and returns the body to read it by.
func (s *Server) guardBody(w http.ResponseWriter, r *http.Request) *guardedBody {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) // a writer without deadlines (tests) has none
	return &guardedBody{s: s, ctx: r.Context(), body: http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes), w: w, rc: rc,
		timeout: s.opts.BodyTimeout, limit: s.opts.MaxRequestBytes, deadline: time.Now().Add(s.opts.BodyTimeout)}
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if !b.large && b.read+int64(len(p)) > largeBodyBytes {
		if b.read >= largeBodyBytes {
			if err := b.waitLarge(); err != nil {
				b.done = true // the deadline stays: nothing may wait on this body any more
				return 0, err
			}
		} else {
			p = p[:largeBodyBytes-b.read]
		}
	}
	n, err := b.body.Read(p)
	b.read += int64(n)
	if err == nil {
		return n, nil
	}
	if err == io.EOF {
		b.releaseLarge()
		b.finish()
		return n, err
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		b.over = true
		return n, errTooLarge(-1, b.limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.w.Header().Set("Connection", "close")
		return n, connect.NewError(connect.CodeDeadlineExceeded,
			fmt.Errorf("docket: the request body did not arrive within %v (docket serve -body-timeout)", b.timeout))
	}
	return n, err
}

func (b *guardedBody) Close() error {
	b.end()
	return b.body.Close()
}

// end gives back the large-body slot once the body is done with; the
// authentication middleware calls it when the call ends, whatever the
// handler did with the body.
func (b *guardedBody) end() {
	if b.over && b.large {
		// The request was refused and its buffer dropped: collect it
		// before the next large body is read, so that a client sending
		// such bodies back to back cannot make the server hold one
		// buffer per body until the collector comes by itself.
		runtime.GC()
	}
	b.over = false
	b.releaseLarge()
}

// finish lifts the read deadline once the body is read.
func (b *guardedBody) finish() {
	if !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
}

// boundedGzip is the gzip decompressor of requests: it refuses a body that
// inflates over the request limit, or by more than maxCompressionRatio, as
// soon as it does, without inflating the rest.
type boundedGzip struct {
	max int64 // the request limit
	zr  gzip.Reader
	src countingReader
	out int64
	ok  bool // Reset succeeded
	err error
}

func newBoundedGzip(max int64) func() connect.Decompressor {
	return func() connect.Decompressor { return &boundedGzip{max: max} }
}

func (d *boundedGzip) Reset(r io.Reader) error {
	br, ok := r.(io.ByteReader)
	if !ok {
		b := bufio.NewReader(r)
		r, br = b, b
	}
	d.src = countingReader{r: r, br: br}
	d.out, d.err = 0, nil
	d.err = d.zr.Reset(&d.src)
	d.ok = d.err == nil
	return d.err
}

func (d *boundedGzip) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	if len(p) > inflateChunk {
		p = p[:inflateChunk]
	}
	n, err := d.zr.Read(p)
	d.out += int64(n)
	switch {
	case d.out > d.max:
		d.err = connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("%w: it inflates to more than the limit of %d bytes (docket serve -max-request)", errRequestTooLarge, d.max))
	case d.out > compressionFreeBytes && d.out > maxCompressionRatio*d.src.n:
		d.err = connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("%w: it inflates more than %d-fold, which no request needs (send it uncompressed)", errRequestTooLarge, maxCompressionRatio))
	default:
		return n, err
	}
	return n, d.err
}

func (d *boundedGzip) Close() error {
	if !d.ok {
		return nil
	}
	return d.zr.Close()
}

// countingReader counts the compressed bytes the decompressor consumed.
// It is an io.ByteReader, so that the decompressor reads no further ahead
// than it needs.
type countingReader struct {
	r  io.Reader
	br io.ByteReader
	n  int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.br.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// LoopbackHosts are the Host values a server on a loopback address answers
// to besides those it is given (HostGuard); any loopback IP address is
// also accepted.
var LoopbackHosts = []string{"localhost"}

// HostGuard answers only requests whose Host (without its port) is
// localhost, a loopback IP address or one of allow, and refuses others
// with 421 Misdirected Request. A server on a loopback address needs it:
// a web page its user visits could otherwise reach it under a name of its
// own that resolves to 127.0.0.1 (DNS rebinding) and use the API and the
// dashboard with the server's rights.
func HostGuard(next http.Handler, allow []string) http.Handler {
	ok := map[string]bool{}
	for _, h := range append(append([]string{}, LoopbackHosts...), allow...) {
		if h = normalHost(h); h != "" {
			ok[h] = true
		}
	}
	names := "localhost, 127.0.0.1, [::1]"
	for _, h := range allow {
		names += ", " + h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := normalHost(r.Host)
		if r.Host == "" || ok[h] {
			next.ServeHTTP(w, r)
			return
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("docket: Host %q is not a name of this server: on a loopback address it answers only to %s "+
			"(against DNS rebinding); docket serve -allow-host adds a name", r.Host, names), http.StatusMisdirectedRequest)
	})
}

// normalHost is host without its port and brackets, lower case, without a
// trailing dot.
func normalHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
