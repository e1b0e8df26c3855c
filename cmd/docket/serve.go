package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/bytesize"
	"github.com/docketdb/docket/server"
	"github.com/docketdb/docket/ui"
	"github.com/docketdb/docket/worker/metrics"
)

const serveAbout = `
Serves the data directory over the network: the API (gRPC, gRPC-Web and
JSON over HTTP at /docket.v1.*), /healthz (the process answers), /readyz
(ready for calls: not draining, the engine works), and with -ui the dashboard
at /ui/, with -metrics Prometheus metrics at /metrics.

Security: on a loopback address (127.0.0.1, ::1, localhost) every call runs
as the server itself, and the server answers only requests addressed to
localhost, a loopback address, the host of -advertise-url or an -allow-host
name (421 otherwise), so that no web page can reach it under a name of its
own (DNS rebinding). Any other address is refused unless it has both TLS
(-tls-cert, -tls-key) and bearer tokens (-tokens), or -insecure is given.
With -tokens each call runs as the caller its token maps to, with that
caller's grants; 'docket token' makes a token and its line of the file.

Signals: SIGHUP re-reads the tokens file and the TLS files (a file that does
not load leaves the previous one in force, and says so in the log). SIGTERM
and SIGINT drain: /readyz fails, waiting claims answer at once, calls in
progress finish (up to -grace), then the engine closes cleanly.

Cluster: with -raft the server is a node of a replicated docket (raft):
every write is acknowledged once a majority of the nodes have it on disk,
reads go to the leader unless the client asks for stale reads, and a
follower answers a call it cannot take with the leader's URL, which the
client follows. -bootstrap founds a cluster on the first node; the others
-join it. SIGTERM of the leader hands its leadership over first. 'docket
cluster' shows the members and changes them.

Limits: each caller may have -max-calls calls in progress and -max-parked
blocking claims waiting (a waiting claim counts against -max-parked only);
every answer says so in its Docket-Limits header ("calls=N, parked=M"), and
a call over one is refused naming it. A request's body must arrive within
-body-timeout and be at most -max-request bytes, sent or inflated (a
compressed body may inflate at most 32-fold past its first MiB); one over
the limit is refused as soon as it passes it, and its connection closed.
A request with a string over 64 KiB, a value (payload, result, progress,
KV value) over -max-payload or a list over the engine's element limits is
refused before it is decoded.

Ready: once it serves (listening, the engine open, with -raft the node
started and in its cluster), serve prints one JSON line on stdout, the only
thing it prints there, and with -addr-file writes the same line to a file
(a temporary file renamed into place; removed again when serve exits):

  {"event":"ready","pid":4242,"url":"http://127.0.0.1:7070",
   "listen":"127.0.0.1:7070","tls":false,"ui":"http://127.0.0.1:7070/ui/",
   "metrics":"http://127.0.0.1:7070/metrics","raft":"127.0.0.1:7071","id":"n1"}

url is the API's base URL (a wildcard host as its loopback address), listen
the address bound, so with port 0 the port picked; ui, metrics, raft (the
address raft gives its peers) and id (the node's) are there only with -ui,
-metrics and -raft. /readyz then says whether it takes calls (a node of a
cluster does once it knows a leader).

Logs are structured (slog) on stderr, one line per event, with a request id
on each refused or failed call; every answer carries its call's id in the
Docket-Request-Id header. Calls refused for a caller's limits (-max-calls,
-max-parked) are logged at most once a second, the line counting the
refusals since the last one logged as "unlogged": a client at its limit can
be refused thousands of times a second.`

// serveConfig is what the flags of serve make.
type serveConfig struct {
	server.Config
	ui, uiActions, metrics bool
	log                    *slog.Logger
	level                  slog.Level
	jsonLog                bool
	logw                   io.Writer     // where log lines go
	cluster                *clusterFlags // -raft and the flags of a node of a cluster
	addrFile               string        // -addr-file: where the ready line is written
}

