package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// logLines is a log destination a test can wait on.
type logLines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	wake chan struct{} // closed and replaced on every write
}

func newLogLines() *logLines { return &logLines{wake: make(chan struct{})} }

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.wake)
	l.wake = make(chan struct{})
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor returns once the log holds s, or fails the test after a while.
func (l *logLines) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		has, wake := strings.Contains(l.buf.String(), s), l.wake
		l.mu.Unlock()
		if has {
			return
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("the log never said %q:\n%s", s, l.String())
		}
	}
}

// served is a `docket serve` running in-process.
type served struct {
	base   string    // http://127.0.0.1:port, the url of its ready line
	ready  readyLine // the line it printed on stdout
	out    *logLines // its stdout
	log    *logLines
	reload chan struct{}
	stop   context.CancelFunc
	done   chan int
}

// serveInProcess runs `docket serve args...` on 127.0.0.1:0 and returns once
// it printed its ready line on stdout.
func serveInProcess(t *testing.T, args ...string) *served {
	t.Helper()
	cctx, cancel := context.WithCancel(context.Background())
	s := &served{out: newLogLines(), log: newLogLines(), reload: make(chan struct{}), stop: cancel, done: make(chan int, 1)}
	c := cli{stdout: s.out, stderr: s.log, dial: dialServer, reload: s.reload}
	exited := make(chan struct{})
	go func() {
		s.done <- runCLI(cctx, c, append([]string{"serve", "-listen", "127.0.0.1:0"}, args...))
		close(exited)
	}()
	line, ok := s.out.firstLine(exited, 30*time.Second)
	if !ok {
		cancel()
		t.Fatalf("serve gave no ready line:\n%s", s.log.String())
	}
	s.ready = parseReadyLine(t, line)
	s.base = s.ready.URL
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	return s
}

// firstLine waits for the first whole line written; false if exited is
// closed or d passes first.
func (l *logLines) firstLine(exited <-chan struct{}, d time.Duration) (string, bool) {
	deadline := time.After(d)
	for {
		l.mu.Lock()
		text, wake := l.buf.String(), l.wake
		l.mu.Unlock()
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			return text[:i+1], true
		}
		select {
		case <-wake:
		case <-exited:
			if text := l.String(); strings.Contains(text, "\n") {
				return text[:strings.IndexByte(text, '\n')+1], true
			}
			return "", false
		case <-deadline:
			return "", false
		}
	}
}

// parseReadyLine decodes serve's ready line, refusing unknown fields and
// anything but one JSON object on one line.
func parseReadyLine(t *testing.T, line string) readyLine {
	t.Helper()
	if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
		t.Fatalf("the ready line is not one line: %q", line)
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	var r readyLine
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("the ready line %q: %v", line, err)
	}
	if r.Event != "ready" || r.URL == "" || r.Listen == "" || r.PID == 0 {
		t.Fatalf("the ready line lacks a field: %q", line)
	}
	return r
}

// shutdown stops the server as SIGTERM does and returns its exit status.
func (s *served) shutdown(t *testing.T) int {
	t.Helper()
	s.stop()
	select {
	case code := <-s.done:
		s.done <- code // for the cleanup
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
		return -1
	}
}

