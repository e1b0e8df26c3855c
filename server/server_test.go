package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

func newTestServer(t *testing.T, tokens *Tokens, opts Options) (*Server, *engine.DB) {
	t.Helper()
	db, err := engine.OpenInMemory(engine.Options{Authorizer: tokens, Secure: tokens != nil})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	opts.Tokens = tokens
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return New(db, opts), db
}

func TestAuthenticateRefusesWithoutSayingWhy(t *testing.T) {
	t.Parallel()
	tok, line, _ := NewToken("app", "acme/prod:read")
	tokens, err := ParseTokens(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newTestServer(t, tokens, Options{})
	var seen engine.Caller
	h := s.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = *infoFrom(r.Context()).caller
		w.Write([]byte("served"))
	}))
	ts := httptest.NewServer(h)
	defer ts.Close()

	call := func(auth string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", ts.URL+"/docket.v1.Queues/Get", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, auth := range []string{"", "Bearer", "Bearer " + tok + "x", "Basic " + tok, "bearer  wrong"} {
		resp, body := call(auth)
		var e struct{ Code, Message string }
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Fatalf("%q: body %q is not a connect error: %v", auth, body, err)
		}
		if resp.StatusCode != http.StatusUnauthorized || e.Code != "unauthenticated" || e.Message != ErrUnauthenticated.Error() {
			t.Fatalf("%q: %d %q", auth, resp.StatusCode, body)
		}
	}
	if resp, body := call("Bearer " + tok); resp.StatusCode != 200 || body != "served" || seen.ID != "app" {
		t.Fatalf("good token: %d %q caller %q", resp.StatusCode, body, seen.ID)
	}
	if resp, _ := call("bearer " + tok); resp.StatusCode != 200 {
		t.Fatalf("the scheme is case-insensitive: %d", resp.StatusCode)
	}
}

func TestAPIRunsAsTheCaller(t *testing.T) {
	t.Parallel()
	_, line, _ := NewToken("reader", "acme/prod:read")
	tokens, _ := ParseTokens(strings.NewReader(line))
	s, db := newTestServer(t, tokens, Options{})
	ns := engine.NS("acme", "prod")
	if _, err := db.Queue(ns, "q").Enqueue(context.Background(), engine.Task{}); !errors.Is(err, engine.ErrPermission) {
		t.Fatalf("secure DB without caller: %v", err)
	}
	ctx := context.WithValue(context.Background(), callerKey{}, callInfo{caller: &engine.Caller{ID: "reader"}})
	api, err := s.api(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Queue(ns, "q").Counts(ctx); err != nil {
		t.Fatalf("read with read permission: %v", err)
	}
	_, err = api.Queue(ns, "q").Enqueue(ctx, engine.Task{})
	if !errors.Is(err, engine.ErrPermission) || !strings.Contains(err.Error(), "enqueue") {
		t.Fatalf("enqueue without permission: %v", err)
	}
}

// TestCallLimitPerCaller: a caller's calls beyond MaxCalls are refused
// with ResourceExhausted naming the limit, and every answer carries the
// limits in the LimitsHeader.
func TestCallLimitPerCaller(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxCalls: 1, MaxParked: 7})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.onCall = func() {
		once.Do(func() {
			entered <- struct{}{}
			<-release
		})
	}
	url := rpcServer(t, s)
	done := make(chan int)
	go func() {
		code, _, _ := post(t, url+"/docket.v1.Queues/Counts", "application/json", strings.NewReader("{}"))
		done <- code
	}()
	<-entered
	code, body, h := post(t, url+"/docket.v1.Queues/Counts", "application/json", strings.NewReader("{}"))
	if code != http.StatusTooManyRequests || !strings.Contains(body, "calls=1") || !strings.Contains(body, "-max-calls") {
		t.Fatalf("second concurrent call: %d %s; want 429 naming the call limit", code, body)
	}
	if got := h.Get(LimitsHeader); got != "calls=1, parked=7" {
		t.Fatalf("%s: %q", LimitsHeader, got)
	}
	close(release)
	if code := <-done; code != http.StatusBadRequest { // the engine refuses an empty namespace
		t.Fatalf("first call: %d", code)
	}
	// Unauthenticated answers carry the limits too.
	tokens, err := ParseTokens(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	s, _ = newTestServer(t, tokens, Options{})
	code, _, h = post(t, rpcServer(t, s)+"/docket.v1.Queues/Counts", "application/json", strings.NewReader("{}"))
	if code != http.StatusUnauthorized || h.Get(LimitsHeader) != fmt.Sprintf("calls=%d, parked=%d", DefaultMaxCalls, DefaultMaxParked) {
		t.Fatalf("unauthenticated: %d, %s %q", code, LimitsHeader, h.Get(LimitsHeader))
	}
}