func parseServe(c cli, args []string) (*serveConfig, error) {
	fs := newFlagsFor(c, "serve", "[-dir DIR] [-listen ADDR] [flags]", serveAbout)
	dir := fs.String("dir", "./docket-data", "data directory to serve (created if missing)")
	listen := fs.String("listen", "127.0.0.1:7070", "address to listen on, HOST:PORT (port 0 picks a free port; the ready line says which)")
	tlsCert := fs.String("tls-cert", "", "TLS certificate file (PEM); with -tls-key the server speaks HTTPS only")
	tlsKey := fs.String("tls-key", "", "TLS private key file (PEM)")
	clientCA := fs.String("tls-client-ca", "", "CA certificates file (PEM): every client must present a certificate signed by one (mutual TLS)")
	tokens := fs.String("tokens", "", "tokens file: one 'sha256:HASH CALLER GRANT...' line per token (see 'docket token'); re-read on SIGHUP")
	insecure := fs.Bool("insecure", false, "serve a non-loopback -listen without TLS or tokens: anyone who reaches it can do anything")
	durability := fs.String("durability", "always", "when a commit is acknowledged: always (fsynced, group-committed), interval (fsync every -sync-every), never (fsync left to the OS)")
	syncEvery := fs.Duration("sync-every", 10*time.Millisecond, "fsync period of -durability interval")
	maxPayload := fs.Int("max-payload", 1<<20, "largest payload, progress, result or KV value, in bytes")
	retain := fs.Duration("retain-completed", 0, "keep completed tasks and their results this long (0: delete them at once)")
	withUI := fs.Bool("ui", false, "serve the dashboard at /ui/: read-only unless -ui-actions; with -tokens behind a sign-in form that takes a token")
	uiActions := fs.Bool("ui-actions", false, "with -ui: offer the admin actions: redrive, cancel, run now, delete completed, reschedule and every other task action (with -tokens each needs the caller's admin permission)")
	withMetrics := fs.Bool("metrics", false, "serve Prometheus metrics at /metrics (with -tokens, to the bearer token of a caller granted read on */*)")
	maxWait := fs.Duration("max-wait", 60*time.Second, "longest a blocking claim waits before it answers empty (the client asks again)")
	maxCalls := fs.Int("max-calls", server.DefaultMaxCalls, "calls one caller may have in progress at once")
	maxParked := fs.Int("max-parked", server.DefaultMaxParked, "blocking claims one caller may have waiting at once")
	maxRequest := fs.Int64("max-request", server.DefaultMaxRequestBytes, fmt.Sprintf("largest request body in bytes, as sent and once inflated (at most %d: one commit of the engine's largest); a batch over it is refused", server.MaxRequestBytes))
	var maxMemory int64
	fs.Func("max-memory", "memory `budget` of the state: bytes, or with a unit (512MiB, 4GiB); past it writes that add tasks or KV entries are refused (default: a quarter of the machine's or the cgroup's memory; off: none)", func(v string) error {
		n, err := bytesize.Parse(v)
		maxMemory = n
		return err
	})
	var valueThreshold int64
	fs.Func("value-threshold", "`size` from which a payload, result or progress record is kept on disk in the value log instead of in memory: bytes, or with a unit (4KiB) (default 1KiB; off: every value in memory)", func(v string) error {
		n, err := bytesize.Parse(v)
		if err == nil && n > math.MaxInt32 {
			err = fmt.Errorf("%d bytes is more than the largest value", n)
		}
		valueThreshold = n
		return err
	})
	bodyTimeout := fs.Duration("body-timeout", server.DefaultBodyTimeout, "longest a request's body may take to arrive once its headers have (the answer of a blocking claim is not bounded by it)")
	var allowHosts []string
	fs.Func("allow-host", "on a loopback -listen, a Host `name` the server answers to besides localhost, 127.0.0.1 and [::1] (a proxy's name); repeat it or separate names with commas", func(v string) error {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h == "" || strings.ContainsAny(h, "/ ") {
				return fmt.Errorf("want a host name, got %q", h)
			}
			allowHosts = append(allowHosts, h)
		}
		return nil
	})
	busyPoll := fs.Duration("busy-poll", server.DefaultBusyPoll, "how long a session's reader, having answered every call of its client, asks for the next in a loop before it waits: a lone caller's next call then finds the server awake (on a virtual machine, waking a halted processor costs tens of microseconds a call); it spends a processor while it asks, at most GOMAXPROCS-1 sessions at once; 0: never")
	grace := fs.Duration("grace", server.DefaultGrace, "on SIGTERM or SIGINT, how long calls in progress may take before their connections are cut")
	logLevel := fs.String("log-level", "info", "least important log lines shown: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log lines as text (key=value) or json")
	addrFile := fs.String("addr-file", "", "once serving, write the ready line (the JSON printed on stdout: URL, bound addresses, pid) to this file, atomically; it is removed when serve exits")
	cf := addClusterFlags(fs)
	pos, err := parseMixed(c, fs, args)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := cf.check(set); err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, usageError{fmt.Sprintf("serve: unexpected argument %q (the directory is -dir DIR)", pos[0])}
	}
	mode, err := parseDurability(*durability)
	if err != nil {
		return nil, usageError{"serve: " + err.Error()}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"sync-every", *syncEvery}, {"max-wait", *maxWait}, {"grace", *grace}, {"body-timeout", *bodyTimeout}} {
		if f.d <= 0 {
			return nil, usageError{fmt.Sprintf("serve: -%s must be more than 0", f.name)}
		}
	}
	if *busyPoll < 0 {
		return nil, usageError{"serve: -busy-poll cannot be negative (0 turns it off)"}
	}
	if *retain < 0 {
		return nil, usageError{"serve: -retain-completed cannot be negative"}
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"max-payload", *maxPayload}, {"max-calls", *maxCalls}, {"max-parked", *maxParked}} {
		if f.n < 1 {
			return nil, usageError{fmt.Sprintf("serve: -%s must be at least 1", f.name)}
		}
	}
	if *maxRequest < 1<<20 || *maxRequest > server.MaxRequestBytes {
		return nil, usageError{fmt.Sprintf("serve: -max-request must be between %d and %d", 1<<20, server.MaxRequestBytes)}
	}
	if *uiActions && !*withUI {
		return nil, usageError{"serve: -ui-actions needs -ui"}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, usageError{fmt.Sprintf("serve: -log-level %q: want debug, info, warn or error", *logLevel)}
	}
	hopts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	logw := &lockedWriter{w: c.stderr} // slog's and raft's lines, one at a time
	switch *logFormat {
	case "text":
		log = slog.New(slog.NewTextHandler(logw, hopts))
	case "json":
		log = slog.New(slog.NewJSONHandler(logw, hopts))
	default:
		return nil, usageError{fmt.Sprintf("serve: -log-format %q: want text or json", *logFormat)}
	}
	haveTLS := *tlsCert != "" || *tlsKey != ""
	switch {
	case haveTLS && (*tlsCert == "" || *tlsKey == ""):
		return nil, usageError{"serve: TLS needs both -tls-cert and -tls-key"}
	case *clientCA != "" && !haveTLS:
		return nil, usageError{"serve: -tls-client-ca needs TLS (-tls-cert and -tls-key)"}
	}
	if err := server.CheckExposure(*listen, haveTLS, *tokens != "", *insecure); err != nil {
		return nil, usageError{message(err)}
	}
	if cf.url != nil && *cf.url != "" {
		if u, err := url.Parse(*cf.url); err == nil && u.Hostname() != "" {
			allowHosts = append(allowHosts, u.Hostname()) // clients are sent to it: it must answer to it
		}
	}
	return &serveConfig{
		Config: server.Config{
			Dir: *dir, Listen: *listen, TLSCert: *tlsCert, TLSKey: *tlsKey, TLSClientCA: *clientCA,
			TokensFile: *tokens, Insecure: *insecure, AllowHosts: allowHosts,
			Engine: engine.Options{Durability: mode, SyncEvery: *syncEvery, MaxPayloadBytes: *maxPayload,
				RetainCompleted: *retain, MaxMemory: maxMemory, ValueThreshold: int(valueThreshold), Logger: log},
			Server: server.Options{MaxCalls: *maxCalls, MaxParked: *maxParked, MaxWait: *maxWait, BodyTimeout: *bodyTimeout, BusyPoll: busyPollOption(*busyPoll),
				MaxRequestBytes: *maxRequest, Logger: log},
			Grace: *grace,
		},
		ui: *withUI, uiActions: *uiActions, metrics: *withMetrics, log: log,
		level: level, jsonLog: *logFormat == "json", logw: logw, cluster: cf, addrFile: *addrFile,
	}, nil
}

