package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// gzipBomb returns a gzip stream of n zero bytes (about n/800 bytes). At
// gzip.BestSpeed: the best compression makes it a fifth smaller in five
// times the CPU (0.6 s for 64 MiB), and a bomb need not be the smallest.
func gzipBomb(t testing.TB, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if _, err := io.Copy(zw, io.LimitReader(endless{}, n)); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

// TestGzipBombIsRefusedAsItInflates: a small compressed body that inflates
// to far more than any request is refused after inflating about
// compressionFreeBytes, not the request limit, and the server still takes
// compressed requests that inflate as real ones do.
func TestGzipBombIsRefusedAsItInflates(t *testing.T) {
	t.Parallel()
	bomb := gzipBomb(t, 64<<20)
	d := newBoundedGzip(MaxRequestBytes)().(*boundedGzip)
	if err := d.Reset(bytes.NewBuffer(bomb)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, d)
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "32-fold") {
		t.Fatalf("a %d-byte gzip of 64 MiB: %v after %d bytes", len(bomb), err, n)
	}
	if n > compressionFreeBytes+2*inflateChunk || d.src.n > 64<<10 {
		t.Fatalf("refused after inflating %d bytes from %d: want about %d from a few KiB", n, d.src.n, compressionFreeBytes)
	}

	s, _ := newTestServer(t, nil, Options{})
	url := rpcServer(t, s)
	send := func(body []byte) (int, string) {
		req, _ := http.NewRequest("POST", url+"/docket.v1.Queues/Enqueue", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := send(bomb); code != http.StatusTooManyRequests || !strings.Contains(body, "inflates more than 32-fold") {
		t.Fatalf("a gzip bomb: %d %s", code, body)
	}
	// A real request, compressed: JSON of a 2 MiB payload of varied text.
	var text strings.Builder
	for i := 0; text.Len() < 2<<20; i++ {
		fmt.Fprintf(&text, "task %d of the nightly run, shard %d; ", i, i*7919%1000)
	}
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	fmt.Fprintf(zw, `{"namespace":{"project":"acme","scope":"prod"},"queue":"z","task":{"payload":%q}}`, text.String())
	zw.Close()
	// The engine's payload limit (1 MiB) refuses it: the server inflated it.
	if code, body := send(zbuf.Bytes()); code != http.StatusBadRequest || !strings.Contains(body, "over the limit") {
		t.Fatalf("a compressed request of %d bytes, %d inflated: %d %s", zbuf.Len(), text.Len(), code, body)
	}
	zbuf.Reset()
	zw = gzip.NewWriter(&zbuf)
	fmt.Fprintf(zw, `{"namespace":{"project":"acme","scope":"prod"},"queue":"z","task":{"payload":"\"%s\""}}`, strings.Repeat("x", 512<<10))
	zw.Close()
	if code, body := send(zbuf.Bytes()); code != http.StatusOK {
		t.Fatalf("a compressed request under %d bytes inflated (any ratio): %d %s", compressionFreeBytes, code, body)
	}
}

// TestUnauthenticatedBodyIsNotRead: a call without a valid token is
// refused before its body is read, and its connection closed rather than
// the body read to its end.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	t.Parallel()
	s, _, url, _ := tokenServer(t, Options{})
	var read atomic.Int64
	body := io.LimitReader(countReader{endless{}, &read}, 1<<30)
	req, _ := http.NewRequest("POST", url+"/docket.v1.Queues/Enqueue", body)
	req.ContentLength = 1 << 30
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no answer to an unauthenticated 1 GiB body (%d bytes sent): %v", read.Load(), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%d", resp.StatusCode)
	}
	if n := read.Load(); n > 16<<20 {
		t.Fatalf("%d bytes of the body were sent: the server read it", n)
	}
	_ = s
}

type countReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// packedDependsOn returns an EnqueueRequest's protobuf bytes whose task
// depends on n tasks, sent as one packed field of one-byte varints.
func packedDependsOn(n int) []byte {
	var task []byte
	task = protowire.AppendTag(task, 40, protowire.BytesType) // depends_on
	task = protowire.AppendVarint(task, uint64(n))
	task = append(task, bytes.Repeat([]byte{1}, n)...)
	head, _ := proto.Marshal(&v1.EnqueueRequest{Namespace: acme, Queue: "q"})
	req := protowire.AppendTag(head, 3, protowire.BytesType) // task
	req = protowire.AppendVarint(req, uint64(len(task)))
	return append(req, task...)
}