func TestParkEndsOnDrainAndAtMaxWait(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxParked: 2, MaxWait: time.Hour})
	ctx1, rel1, err := s.park(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rel1()
	if dl, ok := ctx1.Deadline(); !ok || time.Until(dl) > time.Hour {
		t.Fatalf("a wait without a bound got deadline %v %v; want MaxWait", dl, ok)
	}
	ctx2, rel2, err := s.park(context.Background(), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	<-ctx2.Done() // the caller's own bound
	rel2()
	ctx3, rel3, err := s.park(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rel3()
	if _, _, err := s.park(context.Background(), 0); err == nil {
		t.Fatal("a third parked claim passed a limit of 2")
	}
	rec := httptest.NewRecorder()
	mux := http.NewServeMux()
	s.Health(mux)
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 {
		t.Fatalf("readyz before drain: %d", rec.Code)
	}
	s.Drain()
	<-ctx1.Done()
	<-ctx3.Done()
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("readyz while draining: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("healthz while draining: %d", rec.Code)
	}
	rel1()
	ctx4, rel4, err := s.park(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rel4()
	select {
	case <-ctx4.Done():
	default:
		t.Fatal("a claim parked after the drain started did not end at once")
	}
}

func TestReadyHook(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{Ready: func(context.Context) error { return errors.New("no leader") }})
	mux := http.NewServeMux()
	s.Health(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "no leader") {
		t.Fatalf("readyz with a failing hook: %d %q", rec.Code, rec.Body.String())
	}
}

// logBuffer collects JSON log lines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the log lines as maps.
func (l *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestRequestIDs: every call's answer carries a request id of its own in
// the Docket-Request-Id header, the same id is the "req" of every log line
// about the call (a failed call, an unauthenticated one, one refused by the
// call limit), and two servers (a restart) do not hand out the same ids.
func TestRequestIDs(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, _, url, tok := tokenServer(t, Options{Logger: log})
	call := func(token, proc, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/docket.v1."+proc, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(RequestIDHeader)
	}
	q := `{"namespace":{"project":"acme","scope":"prod"},"queue":"q"`
	okCode, okID := call(tok["root"], "Queues/Counts", q+`}`)
	missCode, missID := call(tok["root"], "Queues/Get", q+`,"id":"7"}`)
	anonCode, anonID := call("", "Queues/Get", q+`,"id":"7"}`)
	if okCode != 200 || missCode != 404 || anonCode != 401 {
		t.Fatalf("codes %d %d %d", okCode, missCode, anonCode)
	}
	ids := map[string]bool{}
	for _, id := range []string{okID, missID, anonID} {
		if !strings.HasPrefix(id, s.boot+"-") || ids[id] {
			t.Fatalf("request ids %q, %q, %q: want distinct ids of this server", okID, missID, anonID)
		}
		ids[id] = true
	}
	logged := map[string]string{} // req → message
	for _, m := range logs.lines(t) {
		if req, ok := m["req"].(string); ok {
			logged[req] = m["msg"].(string)
		}
	}
	if logged[missID] != "docket: call failed" || logged[anonID] != "docket: unauthenticated call" {
		t.Fatalf("log lines by request id: %v (want %s failed, %s unauthenticated)", logged, missID, anonID)
	}
	if _, ok := logged[okID]; ok {
		t.Fatalf("a call that worked was logged: %v", logged)
	}

	// A call refused by the per-caller limit.
	limited := New(s.db, Options{MaxCalls: 1, Logger: log})
	if limited.boot == s.boot {
		t.Fatal("two servers share the request ids' prefix")
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	limited.onCall = func() {
		once.Do(func() {
			entered <- struct{}{}
			<-release
		})
	}
	lurl := rpcServer(t, limited)
	done := make(chan struct{})
	go func() {
		defer close(done)
		post(t, lurl+"/docket.v1.Queues/Counts", "application/json", strings.NewReader(q+`}`))
	}()
	<-entered
	code, _, h := post(t, lurl+"/docket.v1.Queues/Counts", "application/json", strings.NewReader(q+`}`))
	close(release)
	<-done
	id := h.Get(RequestIDHeader)
	if code != http.StatusTooManyRequests || !strings.HasPrefix(id, limited.boot+"-") {
		t.Fatalf("the refused call: %d, request id %q", code, id)
	}
	for _, m := range logs.lines(t) {
		if m["req"] == id {
			if m["msg"] != "docket: call failed" || m["code"] != "resource_exhausted" {
				t.Fatalf("the refused call's log line: %v", m)
			}
			return
		}
	}
	t.Fatalf("no log line for the refused call %s", id)
}