func runServe(ctx context.Context, c cli, args []string) error {
	sc, err := parseServe(c, args)
	if err != nil {
		return err
	}
	if b := sc.Engine.MaxMemory; b > 0 && os.Getenv("GOMEMLIMIT") == "" {
		// The state stays within its budget (and a completion's reserve);
		// the collector is told to keep the heap near it, with room for
		// the server's own buffers, rather than let it double between
		// collections.
		debug.SetMemoryLimit(memoryLimitFor(b))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sc.Reload = c.reload
	if sc.Reload == nil {
		sc.Reload = hangups(ctx)
	}
	var af *addrFile
	if sc.addrFile != "" {
		// Checked before anything is bound or opened: a path serve cannot
		// write stops it here.
		if af, err = openAddrFile(sc.addrFile); err != nil {
			return err
		}
		defer af.remove()
	}
	var readyErr error // the addr file not written: serve stops with it
	var coll *metrics.Collector
	if sc.metrics {
		coll = metrics.New(metrics.Options{Logger: sc.log})
		sc.Engine = coll.Observe(sc.Engine)
	}
	secure := sc.TokensFile != ""
	var rep *replica
	if sc.cluster.enabled() {
		open := sc.openReplica()
		sc.OpenReplica = func(ctx context.Context, opts engine.Options, listen net.Addr) (server.Replica, error) {
			r, err := open(ctx, opts, listen)
			if err == nil {
				rep = r.(*replica)
			}
			return r, err
		}
	}
	sc.Listening = func(a net.Addr) {
		line := newReadyLine(a, sc.TLSCert != "", sc.ui, sc.metrics)
		if rep != nil {
			line.Raft, line.ID = rep.node.Addr(), rep.node.ID()
		}
		b, err := json.Marshal(line)
		if err != nil {
			readyErr = err
			cancel()
			return
		}
		b = append(b, '\n')
		if af != nil {
			if err := af.publish(b); err != nil {
				readyErr = err
				cancel()
				return
			}
		}
		c.stdout.Write(b)
	}
	var dash *ui.Dashboard
	sc.Mount = func(db *engine.DB, s *server.Server, mux *http.ServeMux) error {
		if coll != nil {
			var extra []prometheus.Collector
			if rep != nil {
				extra = append(extra, raftCollector{rep})
			}
			mux.Handle("GET /metrics", newMetricsHandler(db, s, coll, secure, extra...))
		}
		if sc.ui {
			o := ui.Options{Prefix: "/ui/", AllowActions: sc.uiActions, Logger: sc.log}
			if rep != nil {
				o.Cluster = clusterView{rep}
			}
			if secure {
				o.Login = func(token string) (engine.Caller, error) {
					c, err := s.CallerForToken(token)
					if err != nil {
						return engine.Caller{}, err
					}
					return *c, nil
				}
				// The DB as opened may not list queues in secure mode:
				// rates are sampled through the viewers' callers.
				mux.Handle("/ui/", ui.Handler(db, o))
			} else {
				dash = ui.New(db, o)
				context.AfterFunc(ctx, func() { dash.Close() })
				mux.Handle("/ui/", dash)
			}
			mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
		}
		return nil
	}
	err = server.Run(ctx, sc.Config)
	if dash != nil {
		dash.Close()
	}
	if readyErr != nil {
		return readyErr
	}
	return err
}

// readyLine is what serve prints on stdout, and writes to -addr-file, once
// it serves (see serveAbout for the fields).
type readyLine struct {
	Event   string `json:"event"` // "ready"
	PID     int    `json:"pid"`
	URL     string `json:"url"`
	Listen  string `json:"listen"`
	TLS     bool   `json:"tls"`
	UI      string `json:"ui,omitempty"`
	Metrics string `json:"metrics,omitempty"`
	Raft    string `json:"raft,omitempty"`
	ID      string `json:"id,omitempty"`
}

// newReadyLine describes a server bound to a. Its URL names a wildcard
// host by the loopback address of its family, which reaches it from the
// same machine.
func newReadyLine(a net.Addr, tls, withUI, withMetrics bool) readyLine {
	host := a.String()
	if ta, ok := a.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		lo := net.IPv4(127, 0, 0, 1)
		if ta.IP.To4() == nil {
			lo = net.IPv6loopback
		}
		host = (&net.TCPAddr{IP: lo, Port: ta.Port}).String()
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	l := readyLine{Event: "ready", PID: os.Getpid(), URL: scheme + "://" + host, Listen: a.String(), TLS: tls}
	if withUI {
		l.UI = l.URL + "/ui/"
	}
	if withMetrics {
		l.Metrics = l.URL + "/metrics"
	}
	return l
}

// addrFile is -addr-file: a temporary file made in the file's directory
// when serve starts (so a path it cannot write stops it before it serves),
// renamed over the file once serve is ready.
type addrFile struct {
	path  string
	tmp   *os.File
	wrote []byte // what publish put there
}

func openAddrFile(path string) (*addrFile, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("serve: -addr-file %s is a directory", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("serve: -addr-file %s: cannot write in its directory: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil { // an address and a pid: anyone may read them
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("serve: -addr-file %s: %w", path, err)
	}
	return &addrFile{path: path, tmp: tmp}, nil
}

// publish writes b and renames it into place.
func (f *addrFile) publish(b []byte) error {
	_, err := f.tmp.Write(b)
	if cerr := f.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.tmp.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.tmp.Name())
		return fmt.Errorf("serve: -addr-file %s: %w", f.path, err)
	}
	f.wrote = b
	return nil
}

