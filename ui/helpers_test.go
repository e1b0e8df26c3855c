package ui

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

var (
	ctx = context.Background()
	t0  = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ns  = engine.NS("acme", "prod")
)

const xss = `<script>document.title="pwned"</script>`

type env struct {
	t     *testing.T
	clock *engine.ManualClock
	db    *engine.DB
	srv   *httptest.Server
	dash  *Dashboard
	c     *http.Client
	kills int
}

// newEnv opens an in-memory DB on a manual clock and serves a dashboard
// for api(db) at /docket/.
func newEnv(t *testing.T, o Options, tweak ...func(*engine.Options)) *env {
	t.Helper()
	e := &env{t: t, clock: engine.NewManualClock(t0)}
	eo := engine.Options{Clock: e.clock, RetainCompleted: time.Hour}
	for _, f := range tweak {
		f(&eo)
	}
	db, err := engine.OpenInMemory(eo)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	t.Cleanup(func() { db.Close() })
	e.serve(db, o)
	return e
}

func (e *env) serve(api engine.API, o Options) {
	if o.Prefix == "" {
		o.Prefix = "/docket/"
	}
	mux := http.NewServeMux()
	e.dash = build(api, o)
	mux.Handle(o.Prefix, e.dash)
	if e.srv != nil {
		e.srv.Close()
	}
	e.srv = httptest.NewServer(mux)
	e.t.Cleanup(e.srv.Close)
	jar, _ := cookiejar.New(nil)
	e.c = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get fetches path and returns status and body.
func (e *env) get(path string) (int, string) {
	e.t.Helper()
	r, err := e.c.Get(e.srv.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

func (e *env) mustGet(path string) string {
	e.t.Helper()
	st, body := e.get(path)
	if st != http.StatusOK {
		e.t.Fatalf("GET %s: %d\n%s", path, st, body)
	}
	return body
}

func (e *env) post(path string, form url.Values) (int, string) {
	e.t.Helper()
	r, err := e.c.PostForm(e.srv.URL+path, form)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

var csrfRE = regexp.MustCompile(`name="(?:docket-)?csrf" (?:value|content)="([0-9a-f]+)"`)

// csrf loads a page to get the browser's CSRF cookie and the form token.
func (e *env) csrf() string {
	e.t.Helper()
	m := csrfRE.FindStringSubmatch(e.mustGet("/docket/"))
	if m == nil {
		e.t.Fatal("no CSRF token on the overview")
	}
	return m[1]
}

func (e *env) queue(name string) engine.Queue { return e.db.Queue(ns, name) }

func (e *env) enqueue(q engine.Queue, t engine.Task) uint64 {
	e.t.Helper()
	r, err := q.Enqueue(ctx, t)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

// kill dead-letters task id with the error text msg.
func (e *env) kill(q engine.Queue, msg string) uint64 {
	e.t.Helper()
	// Each dead task outranks everything enqueued before, so the claim
	// below takes it.
	e.kills++
	id := e.enqueue(q, engine.Task{Payload: []byte(`{}`), MaxAttempts: 1, Kind: "k", Priority: 1000 + e.kills})
	ls, err := q.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != id {
		e.t.Fatalf("claim: %v %v", ls, err)
	}
	if err := q.Fail(ctx, ls[0], engine.Failure{Err: msg}); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) state(q engine.Queue, id uint64) string {
	e.t.Helper()
	ti, err := q.Get(ctx, id)
	if err != nil {
		return err.Error()
	}
	return ti.State.String()
}

func mustContain(t *testing.T, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(body, s) {
			t.Fatalf("page lacks %q:\n%s", s, body)
		}
	}
}

func mustNotContain(t *testing.T, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(body, s) {
			t.Fatalf("page has %q:\n%s", s, body)
		}
	}
}

// countingAPI counts the task records the dashboard reads through it.
type countingAPI struct {
	engine.API
	lists, listed, gets, queues atomic.Int64
	totals                      map[string]engine.Totals
	attempts                    []engine.AttemptError // if set, replaces the attempt history Get answers
	sampled                     chan struct{}         // if set, told of each Queues call
}

func (c *countingAPI) Queue(ns engine.Namespace, name string) engine.Queue {
	return countingQueue{c.API.Queue(ns, name), c}
}

func (c *countingAPI) Queues(ctx context.Context) ([]engine.QueueInfo, error) {
	c.queues.Add(1)
	if c.sampled != nil {
		select {
		case c.sampled <- struct{}{}:
		default:
		}
	}
	qs, err := c.API.Queues(ctx)
	for i := range qs {
		if t, ok := c.totals[qs[i].Name]; ok {
			qs[i].Totals = t
		}
	}
	return qs, err
}

type countingQueue struct {
	engine.Queue
	c *countingAPI
}

func (q countingQueue) List(ctx context.Context, o engine.ListOptions) (engine.Page, error) {
	p, err := q.Queue.List(ctx, o)
	q.c.lists.Add(1)
	q.c.listed.Add(int64(len(p.Tasks)))
	return p, err
}

func (q countingQueue) Get(ctx context.Context, id uint64) (engine.TaskInfo, error) {
	q.c.gets.Add(1)
	t, err := q.Queue.Get(ctx, id)
	if q.c.attempts != nil {
		t.Errors = q.c.attempts
	}
	return t, err
}
