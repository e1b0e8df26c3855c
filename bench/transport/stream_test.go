package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// The procedures of the echo service. It has no generated code: connect's
// generic handlers and clients take the message types.
const (
	sessionProcedure = "/docket.bench.v1.Echo/Session"
	batchesProcedure = "/docket.bench.v1.Echo/Batches"
	callProcedure    = "/docket.bench.v1.Echo/Call"
)

// handlerOptions and clientOptions set connect up as docket's server and
// client do: no gzip for small messages (connect compresses every
// message a client accepts gzip for otherwise, which cost more than all
// the rest of a small call), and the same bound on a message as a frame's.
var (
	handlerOptions = connect.WithHandlerOptions(
		connect.WithCompressMinBytes(64<<10),
		connect.WithReadMaxBytes(maxFrame),
	)
	clientOptions = connect.WithClientOptions(
		connect.WithAcceptCompression("gzip", nil, nil),
		connect.WithReadMaxBytes(maxFrame),
	)
)

// httpServer serves the echo service over HTTP/1.1 and h2c.
type httpServer struct {
	url     string
	batched bool
	st      *stats
}

// startHTTP listens on a fresh port of 127.0.0.1 and serves until the
// test or benchmark ends.
func startHTTP(tb testing.TB, batched bool, st *stats) *httpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &httpServer{url: "http://" + ln.Addr().String(), batched: batched, st: st}
	mux := http.NewServeMux()
	mux.Handle(sessionProcedure, connect.NewBidiStreamHandler(sessionProcedure, s.session, handlerOptions))
	mux.Handle(batchesProcedure, connect.NewBidiStreamHandler(batchesProcedure, s.batches, handlerOptions))
	mux.Handle(callProcedure, connect.NewUnaryHandler(callProcedure,
		func(_ context.Context, r *connect.Request[v1.EnqueueRequest]) (*connect.Response[v1.EnqueueResponse], error) {
			st.msgs.Add(1)
			return connect.NewResponse(answer(r.Msg)), nil
		}, handlerOptions))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: mux, Protocols: &p, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(countListener{ln, st.srv})
	}()
	tb.Cleanup(func() {
		hs.Close()
		<-done
	})
	return s
}

// session answers the calls of one stream: this goroutine receives, a
// second sends, and in batched mode a third takes every call the receiver
// has queued and answers them in reverse.
func (s *httpServer) session(ctx context.Context, stream *connect.BidiStream[v1.EnqueueRequest, v1.EnqueueResponse]) error {
	out := make(chan *v1.EnqueueResponse, outQueue)
	serr := make(chan error, 1)
	go func() {
		var err error
		for m := range out {
			if err == nil {
				err = stream.Send(m)
			}
		}
		serr <- err
	}()
	var in chan *v1.EnqueueRequest
	bdone := make(chan struct{})
	if s.batched {
		in = make(chan *v1.EnqueueRequest, outQueue)
		go func() {
			defer close(bdone)
			for req := range in {
				batch := []*v1.EnqueueRequest{req}
			drain:
				for {
					select {
					case req, ok := <-in:
						if !ok {
							break drain
						}
						batch = append(batch, req)
					default:
						break drain
					}
				}
				s.st.batch()
				answerBatch(batch, out)
			}
		}()
	} else {
		close(bdone)
	}
	var err error
	for {
		var req *v1.EnqueueRequest
		req, err = stream.Receive()
		if err != nil {
			break
		}
		s.st.msgs.Add(1)
		if in != nil {
			in <- req
		} else {
			out <- answer(req)
		}
	}
	if in != nil {
		close(in)
	}
	<-bdone
	close(out)
	sendErr := <-serr
	if errors.Is(err, io.EOF) {
		return sendErr
	}
	return err
}

// batches answers the calls of one stream whose messages each carry
// every call the client had queued: each message is a batch, answered in
// reverse, and a second goroutine sends every answer queued in one
// message.
func (s *httpServer) batches(ctx context.Context, stream *connect.BidiStream[v1.EnqueueEachRequest, v1.EnqueueEachResponse]) error {
	out := make(chan *v1.EnqueueEachResult, outQueue)
	serr := make(chan error, 1)
	go func() {
		serr <- sendCoalesced(out, func(rs []*v1.EnqueueEachResult) error {
			return stream.Send(&v1.EnqueueEachResponse{Results: rs})
		})
	}()
	var err error
	for {
		var req *v1.EnqueueEachRequest
		req, err = stream.Receive()
		if err != nil {
			break
		}
		s.st.msgs.Add(int64(len(req.Items)))
		s.st.batch()
		for i := len(req.Items) - 1; i >= 0; i-- {
			out <- &v1.EnqueueEachResult{Enqueued: answer(req.Items[i]).Enqueued}
		}
	}
	close(out)
	sendErr := <-serr
	if errors.Is(err, io.EOF) {
		return sendErr
	}
	return err
}

// maxBatch bounds the calls or answers sendCoalesced puts in one message.
const maxBatch = 1024