// remove takes away what serve wrote: the temporary file if it was never
// renamed, else the file, unless it no longer holds this server's line (a
// server started since wrote its own).
func (f *addrFile) remove() {
	if f.wrote == nil {
		f.tmp.Close()
		os.Remove(f.tmp.Name())
		return
	}
	if b, err := os.ReadFile(f.path); err == nil && bytes.Equal(b, f.wrote) {
		os.Remove(f.path)
	}
}

// hangups delivers on every SIGHUP until ctx ends.
func hangups(ctx context.Context) <-chan struct{} {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	out := make(chan struct{})
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
			}
			select {
			case <-ctx.Done():
				return
			case out <- struct{}{}:
			}
		}
	}()
	return out
}

// metricsHandler serves /metrics. With tokens, a scrape needs the bearer
// token of a caller who may read every namespace, since the series name
// every queue, and it reads the queues through that caller's view (the DB
// as opened refuses calls without a caller in secure mode); scrapes then
// take turns, as the Collector watches one view at a time.
type metricsHandler struct {
	db     *engine.DB
	srv    *server.Server
	coll   *metrics.Collector
	prom   http.Handler
	secure bool
	mu     sync.Mutex
}

func newMetricsHandler(db *engine.DB, s *server.Server, coll *metrics.Collector, secure bool, extra ...prometheus.Collector) *metricsHandler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(coll, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	if !secure {
		coll.Watch(db)
	}
	return &metricsHandler{db: db, srv: s, coll: coll, secure: secure,
		prom: promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})}
}

