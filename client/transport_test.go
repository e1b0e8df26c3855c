package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestOneWritePerRequest: through oneWrite a small request goes out in one
// write, headers and body together, and the server reads the body whole;
// a large body and the bare transport take a write for the headers and
// more for the body.
func TestOneWritePerRequest(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	defer srv.Close()
	var writes atomic.Int64
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return countingConn{c, &writes}, err
	}}
	defer tr.CloseIdleConnections()
	post := func(rt http.RoundTripper, body []byte) int64 {
		t.Helper()
		// A body type the transport does not know is in memory, as
		// connect's.
		req, err := http.NewRequest("POST", srv.URL, io.NopCloser(io.MultiReader(bytes.NewReader(body))))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len(body))
		before := writes.Load()
		res, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !bytes.Equal(got, body) {
			t.Fatalf("echoed %d bytes, sent %d", len(got), len(body))
		}
		return writes.Load() - before
	}
	small := []byte(strings.Repeat("x", 300))
	post(oneWrite{tr}, small) // the connection's first use
	if n := post(oneWrite{tr}, small); n != 1 {
		t.Errorf("%d writes for a small request through oneWrite, want 1", n)
	}
	if n := post(tr, small); n < 2 {
		t.Errorf("%d writes for a small request without oneWrite: the test does not see the difference", n)
	}
	if n := post(oneWrite{tr}, bytes.Repeat([]byte("y"), oneWriteMax+1)); n < 2 {
		t.Errorf("%d writes for a body over oneWriteMax, want it left to the transport", n)
	}
	// No body, and a body that ends early.
	req, _ := http.NewRequest("GET", srv.URL, nil)
	res, err := oneWrite{tr}.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	req, _ = http.NewRequest("POST", srv.URL, io.NopCloser(io.MultiReader(strings.NewReader("abc"))))
	req.ContentLength = 10
	if _, err := (oneWrite{tr}).RoundTrip(req); err == nil {
		t.Error("a body shorter than its length was sent")
	}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// TestMaxConns: a burst of calls beyond MaxConns waits for a connection
// instead of opening one each, and claims parked in ClaimWait, more of
// them than MaxConns, do not hold up the calls that wake them.
func TestMaxConns(t *testing.T) {
	t.Parallel()
	db := memDB(t, engine.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	s := server.New(db, server.Options{Logger: quiet, MaxCalls: 1000})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(ctx, s, server.NewHTTPServer(s.Mux(), nil), countingListener{ln, &accepted}, 5*time.Second)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	const maxConns, claimers, burst = 3, 5, 60
	c := dial(t, "http://"+ln.Addr().String(), Options{MaxConns: maxConns, PollWait: time.Minute, Transport: TransportUnary})
	q := c.Queue(engine.NS("acme", "prod"), "emails")

	got := make(chan error, claimers)
	for range claimers {
		go func() {
			_, err := q.ClaimWait(ctx, "w", time.Minute, 1)
			got <- err
		}()
	}
	// With the polls on the bounded connections, the enqueues would wait
	// for a poll to end (a minute) and miss this deadline.
	bctx, bcancel := context.WithTimeout(ctx, 20*time.Second)
	defer bcancel()
	errs := make(chan error, burst)
	for range burst {
		go func() {
			_, err := q.Enqueue(bctx, engine.Task{Payload: []byte(`{}`)})
			errs <- err
		}()
	}
	for range burst {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for range claimers {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	// The dial's health check and the burst shared maxConns connections;
	// each claimer has had one of its own.
	if n := accepted.Load(); n > maxConns+claimers {
		t.Fatalf("%d connections accepted, want at most %d for calls and %d for the claimers", n, maxConns, claimers)
	}
}

// TestAsksForNoCompression: the client's requests do not ask the server
// for gzip, so that large answers come back as they are.
func TestAsksForNoCompression(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	var asked atomic.Value
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ae := r.Header.Get("Accept-Encoding"); strings.Contains(ae, "gzip") {
				asked.Store(r.URL.Path + ": " + ae)
			}
			next.ServeHTTP(w, r)
		})
	})
	c := dial(t, srv.url, Options{Transport: TransportUnary})
	q := c.Queue(ns, "q")
	// An answer beyond the server's threshold for compression.
	payload := []byte(`"` + strings.Repeat("x", 1000) + `"`)
	tasks := make([]engine.Task, 100)
	for i := range tasks {
		tasks[i].Payload = payload
	}
	if _, err := q.EnqueueBatch(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	ls, err := q.Claim(ctx, "w", time.Minute, len(tasks))
	if err != nil || len(ls) != len(tasks) {
		t.Fatal(len(ls), err)
	}
	if a := asked.Load(); a != nil {
		t.Fatalf("a request asked for compression: %s", a)
	}
}

// TestDialLeavesTheCallersTLSConfigAlone: the transport adds "h2" to the
// NextProtos of its TLS config; the caller's config, which it may share
// with other clients, is not changed.
func TestDialLeavesTheCallersTLSConfigAlone(t *testing.T) {
	t.Parallel()
	db := memDB(t, engine.Options{})
	s := server.New(db, server.Options{Logger: quiet})
	ts := httptest.NewUnstartedServer(s.Mux())
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	cfg := &tls.Config{RootCAs: roots, ServerName: "example.com"}
	c := dial(t, ts.URL, Options{TLS: cfg})
	if _, err := c.Queue(engine.NS("acme", "prod"), "q").Enqueue(context.Background(), engine.Task{}); err != nil {
		t.Fatal(err)
	}
	if cfg.NextProtos != nil || cfg.ServerName != "example.com" {
		t.Fatalf("Dial changed the caller's TLS config: NextProtos %q, ServerName %q", cfg.NextProtos, cfg.ServerName)
	}
}