// sendCoalesced sends every message queued on out, up to maxBatch, with
// one call of send: what the frame writer's flush does for frames. After
// send fails it drains out without sending and returns the error when
// out is closed.
func sendCoalesced[M any](out <-chan M, send func([]M) error) error {
	var err error
	var batch []M
	for m := range out {
		batch = append(batch[:0], m)
	drain:
		for len(batch) < maxBatch {
			select {
			case m, ok := <-out:
				if !ok {
					break drain
				}
				batch = append(batch, m)
			default:
				break drain
			}
		}
		if err == nil {
			err = send(batch) // connect encodes the message before Send returns
		}
	}
	return err
}

// h2cClient speaks HTTP/2 without TLS to any server: the stream's client.
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p, DisableCompression: true}}
}

// streamSession is a client's bidirectional stream to an httpServer.
type streamSession struct {
	stream *connect.BidiStreamForClient[v1.EnqueueRequest, v1.EnqueueResponse]
	cancel context.CancelFunc
}

func dialStream(tb testing.TB, url string, st *stats) *streamSession {
	hc := h2cClient()
	hc.Transport.(*http.Transport).DialContext = countDial(st.cli)
	ctx, cancel := context.WithCancel(context.Background())
	c := connect.NewClient[v1.EnqueueRequest, v1.EnqueueResponse](hc, url+sessionProcedure, clientOptions)
	s := &streamSession{stream: c.CallBidiStream(ctx), cancel: cancel}
	tb.Cleanup(func() {
		s.close()
		hc.CloseIdleConnections()
	})
	return s
}

func (s *streamSession) send(m *v1.EnqueueRequest) error { return s.stream.Send(m) }

func (s *streamSession) recv() (uint64, error) {
	resp, err := s.stream.Receive()
	return resp.GetEnqueued().GetId(), err
}

func (s *streamSession) close() error {
	err := s.stream.CloseRequest()
	if cerr := s.stream.CloseResponse(); err == nil {
		err = cerr
	}
	s.cancel()
	return err
}

// unaryClient calls the echo service's unary procedure over HTTP/1.1 as
// the docket client does: a connection per concurrent call, kept idle
// between calls, and each small body written with its headers (oneWrite).
func unaryClient(url string, conns int, st *stats) (*connect.Client[v1.EnqueueRequest, v1.EnqueueResponse], *http.Client) {
	tr := &http.Transport{
		DialContext:         countDial(st.cli),
		DisableCompression:  true,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
	}
	hc := &http.Client{Transport: oneWrite{tr}}
	return connect.NewClient[v1.EnqueueRequest, v1.EnqueueResponse](hc, url+callProcedure, clientOptions), hc
}

// oneWrite hands the HTTP/1.1 transport each small request body as a
// bytes.Reader, which it writes in the same write as the headers: the
// docket client's transport does the same.
type oneWrite struct{ next *http.Transport }

func (o oneWrite) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > 64<<10 {
		return o.next.RoundTrip(r)
	}
	b := make([]byte, r.ContentLength)
	_, err := io.ReadFull(r.Body, b)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.Body = io.NopCloser(bytes.NewReader(b))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return o.next.RoundTrip(r2)
}

func (o oneWrite) CloseIdleConnections() { o.next.CloseIdleConnections() }

// batchSession is a client's stream to an httpServer whose messages each
// carry every call queued since the last: send queues a call for the
// sending goroutine, recv takes the answers of each message in turn.
type batchSession struct {
	stream  *connect.BidiStreamForClient[v1.EnqueueEachRequest, v1.EnqueueEachResponse]
	out     chan *v1.EnqueueRequest
	serr    chan error
	answers []*v1.EnqueueEachResult
	cancel  context.CancelFunc
	once    sync.Once
}

func dialBatches(tb testing.TB, url string, st *stats) *batchSession {
	hc := h2cClient()
	hc.Transport.(*http.Transport).DialContext = countDial(st.cli)
	ctx, cancel := context.WithCancel(context.Background())
	c := connect.NewClient[v1.EnqueueEachRequest, v1.EnqueueEachResponse](hc, url+batchesProcedure, clientOptions)
	s := &batchSession{stream: c.CallBidiStream(ctx), out: make(chan *v1.EnqueueRequest, outQueue), serr: make(chan error, 1), cancel: cancel}
	go func() {
		s.serr <- sendCoalesced(s.out, func(items []*v1.EnqueueRequest) error {
			return s.stream.Send(&v1.EnqueueEachRequest{Items: items})
		})
	}()
	tb.Cleanup(func() {
		s.close()
		hc.CloseIdleConnections()
	})
	return s
}

func (s *batchSession) send(m *v1.EnqueueRequest) error {
	s.out <- m
	return nil
}

func (s *batchSession) recv() (uint64, error) {
	for len(s.answers) == 0 {
		resp, err := s.stream.Receive()
		if err != nil {
			return 0, err
		}
		s.answers = resp.Results
	}
	r := s.answers[0]
	s.answers = s.answers[1:]
	return r.GetEnqueued().GetId(), nil
}

func (s *batchSession) close() error {
	var err error
	s.once.Do(func() {
		close(s.out)
		err = <-s.serr
		if cerr := s.stream.CloseRequest(); err == nil {
			err = cerr
		}
		if cerr := s.stream.CloseResponse(); err == nil {
			err = cerr
		}
		s.cancel()
	})
	return err
}