// TestPackedListsAreHeldToTheElementLimits: a packed list is counted by its
// elements, not its fields, and refused before the request is built.
func TestPackedListsAreHeldToTheElementLimits(t *testing.T) {
	t.Parallel()
	var m v1.EnqueueRequest
	if err := proto.Unmarshal(packedDependsOn(3), &m); err != nil || len(m.Task.DependsOn) != 3 {
		t.Fatalf("the packed request does not parse as meant: %v %v", m.Task.GetDependsOn(), err)
	}
	s, _ := newTestServer(t, nil, Options{})
	url := rpcServer(t, s)
	code, body, _ := post(t, url+"/docket.v1.Queues/Enqueue", "application/proto", bytes.NewReader(packedDependsOn(engine.MaxDependencies+1)))
	if code != http.StatusBadRequest || !strings.Contains(body, "docket.v1.Task.depends_on holds more than") {
		t.Fatalf("a packed depends_on of %d elements: %d %s", engine.MaxDependencies+1, code, body)
	}
	// With the largest request limit, a 24 MiB list is read, and refused
	// before it is built.
	big, _ := newTestServer(t, nil, Options{MaxRequestBytes: MaxRequestBytes})
	code, body, _ = post(t, rpcServer(t, big)+"/docket.v1.Queues/Enqueue", "application/proto", bytes.NewReader(packedDependsOn(24<<20)))
	if code != http.StatusBadRequest || !strings.Contains(body, "holds more than") {
		t.Fatalf("a packed depends_on of 24 Mi elements: %d %.200s", code, body)
	}
	// Within the limit it reaches the engine (which finds no such tasks).
	code, body, _ = post(t, url+"/docket.v1.Queues/Enqueue", "application/proto", bytes.NewReader(packedDependsOn(3)))
	if strings.Contains(body, "holds more than") {
		t.Fatalf("three dependencies: %d %s", code, body)
	}
}

// TestRequestLimitIsTheLargestLegalRequest: the request limit is the
// engine's commit limit and the framing of the largest legal batch.
func TestRequestLimitIsTheLargestLegalRequest(t *testing.T) {
	t.Parallel()
	task := &v1.Task{Payload: []byte("x"), Headers: map[string]string{}}
	for i := range engine.MaxHeaders {
		task.Headers[fmt.Sprintf("%0*d", engine.MaxHeaderBytes, i)] = strings.Repeat("v", engine.MaxHeaderBytes)
	}
	framing := proto.Size(&v1.EnqueueBatchRequest{Tasks: []*v1.Task{task}}) - engine.MaxHeaders*2*engine.MaxHeaderBytes - 1
	if framing > engine.MaxHeaders*10+128 {
		t.Fatalf("a task's framing is %d bytes, more than the limit allows", framing)
	}
	if MaxRequestBytes > engine.MaxCommitBytes+engine.MaxBatch*1024 {
		t.Fatalf("MaxRequestBytes %d", MaxRequestBytes)
	}
	// The default holds the largest single task of the engine's default
	// payload limit, with every header, dependency and an idempotency key.
	deps := make([]uint64, engine.MaxDependencies)
	for i := range deps {
		deps[i] = 1<<63 + uint64(i)
	}
	task.Payload = bytes.Repeat([]byte("x"), 1<<20)
	task.DependsOn = deps
	task.IdempotencyKey = strings.Repeat("k", engine.MaxKeyBytes)
	one := proto.Size(&v1.EnqueueRequest{Namespace: acme, Queue: "q", Task: task})
	if one*3 > DefaultMaxRequestBytes {
		t.Fatalf("the largest task is %d bytes; the default limit %d should hold it three times", one, DefaultMaxRequestBytes)
	}
	s, _ := newTestServer(t, nil, Options{})
	if s.opts.MaxRequestBytes != DefaultMaxRequestBytes {
		t.Fatalf("default request limit %d", s.opts.MaxRequestBytes)
	}
	s, _ = newTestServer(t, nil, Options{MaxRequestBytes: 1 << 40})
	if s.opts.MaxRequestBytes != MaxRequestBytes {
		t.Fatalf("a request limit over MaxRequestBytes: %d", s.opts.MaxRequestBytes)
	}
}