// get fetches path with the bearer token (if any) and does not follow
// redirects.
func get(t *testing.T, base, path, token string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	cl := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestServeAnswersHealthMetricsAndDashboard starts serve in-process on
// loopback over a directory with tasks, checks each endpoint, then stops it
// as a signal would: it drains, stops, and closes the engine (the directory
// opens again).
func TestServeAnswersHealthMetricsAndDashboard(t *testing.T) {
	dir := dataDir(t)
	s := serveInProcess(t, "-dir", dir, "-metrics", "-ui", "-log-format", "json")
	for _, tc := range []struct{ path, want string }{
		{"/healthz", "ok"},
		{"/readyz", "ready"},
		{"/metrics", `docket_tasks{project="demo",queue="emails",scope="local",state="ready"} 2`},
		{"/metrics", `docket_tasks{project="demo",queue="emails",scope="local",state="dead"} 1`},
		{"/metrics", "go_goroutines"},
		{"/ui/", "emails"},
	} {
		code, _, body := get(t, s.base, tc.path, "")
		if code != 200 || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d, want 200 with %q:\n%.2000s", tc.path, code, tc.want, body)
		}
	}
	if code, h, _ := get(t, s.base, "/", ""); code != http.StatusFound || h.Get("Location") != "/ui/" {
		t.Errorf("GET /: %d to %q, want a redirect to the dashboard", code, h.Get("Location"))
	}
	if !strings.Contains(s.log.String(), `"msg":"docket: serving"`) {
		t.Errorf("the log is not JSON lines:\n%s", s.log.String())
	}
	if code := s.shutdown(t); code != 0 {
		t.Fatalf("exit %d after a clean stop:\n%s", code, s.log.String())
	}
	log := s.log.String()
	if d, st := strings.Index(log, "docket: draining"), strings.Index(log, "docket: stopped serving"); d < 0 || st < d {
		t.Fatalf("no drain then stop in the log:\n%s", log)
	}
	db, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatalf("the directory after serve stopped: %v", err)
	}
	db.Close()
}

// TestServeWithTokens: the dashboard signs in with a token, /metrics takes
// the token of a caller that may read every namespace, and a reload (what
// SIGHUP does) puts a rewritten tokens file in force.
func TestServeWithTokens(t *testing.T) {
	dir := dataDir(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	opsTok, opsLine, _ := server.NewToken("ops", "*/*:read+admin")
	appTok, appLine, _ := server.NewToken("app", "demo/local:read")
	newTok, newLine, _ := server.NewToken("ops2", "*/*:read")
	os.WriteFile(tokens, []byte(opsLine+"\n"+appLine+"\n"), 0o600)
	s := serveInProcess(t, "-dir", dir, "-tokens", tokens, "-metrics", "-ui")

	if code, _, _ := get(t, s.base, "/healthz", ""); code != 200 {
		t.Fatalf("healthz needs no token: %d", code)
	}
	code, h, _ := get(t, s.base, "/metrics", "")
	if code != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("metrics without a token: %d %v", code, h)
	}
	if code, _, body := get(t, s.base, "/metrics", appTok); code != 403 || !strings.Contains(body, "*/*:read") {
		t.Fatalf("metrics for a caller of one namespace: %d %s", code, body)
	}
	want := `docket_tasks{project="demo",queue="emails",scope="local",state="ready"} 2`
	if code, _, body := get(t, s.base, "/metrics", opsTok); code != 200 || !strings.Contains(body, want) || !strings.Contains(body, "docket_commits_total") {
		t.Fatalf("metrics for ops: %d\n%.3000s", code, body)
	}
	if code, h, _ := get(t, s.base, "/ui/", ""); code != http.StatusSeeOther || h.Get("Location") != "/ui/login" {
		t.Fatalf("the dashboard without a token: %d to %q", code, h.Get("Location"))
	}
	if code, _, body := get(t, s.base, "/ui/login", ""); code != 200 || !strings.Contains(body, `name="token"`) {
		t.Fatalf("the login form: %d\n%.2000s", code, body)
	}
	if code, _, body := get(t, s.base, "/ui/", appTok); code != 200 || !strings.Contains(body, "emails") {
		t.Fatalf("the dashboard for app: %d\n%.2000s", code, body)
	}

	os.WriteFile(tokens, []byte(newLine+"\n"), 0o600)
	s.reload <- struct{}{}
	s.reload <- struct{}{} // taken once the first reload is done
	if code, _, _ := get(t, s.base, "/metrics", opsTok); code != 401 {
		t.Fatalf("a token removed from the file still works after the reload: %d", code)
	}
	if code, _, body := get(t, s.base, "/metrics", newTok); code != 200 || !strings.Contains(body, want) {
		t.Fatalf("the new token after the reload: %d", code)
	}
	os.WriteFile(tokens, []byte("nonsense\n"), 0o600)
	s.reload <- struct{}{}
	s.reload <- struct{}{}
	s.log.waitFor(t, "tokens not reloaded")
	if code, _, _ := get(t, s.base, "/metrics", newTok); code != 200 {
		t.Fatalf("a tokens file that does not parse replaced the table in force: %d", code)
	}
	if code := s.shutdown(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log.String())
	}
}