// everyNamespace is the namespace that only a grant on "*/*" matches, so a
// caller may read it exactly when it may read every namespace.
var everyNamespace = engine.NS("*", "*")

func (m *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !m.secure {
		m.prom.ServeHTTP(w, r)
		return
	}
	c, err := m.srv.Caller(r)
	if err != nil || c == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="docket"`)
		http.Error(w, "a valid bearer token is required", http.StatusUnauthorized)
		return
	}
	view := m.db.As(*c)
	// The engine answers whether the grants cover every namespace.
	if _, err := view.Queue(everyNamespace, "*").Counts(r.Context()); err != nil {
		if errors.Is(err, engine.ErrPermission) {
			http.Error(w, "metrics need a caller granted read on every namespace (*/*:read)", http.StatusForbidden)
			return
		}
		http.Error(w, strings.TrimPrefix(err.Error(), "docket: "), http.StatusServiceUnavailable)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.coll.Watch(scrapeView{view, m.db})
	m.prom.ServeHTTP(w, r)
}

// scrapeView reads queues as a caller and the engine's counters from the
// DB as opened (a caller's view has none).
type scrapeView struct {
	engine.API
	db *engine.DB
}

func (v scrapeView) Stats() engine.Stats { return v.db.Stats() }

const tokenAbout = `
Makes a random bearer token for CALLER and prints it with the line to add to
the tokens file of 'docket serve -tokens FILE' (then send the server SIGHUP).
The file keeps only the token's SHA-256, so keep the token: it is printed
once. A GRANT is PROJECT/SCOPE:PERMS, where PROJECT or SCOPE may be * and
PERMS joins enqueue, work, read, admin, kv-read, kv-write (or all) with +:

  docket token billing 'acme/prod:enqueue+work' 'acme/*:read'`

func runToken(ctx context.Context, c cli, args []string) error {
	fs := newFlagsFor(c, "token", "[-json] CALLER GRANT...", tokenAbout)
	asJSON := fs.Bool("json", false, "print JSON, for scripts")
	pos, err := parseMixed(c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usageError{"token: want a caller and at least one grant (docket token -h)"}
	}
	token, line, err := server.NewToken(pos[0], pos[1:]...)
	if err != nil {
		return usageError{message(err)}
	}
	if *asJSON {
		return writeJSON(c.stdout, map[string]string{"token": token, "line": line})
	}
	fmt.Fprintf(c.stdout, "# the bearer token for %s (printed once; the server keeps only its hash):\n%s\n", pos[0], token)
	fmt.Fprintf(c.stdout, "# the line for the tokens file (then: kill -HUP the server):\n%s\n", line)
	return nil
}

// memoryLimitFor is the Go runtime's soft memory limit docket serve sets
// for a memory budget of b bytes: the budget, the reserve completions may
// use beyond it (an eighth), and 64 MiB for everything else the process
// holds.
func memoryLimitFor(b int64) int64 { return b + b/8 + 64<<20 }

// busyPollOption is -busy-poll as server.Options.BusyPoll: 0 (never)
// is negative there, where 0 is the default.
func busyPollOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