// rawCall writes a request's head and part of its body on a new
// connection to addr and returns the connection.
func rawCall(t *testing.T, addr, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSlowBodyIsCutAndHoldsNoSlot: a request whose body does not arrive
// is answered and its connection closed after BodyTimeout, and holds no
// call slot meanwhile.
func TestSlowBodyIsCutAndHoldsNoSlot(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxCalls: 1, BodyTimeout: 300 * time.Millisecond})
	ts := httptest.NewServer(s.Mux())
	defer ts.Close()
	addr := ts.Listener.Addr().String()
	var conns []net.Conn
	for range 3 {
		conns = append(conns, rawCall(t, addr, "POST /docket.v1.Queues/Counts HTTP/1.1\r\nHost: x\r\n"+
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"namespace\":"))
	}
	// Other calls run while the slow bodies trickle in.
	code, body, _ := post(t, ts.URL+"/docket.v1.Queues/Counts", "application/json",
		strings.NewReader(`{"namespace":{"project":"acme","scope":"prod"},"queue":"q"}`))
	if code != http.StatusOK {
		t.Fatalf("a call beside three slow bodies, with a limit of one call: %d %s", code, body)
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // generous: the server's is 300 ms
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to a body that never arrives: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(b), "did not arrive within 300ms") {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("the connection stays open: %v", err)
		}
	}
}

// TestBodyTimeoutSparesLongPolls: the body deadline bounds reading the
// request, not the answer of a waiting claim, over HTTP/1.1 and h2c.
func TestBodyTimeoutSparesLongPolls(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 100 * time.Millisecond
	// The two protocols side by side: each waits out the body deadline.
	for _, h2c := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2c=%v", h2c), func(t *testing.T) {
			t.Parallel()
			s, db := newTestServer(t, nil, Options{BodyTimeout: bodyTimeout, MaxWait: time.Hour})
			parked := make(chan struct{}, 1)
			s.onPark = func() { parked <- struct{}{} }
			addr := serveHTTP(t, s)
			var p http.Protocols
			if h2c {
				p.SetUnencryptedHTTP2(true)
			} else {
				p.SetHTTP1(true)
			}
			hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
			defer hc.CloseIdleConnections()
			c := docketv1connect.NewQueuesClient(hc, "http://"+addr)
			got := make(chan error, 1)
			go func() {
				res, err := c.ClaimWait(context.Background(), connect.NewRequest(&v1.ClaimWaitRequest{Namespace: acme, Queue: "lp",
					Owner: "w", Lease: durationpb.New(time.Minute), Max: 1}))
				if err == nil && len(res.Msg.Leases) != 1 {
					err = fmt.Errorf("%d leases", len(res.Msg.Leases))
				}
				got <- err
			}()
			<-parked
			select {
			case err := <-got:
				t.Fatalf("h2c %v: the waiting claim ended: %v", h2c, err)
			case <-time.After(5 * bodyTimeout): // the time the body deadline would have cut it
			}
			if _, err := db.Queue(engine.NS("acme", "prod"), "lp").Enqueue(context.Background(), engine.Task{Payload: []byte("1")}); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("h2c %v: a claim waiting longer than the body timeout: %v", h2c, err)
			}
		})
	}
}

// TestOverLimitBodyIsNotReadToItsEnd: a body over MaxRequestBytes is
// answered as soon as it passes the limit, and its connection closed; one
// whose Content-Length is over it is refused before it is read.
func TestOverLimitBodyIsNotReadToItsEnd(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{})
	url := rpcServer(t, s)
	for _, ct := range []string{"application/proto", "application/json", "application/grpc"} {
		var read atomic.Int64
		req, _ := http.NewRequest("POST", url+"/docket.v1.Queues/Enqueue", countReader{endless{}, &read}) // chunked, endless
		req.Header.Set("Content-Type", ct)
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if grpc := resp.Trailer.Get("Grpc-Status") + resp.Header.Get("Grpc-Status"); resp.StatusCode != http.StatusTooManyRequests && (grpc == "" || grpc == "0") {
					err = fmt.Errorf("status %d %v %v", resp.StatusCode, resp.Header, resp.Trailer)
				}
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil && !strings.Contains(err.Error(), "connection reset") && !strings.Contains(err.Error(), "broken pipe") {
				t.Fatalf("%s: an endless body: %v", ct, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: an endless body is still being read after %d bytes", ct, read.Load())
		}
		if n := read.Load(); n > MaxRequestBytes+16<<20 {
			t.Fatalf("%s: %d bytes sent of an endless body, over a limit of %d", ct, n, MaxRequestBytes)
		}
	}
	var read atomic.Int64
	req, _ := http.NewRequest("POST", url+"/docket.v1.Queues/Enqueue", io.LimitReader(countReader{endless{}, &read}, 1<<30))
	req.ContentLength = 1 << 30
	req.Header.Set("Content-Type", "application/proto")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "1073741824 bytes, over the limit of") {
		t.Fatalf("a 1 GiB Content-Length: %d %s", resp.StatusCode, b)
	}
	if n := read.Load(); n > 16<<20 {
		t.Fatalf("%d bytes of a 1 GiB body refused by its length were sent", n)
	}
}

