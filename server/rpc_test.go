package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// rpcServer serves s's routes on 127.0.0.1 and returns its base URL.
func rpcServer(t *testing.T, s *Server) string {
	t.Helper()
	ts := httptest.NewServer(s.Mux())
	t.Cleanup(ts.Close)
	return ts.URL
}

// stubs are connect clients of the three services, sending token.
type stubs struct {
	q     docketv1connect.QueuesClient
	kv    docketv1connect.KVClient
	admin docketv1connect.AdminClient
}

func newStubs(url, token string, opts ...connect.ClientOption) stubs {
	if token != "" {
		opts = append(opts, connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", "Bearer "+token)
				return next(ctx, req)
			}
		})))
	}
	return stubs{
		q:     docketv1connect.NewQueuesClient(http.DefaultClient, url, opts...),
		kv:    docketv1connect.NewKVClient(http.DefaultClient, url, opts...),
		admin: docketv1connect.NewAdminClient(http.DefaultClient, url, opts...),
	}
}

var acme = &v1.Namespace{Project: "acme", Scope: "prod"}

// readmeCurl returns the curl command line of README.md's Server section.
func readmeCurl(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "curl ") && strings.Contains(l, "/docket.v1.Queues/Enqueue") {
			return l
		}
	}
	t.Fatal("README.md has no curl line calling docket.v1.Queues/Enqueue")
	return ""
}

// shellWords splits a command line of plain and single-quoted words, which
// is all the README's curl line uses.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	in, quoted := false, false
	for _, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, in = true, true
		case r == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case r == '"' || r == '\\' || r == '$' || r == '`':
			t.Fatalf("the README's curl line needs a real shell to split (%q)", r)
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quoted {
		t.Fatal("unclosed quote in the README's curl line")
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// TestReadmeCurlEnqueue runs the README's curl line against a server: with
// curl itself when it is installed, and always as the same request through
// net/http. The payload must arrive as the JSON the line wrote.
func TestReadmeCurlEnqueue(t *testing.T) {
	t.Parallel()
	line := readmeCurl(t)
	const readmeAddr = "127.0.0.1:7070"
	if !strings.Contains(line, "http://"+readmeAddr+"/") {
		t.Fatalf("the README's curl line does not call http://%s/: %s", readmeAddr, line)
	}
	s, db := newTestServer(t, nil, Options{})
	url := rpcServer(t, s)
	addr := strings.TrimPrefix(url, "http://")
	check := func(how string, body []byte, wantID uint64) {
		t.Helper()
		var res struct {
			Enqueued struct {
				ID           string `json:"id"`
				Deduplicated bool   `json:"deduplicated"`
			} `json:"enqueued"`
		}
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatalf("%s: answer %q: %v", how, body, err)
		}
		if res.Enqueued.ID != jsonUint(wantID) {
			t.Fatalf("%s: answer %s; want id %d", how, body, wantID)
		}
		info, err := db.Queue(engine.NS("acme", "prod"), "emails").Get(context.Background(), wantID)
		if err != nil {
			t.Fatalf("%s: the task is not in acme/prod emails: %v", how, err)
		}
		if string(info.Payload) != `{"to":"a@b"}` {
			t.Fatalf("%s: payload %q; want the JSON of the command line", how, info.Payload)
		}
	}

	words := shellWords(t, line)
	curl, err := exec.LookPath("curl")
	if err == nil {
		_, err = exec.LookPath("bash")
	}
	if err == nil {
		cmd := exec.Command("bash", "-c", strings.ReplaceAll(line, readmeAddr, addr))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", curl, err, stderr.String())
		}
		check("curl", out, 1)
	} else {
		t.Logf("curl or bash is not installed (%v): the line runs through net/http only", err)
	}

	// The same request through net/http, from the line's words.
	var body, target string
	header := http.Header{}
	for i := 1; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-s":
		case w == "-H" && i+1 < len(words):
			k, v, _ := strings.Cut(words[i+1], ":")
			header.Add(k, strings.TrimSpace(v))
			i++
		case w == "-d" && i+1 < len(words):
			body = words[i+1]
			i++
		case strings.HasPrefix(w, "http://"):
			target = strings.ReplaceAll(w, readmeAddr, addr)
		default:
			t.Fatalf("the README's curl line has %q, which this test does not replay", w)
		}
	}
	req, rerr := http.NewRequest("POST", target, strings.NewReader(body))
	if rerr != nil {
		t.Fatal(rerr)
	}
	req.Header = header
	resp, rerr := http.DefaultClient.Do(req)
	if rerr != nil {
		t.Fatal(rerr)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("net/http: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
	want := uint64(1)
	if err == nil {
		want = 2 // curl enqueued the first
	}
	check("net/http", out, want)
}

func jsonUint(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// procedures lists every unary RPC of the schema's services a server
// mounts: all but Cluster's, which a cluster node serves.
func procedures() []string {
	var out []string
	protoregistry.GlobalFiles.RangeFilesByPackage(v1.File_docket_v1_queues_proto.Package(), func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			if sd == v1.File_docket_v1_cluster_proto.Services().ByName("Cluster") {
				continue
			}
			for j := 0; j < sd.Methods().Len(); j++ {
				if md := sd.Methods().Get(j); !md.IsStreamingClient() && !md.IsStreamingServer() {
					out = append(out, "/"+string(sd.FullName())+"/"+string(md.Name()))
				}
			}
		}
		return true
	})
	sort.Strings(out)
	return out
}