// TestServeFlags: serve -h documents every flag and the signals; a flag
// that cannot work, or an exposed address without TLS and tokens, exits 2
// before the directory is touched.
func TestServeFlags(t *testing.T) {
	code, out, errs := docket(t, "serve", "-h")
	if code != 0 || errs != "" {
		t.Fatalf("serve -h: exit %d, %q", code, errs)
	}
	flags := []string{"-dir", "-listen", "-tls-cert", "-tls-key", "-tls-client-ca", "-tokens", "-insecure",
		"-durability", "-sync-every", "-max-payload", "-retain-completed", "-ui", "-ui-actions", "-metrics",
		"-max-wait", "-max-calls", "-max-parked", "-max-request", "-max-memory", "-value-threshold", "-body-timeout", "-busy-poll", "-allow-host", "-grace", "-log-level", "-log-format",
		"-addr-file", "-raft", "-raft-advertise", "-raft-peer", "-bootstrap", "-join", "-join-token", "-id", "-advertise-url"}
	for _, f := range append(flags, "SIGHUP", "SIGTERM", "/healthz", "/readyz", "Docket-Request-Id", "Docket-Limits", "DNS rebinding", `"event":"ready"`) {
		if !strings.Contains(out, f) {
			t.Errorf("serve -h does not document %s", f)
		}
	}
	// Every flag it lists has a line of explanation, and it lists no flag
	// this test does not know (add a new one above, and to the README).
	lines := strings.Split(out, "\n")
	listed := 0
	for i, line := range lines {
		name, isFlag := strings.CutPrefix(line, "  -")
		if !isFlag {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		listed++
		if !slices.Contains(flags, "-"+name) {
			t.Errorf("serve -h lists -%s, which this test does not know", name)
		}
		if i+1 >= len(lines) || len(strings.Fields(lines[i+1])) < 3 || !strings.HasPrefix(lines[i+1], "    \t") {
			t.Errorf("serve -h: -%s has no explanation", name)
		}
	}
	if listed != len(flags) {
		t.Errorf("serve -h lists %d flags; want %d", listed, len(flags))
	}
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-listen", ":7070"}, "refusing to serve beyond loopback without TLS and tokens: :7070 is reachable from other machines and has no TLS (-tls-cert and -tls-key) and no bearer tokens (-tokens); listen on 127.0.0.1, configure them, or pass -insecure"},
		{[]string{"-listen", "0.0.0.0:7070", "-tokens", "t"}, "has no TLS (-tls-cert and -tls-key);"},
		{[]string{"-listen", "10.1.2.3:7070", "-tls-cert", "c", "-tls-key", "k"}, "has no bearer tokens (-tokens);"},
		{[]string{"-listen", "127.0.0.1"}, "listen address"},
		{[]string{"-tls-cert", "c.pem"}, "both -tls-cert and -tls-key"},
		{[]string{"-tls-client-ca", "ca.pem"}, "-tls-client-ca needs TLS"},
		{[]string{"-durability", "sometimes"}, `unknown durability "sometimes"`},
		{[]string{"-max-wait", "0s"}, "-max-wait must be more than 0"},
		{[]string{"-grace", "-1s"}, "-grace must be more than 0"},
		{[]string{"-max-calls", "0"}, "-max-calls must be at least 1"},
		{[]string{"-body-timeout", "0s"}, "-body-timeout must be more than 0"},
		{[]string{"-busy-poll", "-1us"}, "-busy-poll cannot be negative"},
		{[]string{"-max-request", "1000"}, "-max-request must be between 1048576 and"},
		{[]string{"-max-request", "100000000"}, "-max-request must be between"},
		{[]string{"-allow-host", "a/b"}, `want a host name, got "a/b"`},
		{[]string{"-allow-host", "a,,b"}, `want a host name, got ""`},
		{[]string{"-max-payload", "0"}, "-max-payload must be at least 1"},
		{[]string{"-max-memory", "lots"}, `want a size in bytes such as 268435456, 256MiB or 4GiB, or off; got "lots"`},
		{[]string{"-max-memory", "-5"}, `got "-5"`},
		{[]string{"-value-threshold", "big"}, `got "big"`},
		{[]string{"-value-threshold", "8GiB"}, "more than the largest value"},
		{[]string{"-retain-completed", "-1h"}, "-retain-completed"},
		{[]string{"-ui-actions"}, "-ui-actions needs -ui"},
		{[]string{"-log-level", "loud"}, "-log-level"},
		{[]string{"-log-format", "xml"}, "-log-format"},
		{[]string{"somewhere"}, `unexpected argument "somewhere"`},
		{[]string{"-max-wait", "soon"}, "invalid value"},
	} {
		code, out, errs := docket(t, append([]string{"serve", "-dir", dir}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errs, tc.want) || strings.Count(errs, "docket:") > 1 {
			t.Errorf("serve %v: exit %d, stderr %q; want exit 2 saying %q", tc.args, code, errs, tc.want)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("a refused serve created the data directory")
	}
	// Insecure is allowed, and TLS plus tokens is enough, for the check.
	for _, args := range [][]string{
		{"-listen", ":0", "-insecure"},
		{"-listen", ":0", "-tls-cert", "c", "-tls-key", "k", "-tokens", "t"},
	} {
		if _, err := parseServe(cli{stdout: io.Discard, stderr: io.Discard}, args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestParseServe: the flags become the server's configuration.
func TestParseServe(t *testing.T) {
	sc, err := parseServe(cli{stdout: io.Discard, stderr: io.Discard}, []string{
		"-dir", "d", "-listen", "127.0.0.1:9", "-tls-cert", "c", "-tls-key", "k", "-tls-client-ca", "ca", "-tokens", "tk",
		"-durability", "interval", "-sync-every", "5ms", "-max-payload", "2048", "-retain-completed", "1h",
		"-ui", "-ui-actions", "-metrics", "-max-wait", "7s", "-max-calls", "3", "-max-parked", "4", "-grace", "9s", "-log-level", "warn",
		"-body-timeout", "3s", "-busy-poll", "80us", "-max-request", "2000000", "-allow-host", "proxy.example,docket.lan", "-allow-host", "other.lan",
	})
	if err != nil {
		t.Fatal(err)
	}
	c := sc.Config
	if c.Dir != "d" || c.Listen != "127.0.0.1:9" || c.TLSCert != "c" || c.TLSKey != "k" || c.TLSClientCA != "ca" || c.TokensFile != "tk" || c.Insecure {
		t.Errorf("files and address: %+v", c)
	}
	if e := c.Engine; e.Durability != engine.SyncInterval || e.SyncEvery != 5*time.Millisecond || e.MaxPayloadBytes != 2048 || e.RetainCompleted != time.Hour || e.Logger == nil {
		t.Errorf("engine options: %+v", e)
	}
	if s := c.Server; s.MaxWait != 7*time.Second || s.MaxCalls != 3 || s.MaxParked != 4 || s.BodyTimeout != 3*time.Second || s.BusyPoll != 80*time.Microsecond || s.MaxRequestBytes != 2000000 || s.Logger == nil {
		t.Errorf("server options: %+v", s)
	}
	if !slices.Equal(c.AllowHosts, []string{"proxy.example", "docket.lan", "other.lan"}) {
		t.Errorf("-allow-host: %q", c.AllowHosts)
	}
	if c.Grace != 9*time.Second || !sc.ui || !sc.uiActions || !sc.metrics {
		t.Errorf("grace, ui, metrics: %v %v %v %v", c.Grace, sc.ui, sc.uiActions, sc.metrics)
	}
	if sc.log.Enabled(context.Background(), -4) || !sc.log.Enabled(context.Background(), 4) {
		t.Error("-log-level warn is not in force")
	}
	sc, err = parseServe(cli{stdout: io.Discard, stderr: io.Discard}, []string{"-raft", "127.0.0.1:9", "-advertise-url", "http://node1.lan:7070"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sc.AllowHosts, []string{"node1.lan"}) {
		t.Errorf("with -advertise-url http://node1.lan:7070, the hosts answered to: %q", sc.AllowHosts)
	}
}

// TestServeRefusesALockedDirectory: a directory another process has open
// is reported, with exit 1, and nothing is served.
func TestServeRefusesALockedDirectory(t *testing.T) {
	dir := dataDir(t)
	db, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	code, _, errs := docket(t, "serve", "-dir", dir, "-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errs, "locked") || strings.Count(errs, "docket:") != 1 {
		t.Fatalf("exit %d, %q", code, errs)
	}
}

func TestTokenCommand(t *testing.T) {
	code, out, errs := docket(t, "token", "-json", "billing", "acme/prod:enqueue+work", "acme/*:read")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	res := decode[map[string]string](t, out)
	tok, err := server.ParseTokens(strings.NewReader(res["line"] + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := tok.Authenticate(res["token"])
	if !ok || c.ID != "billing" {
		t.Fatalf("the printed token does not authenticate as billing: %+v %v", c, ok)
	}
	if got := tok.Allowed(c, engine.NS("acme", "prod"), engine.PermWork|engine.PermAdmin); got != engine.PermWork {
		t.Fatalf("grants: %v", got)
	}
	if strings.Contains(res["line"], res["token"]) {
		t.Fatal("the tokens file line holds the token itself")
	}
	code, out, _ = docket(t, "token", "ops", "*/*:all")
	if code != 0 || !strings.Contains(out, "dk_") || !strings.Contains(out, "sha256:") {
		t.Fatalf("text: %d\n%s", code, out)
	}
}

// TestServeAnswersOnlyItsOwnHostNames: on loopback, serve refuses a
// request addressed to another name (DNS rebinding), on the API and the
// dashboard alike, and answers the names -allow-host adds; every API
// answer carries the Docket-Limits header.
func TestServeAnswersOnlyItsOwnHostNames(t *testing.T) {
	s := serveInProcess(t, "-ui", "-allow-host", "docket.lan", "-max-calls", "5", "-max-parked", "6")
	defer s.shutdown(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.base, "http://"))
	for host, want := range map[string]int{"rebound.example:" + port: 421, "docket.lan:" + port: 200, "localhost:" + port: 200} {
		for _, path := range []string{"/ui/", "/docket.v1.Queues/Counts"} {
			req, _ := http.NewRequest("POST", s.base+path, strings.NewReader(`{"namespace":{"project":"a","scope":"b"},"queue":"q"}`))
			if path == "/ui/" {
				req.Method = "GET"
			}
			req.Host = host
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("Host %s %s: %d %s; want %d", host, path, resp.StatusCode, body, want)
			}
			if want == 421 && !strings.Contains(string(body), "-allow-host") {
				t.Fatalf("the refusal does not say what to do: %s", body)
			}
			if want == 200 && path != "/ui/" && resp.Header.Get(server.LimitsHeader) != "calls=5, parked=6" {
				t.Fatalf("%s: %q", server.LimitsHeader, resp.Header.Get(server.LimitsHeader))
			}
		}
	}
}

// TestServeBusyPoll: -busy-poll is the server's BusyPoll, by default
// server.DefaultBusyPoll; 0 turns it off (a negative BusyPoll).
func TestServeBusyPoll(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{{nil, server.DefaultBusyPoll}, {[]string{"-busy-poll", "0"}, -1}, {[]string{"-busy-poll", "1ms"}, time.Millisecond}} {
		sc, err := parseServe(cli{stdout: io.Discard, stderr: io.Discard}, append([]string{"-dir", "d"}, tc.args...))
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got := sc.Config.Server.BusyPoll; got != tc.want {
			t.Errorf("%q: BusyPoll %v, want %v", tc.args, got, tc.want)
		}
	}
}