// TestRevokedTokensLoseTheirWaitingClaims: a reload of the tokens file
// that takes a token away (or gives it to another caller) ends the claims
// waiting under it at once, with Unauthenticated; the others keep waiting.
func TestRevokedTokensLoseTheirWaitingClaims(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	tokA, lineA, _ := NewToken("a", "acme/prod:all")
	tokB, lineB, _ := NewToken("b", "acme/prod:all")
	tokC, lineC, _ := NewToken("c", "acme/prod:all")
	write := func(lines ...string) {
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(lineA, lineB, lineC)
	tokens, err := LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	s, db := newTestServer(t, tokens, Options{MaxWait: time.Hour})
	parked := make(chan struct{}, 3)
	s.onPark = func() { parked <- struct{}{} }
	url := rpcServer(t, s)
	wait := func(tok string) chan error {
		out := make(chan error, 1)
		go func() {
			res, err := newStubs(url, tok).q.ClaimWait(context.Background(), connect.NewRequest(&v1.ClaimWaitRequest{
				Namespace: acme, Queue: "rot", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1}))
			if err == nil && len(res.Msg.Leases) != 1 {
				err = fmt.Errorf("%d leases", len(res.Msg.Leases))
			}
			out <- err
		}()
		return out
	}
	a, b, c := wait(tokA), wait(tokB), wait(tokC)
	for range 3 {
		<-parked
	}
	// a's token is gone (a has a new one); b's token now stands for c.
	_, lineA2, _ := NewToken("a", "acme/prod:all")
	lineB2 := strings.Replace(lineB, " b ", " c ", 1)
	write(lineA2, lineB2, lineC)
	if err := tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan error{"a": a, "b": b} {
		select {
		case err := <-ch:
			if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "revoked") {
				t.Fatalf("%s's waiting claim after its token was revoked: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s's waiting claim outlives its token", name)
		}
	}
	if _, err := db.As(engine.Caller{ID: "c"}).Queue(engine.NS("acme", "prod"), "rot").Enqueue(context.Background(), engine.Task{Payload: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := <-c; err != nil {
		t.Fatalf("c's waiting claim, whose token stays: %v", err)
	}
}

// TestHostGuard: a loopback server answers to localhost and its loopback
// addresses, with any port, and to the names it is given; any other Host
// (a name rebound to 127.0.0.1) gets 421, the dashboard's paths as well.
func TestHostGuard(t *testing.T) {
	t.Parallel()
	h := HostGuard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }),
		[]string{"docket.internal", "Proxy.Example:8443"})
	for host, want := range map[string]int{
		"localhost": 200, "localhost:7070": 200, "LOCALHOST.:7070": 200, "127.0.0.1": 200, "127.0.0.1:1": 200,
		"[::1]:7070": 200, "[::1]": 200, "docket.internal:7070": 200, "proxy.example": 200, "127.0.0.2:7070": 200,
		"evil.example": 421, "evil.example:7070": 421, "localhost.evil.example": 421, "10.0.0.1:7070": 421,
		"127.0.0.1.nip.io": 421,
	} {
		for _, path := range []string{"/docket.v1.Queues/Cancel", "/ui/"} {
			r := httptest.NewRequest("POST", path, nil)
			r.Host = host
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != want {
				t.Fatalf("Host %q %s: %d %s; want %d", host, path, w.Code, w.Body, want)
			}
			if want == 421 && !strings.Contains(w.Body.String(), "-allow-host") {
				t.Fatalf("Host %q: %s", host, w.Body)
			}
		}
	}
}

// TestRunChecksTheHostOnLoopback: Run guards a loopback listener's every
// route (the API, health, what Mount adds).
func TestRunChecksTheHostOnLoopback(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Dir: t.TempDir(), Listen: "127.0.0.1:0", Server: quiet(), AllowHosts: []string{"docket.test"},
			Listening: func(a net.Addr) { addrc <- a },
			Mount: func(_ *engine.DB, _ *Server, mux *http.ServeMux) error {
				mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("dashboard")) })
				return nil
			}})
	}()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()
	_, port, _ := net.SplitHostPort(addr.String())
	for host, want := range map[string]int{"evil.example:" + port: 421, "docket.test:" + port: 200, "localhost:" + port: 200} {
		for _, path := range []string{"/ui/", "/readyz"} {
			req, _ := http.NewRequest("GET", "http://"+addr.String()+path, nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("Host %s %s: %d, want %d", host, path, resp.StatusCode, want)
			}
		}
	}
	req, _ := http.NewRequest("POST", "http://"+addr.String()+"/docket.v1.Queues/Cancel", strings.NewReader("{}"))
	req.Host = "evil.example"
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("the API under a foreign Host: %d", resp.StatusCode)
	}
}