func post(t *testing.T, url, contentType string, body io.Reader) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Post(url, contentType, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestMalformedRequestsAreInvalidArgument(t *testing.T) {
	t.Parallel()
	s, db := newTestServer(t, nil, Options{})
	url := rpcServer(t, s)
	procs := procedures()
	if !slices.Contains(procs, "/docket.v1.Queues/Enqueue") || !slices.Contains(procs, "/docket.v1.Search/Search") {
		t.Fatalf("the procedures of the schema lack Queues or Search: %v", procs)
	}
	bodies := []struct{ contentType, body string }{
		{"application/json", `{`},
		{"application/json", `{"namespace":`},
		{"application/json", `[1,2]`},
		{"application/json", `{} trailing`},
		{"application/json; charset=utf-8", `{"namespace":{"project":7}}`},
		{"application/proto", "\xff\xff\xff"},
		{"application/proto", "\x0a\x7f"}, // a length past the end
	}
	for _, p := range procs {
		for _, b := range bodies {
			if strings.Contains(b.body, "project") && (strings.HasPrefix(p, "/docket.v1.Admin/") || strings.HasSuffix(p, "Each")) {
				continue // no namespace field there: an unknown field, ignored
			}
			code, body, _ := post(t, url+p, b.contentType, strings.NewReader(b.body))
			var e struct{ Code string }
			json.Unmarshal([]byte(body), &e)
			if code != http.StatusBadRequest || e.Code != "invalid_argument" {
				t.Errorf("%s %s %q: %d %s", p, b.contentType, b.body, code, body)
			}
		}
	}
	if st := db.Stats(); st.Commits != 0 || st.Tasks != 0 {
		t.Fatalf("malformed requests changed the DB: %+v", st)
	}
	// Well formed but unacceptable: the engine's own refusal, with its
	// message and the sentinel's detail.
	c := newStubs(url, "")
	_, err := c.q.Enqueue(context.Background(), connect.NewRequest(&v1.EnqueueRequest{Namespace: acme, Queue: "q",
		Task: &v1.Task{Delay: &durationpb.Duration{Seconds: 1, Nanos: -5}}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !errors.Is(wire.FromConnect(err), engine.ErrInvalid) || !strings.Contains(err.Error(), "delay") {
		t.Fatalf("a malformed duration: %v", err)
	}
	_, err = c.q.Enqueue(context.Background(), connect.NewRequest(&v1.EnqueueRequest{Namespace: acme, Queue: "q", Task: &v1.Task{Payload: []byte("{nope")}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "payload is not valid JSON") {
		t.Fatalf("a payload that is not JSON: %v", err)
	}
}

// endless is an endless stream of zero bytes.
type endless struct{}

func (endless) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestRequestSizeLimit(t *testing.T) {
	t.Parallel()
	s, db := newTestServer(t, nil, Options{})
	url := rpcServer(t, s)
	for _, ct := range []string{"application/proto", "application/json"} {
		code, body, _ := post(t, url+"/docket.v1.Queues/Enqueue", ct, io.LimitReader(endless{}, MaxRequestBytes+1<<20))
		t.Logf("%s: %d %.120s", ct, code, body)
		if code != http.StatusTooManyRequests && !strings.Contains(body, "resource_exhausted") {
			t.Fatalf("%s: a request over %d bytes: %d %.200s", ct, MaxRequestBytes, code, body)
		}
	}
	// The largest payload the engine takes fits, in either encoding.
	payload := append(append([]byte(`"`), bytes.Repeat([]byte("x"), 1<<20-2)...), '"')
	c := newStubs(url, "")
	if _, err := c.q.Enqueue(context.Background(), connect.NewRequest(&v1.EnqueueRequest{Namespace: acme, Queue: "big",
		Task: &v1.Task{Payload: payload}})); err != nil {
		t.Fatal(err)
	}
	jc := newStubs(url, "", connect.WithProtoJSON())
	_, err := jc.q.Enqueue(context.Background(), connect.NewRequest(&v1.EnqueueRequest{Namespace: acme, Queue: "big",
		Task: &v1.Task{Payload: append(payload, ' ')}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("a payload over the engine's limit: %v", err)
	}
	if n, _ := db.Queue(engine.NS("acme", "prod"), "big").Counts(context.Background()); n.Ready != 1 {
		t.Fatalf("counts %+v", n)
	}
}

// tokenServer serves a secure DB whose tokens are: root (*/*:all),
// reader (acme/prod:read), acmeAdmin (acme/*:all) and nobody (no grant).
func tokenServer(t *testing.T, opts Options) (s *Server, db *engine.DB, url string, tok map[string]string) {
	t.Helper()
	tok = map[string]string{}
	var lines []string
	for name, grants := range map[string][]string{
		"root": {"*/*:all"}, "reader": {"acme/prod:read"}, "acmeAdmin": {"acme/*:all"}, "nobody": nil,
	} {
		tk, line, err := NewToken(name, grants...)
		if err != nil {
			t.Fatal(err)
		}
		tok[name] = tk
		lines = append(lines, line)
	}
	tokens, err := ParseTokens(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	s, db = newTestServer(t, tokens, opts)
	return s, db, rpcServer(t, s), tok
}

func TestForbiddenCallsNameThePermissionAndRevealNothing(t *testing.T) {
	t.Parallel()
	_, db, url, tok := tokenServer(t, Options{})
	ctx := context.Background()
	root := db.As(engine.Caller{ID: "root"}).Queue(engine.NS("acme", "prod"), "emails")
	res, err := root.Enqueue(ctx, engine.Task{Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"nobody", "reader"} {
		c := newStubs(url, tok[who])
		var msgs []string
		for _, id := range []uint64{res.ID, res.ID + 1000} {
			_, err := c.q.Cancel(ctx, connect.NewRequest(&v1.CancelRequest{Namespace: acme, Queue: "emails", Id: id}))
			if connect.CodeOf(err) != connect.CodePermissionDenied || !errors.Is(wire.FromConnect(err), engine.ErrPermission) ||
				!strings.Contains(err.Error(), "admin") {
				t.Fatalf("%s cancels task %d: %v; want PermissionDenied naming admin", who, id, err)
			}
			msgs = append(msgs, err.Error())
		}
		if msgs[0] != msgs[1] {
			t.Fatalf("%s: the refusal tells an existing task from a missing one:\n%s\n%s", who, msgs[0], msgs[1])
		}
	}
	// The same for namespaces: one with tasks and one without.
	c := newStubs(url, tok["nobody"])
	var msgs []string
	for _, ns := range []*v1.Namespace{acme, {Project: "acme", Scope: "empty"}} {
		_, err := c.q.Counts(ctx, connect.NewRequest(&v1.CountsRequest{Namespace: ns, Queue: "emails"}))
		msgs = append(msgs, strings.ReplaceAll(err.Error(), ns.Scope, "SCOPE"))
		if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "read") {
			t.Fatalf("counts of %v: %v", ns, err)
		}
	}
	if msgs[0] != msgs[1] {
		t.Fatalf("the refusal tells a namespace with tasks from one without:\n%s\n%s", msgs[0], msgs[1])
	}
	if qs, err := c.admin.Queues(ctx, connect.NewRequest(&v1.QueuesRequest{})); err != nil || len(qs.Msg.Queues) != 0 {
		t.Fatalf("Queues for a caller without grants: %v %v", qs, err)
	}
	// No token, a wrong one: Unauthenticated, whatever the call.
	for _, bad := range []string{"", "dk_wrong"} {
		_, err := newStubs(url, bad).q.Get(ctx, connect.NewRequest(&v1.GetRequest{Namespace: acme, Queue: "emails", Id: res.ID}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("token %q: %v", bad, err)
		}
	}
	// The reader reads.
	got, err := newStubs(url, tok["reader"]).q.Get(ctx, connect.NewRequest(&v1.GetRequest{Namespace: acme, Queue: "emails", Id: res.ID}))
	if err != nil || got.Msg.Task.GetId() != res.ID {
		t.Fatalf("reader gets: %v %v", got, err)
	}
}

func TestAdminCallsNeedAdminOnEveryNamespace(t *testing.T) {
	t.Parallel()
	_, db, url, tok := tokenServer(t, Options{})
	ctx := context.Background()
	if _, err := db.As(engine.Caller{ID: "root"}).Queue(engine.NS("acme", "prod"), "q").Enqueue(ctx, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"acmeAdmin", "reader"} {
		c := newStubs(url, tok[who])
		_, err1 := c.admin.Stats(ctx, connect.NewRequest(&v1.StatsRequest{}))
		_, err2 := c.admin.Checkpoint(ctx, connect.NewRequest(&v1.CheckpointRequest{}))
		_, err3 := c.admin.Verify(ctx, connect.NewRequest(&v1.VerifyRequest{}))
		for _, err := range []error{err1, err2, err3} {
			if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "admin on */*") {
				t.Fatalf("%s: %v", who, err)
			}
		}
	}
	c := newStubs(url, tok["root"])
	st, err := c.admin.Stats(ctx, connect.NewRequest(&v1.StatsRequest{}))
	if err != nil || st.Msg.Stats.GetTasks() != 1 || st.Msg.Stats.GetEnqueued() != 1 {
		t.Fatalf("root's Stats: %v %v", st, err)
	}
	if _, err := c.admin.Checkpoint(ctx, connect.NewRequest(&v1.CheckpointRequest{})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.Verify(ctx, connect.NewRequest(&v1.VerifyRequest{})); err != nil {
		t.Fatal(err)
	}
	h, err := newStubs(url, tok["nobody"]).admin.Health(ctx, connect.NewRequest(&v1.HealthRequest{}))
	if err != nil || !h.Msg.Ready {
		t.Fatalf("health: %v %v", h, err)
	}
}

func TestClaimWaitIsALongPoll(t *testing.T) {
	t.Parallel()
	s, db := newTestServer(t, nil, Options{MaxWait: time.Hour})
	parked := make(chan struct{}, 1)
	s.onPark = func() { parked <- struct{}{} }
	ts := httptest.NewServer(s.Mux())
	defer ts.Close()
	c := newStubs(ts.URL, "")
	ctx := context.Background()
	q := db.Queue(engine.NS("acme", "prod"), "jobs")
	wait := func(ctx context.Context, maxWait time.Duration) chan any {
		out := make(chan any, 1)
		go func() {
			req := &v1.ClaimWaitRequest{Namespace: acme, Queue: "jobs", Owner: "w", Lease: durationpb.New(time.Minute), Max: 5}
			if maxWait > 0 {
				req.MaxWait = durationpb.New(maxWait)
			}
			res, err := c.q.ClaimWait(ctx, connect.NewRequest(req))
			if err != nil {
				out <- err
				return
			}
			out <- res.Msg.Leases
		}()
		return out
	}

	// Woken by the engine when a task arrives, long before any bound.
	got := wait(ctx, 0)
	<-parked
	res, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ls, ok := (<-got).([]*v1.Lease); !ok || len(ls) != 1 || ls[0].Id != res.ID || string(ls[0].Payload) != `{"n":1}` {
		t.Fatalf("woken claim: %v", ls)
	}

	// Its own bound: an empty answer, not an error.
	got = wait(ctx, 20*time.Millisecond)
	<-parked
	if ls, ok := (<-got).([]*v1.Lease); !ok || len(ls) != 0 {
		t.Fatalf("a wait past max_wait: %v", ls)
	}

	// The caller's deadline: the caller's error.
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	got = wait(dctx, 0)
	<-parked
	if err, ok := (<-got).(error); !ok || connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Fatalf("a wait past the caller's deadline: %v", err)
	}

	// A drain wakes a parked claim with an empty answer, and refuses new
	// ones with Unavailable, saying the call was not taken.
	got = wait(ctx, 0)
	<-parked
	s.Drain()
	if ls, ok := (<-got).([]*v1.Lease); !ok || len(ls) != 0 {
		t.Fatalf("a wait ended by a drain: %v", ls)
	}
	err, _ = (<-wait(ctx, 0)).(error)
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable || ce.Meta().Get(wire.UnavailableHeader) != "draining" {
		t.Fatalf("a wait while draining: %v", err)
	}
	ts.Close() // waits for the handlers to return
	if n := s.lim.callers(); n != 0 {
		t.Fatalf("%d callers hold slots after every call ended", n)
	}
}

func TestParkedClaimsLimitedPerCaller(t *testing.T) {
	t.Parallel()
	s, _, url, tok := tokenServer(t, Options{MaxParked: 1, MaxWait: time.Hour})
	parked := make(chan struct{}, 1)
	s.onPark = func() { parked <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := func() *connect.Request[v1.ClaimWaitRequest] {
		return connect.NewRequest(&v1.ClaimWaitRequest{Namespace: acme, Queue: "q", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1})
	}
	root := newStubs(url, tok["root"])
	done := make(chan error, 1)
	go func() { _, err := root.q.ClaimWait(ctx, req()); done <- err }()
	<-parked
	if _, err := root.q.ClaimWait(ctx, req()); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("a second parked claim of one caller: %v", err)
	}
	// Another caller has slots of its own (and is refused by the engine).
	if _, err := newStubs(url, tok["reader"]).q.ClaimWait(ctx, req()); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("another caller's claim: %v", err)
	}
	cancel()
	<-done
}

// TestParkedClaimsHoldNoCallSlot: waiting claims count against MaxParked
// only, so a caller can reach MaxParked whatever MaxCalls is, and its
// other calls still run.
func TestParkedClaimsHoldNoCallSlot(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxCalls: 1, MaxParked: 3, MaxWait: time.Hour})
	parked := make(chan struct{}, 3)
	s.onPark = func() { parked <- struct{}{} }
	url := rpcServer(t, s)
	c := newStubs(url, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := func() *connect.Request[v1.ClaimWaitRequest] {
		return connect.NewRequest(&v1.ClaimWaitRequest{Namespace: acme, Queue: "q", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1})
	}
	done := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.q.ClaimWait(ctx, req())
			done <- err
		}()
	}
	for range 3 {
		select {
		case <-parked:
		case err := <-done:
			t.Fatalf("a waiting claim within -max-parked but beyond -max-calls: %v", err)
		}
	}
	if _, err := c.q.Counts(ctx, connect.NewRequest(&v1.CountsRequest{Namespace: acme, Queue: "q"})); err != nil {
		t.Fatalf("a call beside three waiting claims with a limit of one call: %v", err)
	}
	_, err := c.q.ClaimWait(ctx, req())
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "parked=3") {
		t.Fatalf("a fourth waiting claim: %v", err)
	}
	cancel()
	for range 3 {
		if err := <-done; connect.CodeOf(err) != connect.CodeCanceled {
			t.Fatalf("a cancelled wait: %v", err)
		}
	}
}

func TestGRPCServedOverH2C(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{})
	addr := serveHTTP(t, s)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{}}}
	defer hc.CloseIdleConnections()
	url := "http://" + addr
	for _, opt := range []connect.ClientOption{connect.WithGRPC(), connect.WithGRPCWeb()} {
		q := docketv1connect.NewQueuesClient(hc, url, opt)
		ctx := context.Background()
		res, err := q.Enqueue(ctx, connect.NewRequest(&v1.EnqueueRequest{Namespace: acme, Queue: "g", Task: &v1.Task{Payload: []byte(`[1]`)}}))
		if err != nil {
			t.Fatal(err)
		}
		cl, err := q.Claim(ctx, connect.NewRequest(&v1.ClaimRequest{Namespace: acme, Queue: "g", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1}))
		if err != nil || len(cl.Msg.Leases) != 1 || cl.Msg.Leases[0].Id != res.Msg.Enqueued.Id {
			t.Fatalf("claim: %v %v", cl, err)
		}
		l := cl.Msg.Leases[0]
		stale := &v1.LeaseRef{Id: l.Id, Token: l.Token, Secret: l.Secret + 1}
		_, err = q.Complete(ctx, connect.NewRequest(&v1.CompleteRequest{Namespace: acme, Queue: "g", Lease: stale}))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || !errors.Is(wire.FromConnect(err), engine.ErrLeaseLost) {
			t.Fatalf("a forged lease over gRPC: %v", err)
		}
		if _, err := q.Complete(ctx, connect.NewRequest(&v1.CompleteRequest{Namespace: acme, Queue: "g",
			Lease: &v1.LeaseRef{Id: l.Id, Token: l.Token, Secret: l.Secret}})); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHTTPServerBoundsSlowClients(t *testing.T) {
	t.Parallel()
	hs := NewHTTPServer(http.NewServeMux(), nil)
	if hs.ReadHeaderTimeout <= 0 || hs.IdleTimeout <= 0 || hs.MaxHeaderBytes <= 0 {
		t.Fatalf("read-header timeout %v, idle timeout %v, header limit %d: every one must be set",
			hs.ReadHeaderTimeout, hs.IdleTimeout, hs.MaxHeaderBytes)
	}
	// A header section over the limit is refused before any handler runs.
	s, _ := newTestServer(t, nil, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs = NewHTTPServer(s.Mux(), nil)
	go hs.Serve(ln)
	defer hs.Close()
	req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/docket.v1.Queues/Counts", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Pad", strings.Repeat("a", 2*MaxHeaderBytes))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a %d-byte header: %d", 2*MaxHeaderBytes, resp.StatusCode)
	}
}

// TestEveryProcedureAnswers calls every procedure once with an empty
// request: each reaches its handler and gets the engine's answer (an
// empty namespace, a zero duration), never Unimplemented or Internal.
func TestEveryProcedureAnswers(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxWait: time.Millisecond})
	url := rpcServer(t, s)
	for _, p := range procedures() {
		code, body, _ := post(t, url+p, "application/json", strings.NewReader("{}"))
		var e struct {
			Code    string
			Details []struct{ Type string }
		}
		json.Unmarshal([]byte(body), &e)
		switch {
		case code == 200:
		case e.Code == "invalid_argument" && len(e.Details) == 1 && e.Details[0].Type == "docket.v1.Error":
		default:
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
}

// TestSchemaCoversTheEngineAPI: every method of engine.Queue has the RPC
// of the same name in Queues, (the queue controls) Controls, Pipeline or
// (search and bulk actions) Search
// (EnqueueAsync is Queues.Enqueue over the network), every method of
// engine.KV in KV, and engine.API's Queues is served by Admin (Queue, KV,
// Clock and Close are the client's own).
func TestSchemaCoversTheEngineAPI(t *testing.T) {
	t.Parallel()
	services := func(names ...string) []protoreflect.ServiceDescriptor {
		var out []protoreflect.ServiceDescriptor
		for _, fd := range []protoreflect.FileDescriptor{v1.File_docket_v1_queues_proto, v1.File_docket_v1_kv_proto,
			v1.File_docket_v1_admin_proto, v1.File_docket_v1_controls_proto, v1.File_docket_v1_pipeline_proto,
			v1.File_docket_v1_search_proto} {
			for _, n := range names {
				if sd := fd.Services().ByName(protoreflect.Name(n)); sd != nil {
					out = append(out, sd)
				}
			}
		}
		return out
	}
	for _, c := range []struct {
		iface    reflect.Type
		services []protoreflect.ServiceDescriptor
		local    []string
		alias    map[string]string
	}{
		{reflect.TypeFor[engine.Queue](), services("Queues", "Controls", "Pipeline", "Search"), []string{"Namespace", "Name"},
			map[string]string{"EnqueueAsync": "Enqueue"}},
		{reflect.TypeFor[engine.KV](), services("KV"), []string{"Namespace"}, nil},
		{reflect.TypeFor[engine.API](), services("Admin"), []string{"Queue", "KV", "Clock", "Close"}, nil},
	} {
		if len(c.services) == 0 {
			t.Fatalf("no service for %s", c.iface)
		}
		for i := 0; i < c.iface.NumMethod(); i++ {
			name := c.iface.Method(i).Name
			if slices.Contains(c.local, name) {
				continue
			}
			if a, ok := c.alias[name]; ok {
				name = a
			}
			found := 0
			for _, sd := range c.services {
				if sd.Methods().ByName(protoreflect.Name(name)) != nil {
					found++
				}
			}
			if found != 1 {
				t.Errorf("%s.%s has %d RPCs in %v", c.iface, c.iface.Method(i).Name, found, c.services)
			}
		}
	}
}
