package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docketdb/docket/engine"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the dashboard. The zero value is a read-only dashboard
// mounted at "/", running as the program itself.
type Options struct {
	// Prefix is the path the handler is mounted at, with a trailing slash
	// ("/docket/"). Default "/".
	Prefix string
	// Title is shown in the header and the window title. Default "docket".
	Title string
	// Caller maps a request to the caller the dashboard acts for; an error
	// refuses the request (401). Every read and action then runs through
	// the engine's authorizer for that caller (see As). Nil: the dashboard
	// runs as the program itself, unless Login is set.
	Caller func(*http.Request) (engine.Caller, error)
	// Login, if set and Caller is nil, maps a bearer token to a caller. The
	// token comes from the Authorization header or from the cookie set by
	// the dashboard's login form (HttpOnly, SameSite=Strict). A request
	// without a valid token is sent to the login form.
	Login func(token string) (engine.Caller, error)
	// As returns the view of the API that runs for caller. Default: the
	// API's own As method (engine.DB has one); an API without one cannot
	// serve callers and the dashboard says so.
	As func(engine.Caller) engine.API
	// AllowActions turns on the action buttons (redrive, cancel, run now,
	// delete completed, pause and resume).
	// Without it the dashboard is read-only and refuses every action with
	// 403.
	AllowActions bool
	// Cluster, if set, adds a cluster page (members, leader, lag).
	Cluster ClusterInfo
	// Logger receives errors the dashboard could not show on a page.
	// Default slog.Default().
	Logger *slog.Logger
	// SampleEvery is how often queue totals are sampled for rates. Default
	// 5 s. Handler samples when pages are viewed; New also samples in the
	// background.
	SampleEvery time.Duration
	// Samples is how many samples are kept per queue. Default 60 (five
	// minutes at the default period).
	Samples int
	// PageSize is the number of tasks on a queue page. Default 50, at most
	// 500.
	PageSize int
	// ScanWindow bounds how many tasks one filtered or grouped view reads.
	// Default 2000.
	ScanWindow int
	// Refresh is how often pages refresh themselves. Default 1.5 s.
	Refresh time.Duration
}

// ClusterInfo reports the state of a replicated deployment. The
// replication layer implements it; the dashboard only reads it, each time
// the cluster page is shown or refreshed, so it should answer from state the
// node already holds rather than by asking its peers.
type ClusterInfo interface {
	ClusterStatus(ctx context.Context) (ClusterStatus, error)
}

// ClusterStatus is a cluster at one moment, as one node sees it.
type ClusterStatus struct {
	// Self is the ID of the node that answered.
	Self string
	// Leader is the ID of the current leader, "" during an election.
	Leader string
	// Term is the current election term.
	Term uint64
	// CommitIndex is the highest log index known to be committed.
	CommitIndex uint64
	Members     []Member
}

// Member is one node of a cluster.
type Member struct {
	ID      string
	Address string
	Voter   bool
	// State is the node's role as last known: "leader", "follower",
	// "candidate", or "unreachable" when it cannot be asked.
	State string
	// CommitIndex and AppliedIndex are the node's own: the last log index
	// it knows is committed, and the last one it applied.
	CommitIndex, AppliedIndex uint64
	// Lag is how many entries the node is behind the leader's commit index.
	Lag uint64
	// LastContact is how long ago the leader last heard from the node
	// (zero for the leader itself).
	LastContact time.Duration
}

// Dashboard is the dashboard's handler. Close stops its background sampler.
type Dashboard struct {
	api    engine.API
	opts   Options
	tmpl   map[string]*template.Template
	static http.Handler
	secret []byte
	rates  *sampler
	warned atomic.Bool

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Handler returns the dashboard for api. Rates are sampled while pages are
// viewed; use New to sample in the background too.
func Handler(api engine.API, o Options) http.Handler { return build(api, o) }

// New returns the dashboard for api and starts sampling queue totals in the
// background, so rates have history when a page is first opened. Close
// stops the sampler.
func New(api engine.API, o Options) *Dashboard {
	d := build(api, o)
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go d.sampleLoop()
	return d
}

// Close stops the background sampler. It does not close the API.
func (d *Dashboard) Close() error {
	if d.stop != nil {
		d.once.Do(func() { close(d.stop); <-d.done })
	}
	return nil
}

func build(api engine.API, o Options) *Dashboard {
	if o.Prefix == "" {
		o.Prefix = "/"
	}
	if !strings.HasPrefix(o.Prefix, "/") {
		o.Prefix = "/" + o.Prefix
	}
	if !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.Title == "" {
		o.Title = "docket"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 5 * time.Second
	}
	if o.Samples <= 1 {
		o.Samples = 60
	}
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	o.PageSize = min(o.PageSize, 500)
	if o.ScanWindow <= 0 {
		o.ScanWindow = 2000
	}
	if o.Refresh <= 0 {
		o.Refresh = 1500 * time.Millisecond
	}
	d := &Dashboard{api: api, opts: o, secret: make([]byte, 32)}
	if _, err := rand.Read(d.secret); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	d.rates = newSampler(o.Samples, o.SampleEvery)
	d.tmpl = parseTemplates(o)
	sub, _ := fs.Sub(staticFS, "static")
	d.static = http.StripPrefix(o.Prefix+"static/", http.FileServer(http.FS(sub)))
	return d
}

func (d *Dashboard) sampleLoop() {
	defer close(d.done)
	t := time.NewTicker(d.opts.SampleEvery)
	defer t.Stop()
	d.sample(context.Background(), d.api)
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.sample(context.Background(), d.api)
		}
	}
}

// sample records the totals of every queue api sees. A failure is logged
// once: in secure mode the program's own view may not list queues, and
// page views then sample through their callers' views.
func (d *Dashboard) sample(ctx context.Context, api engine.API) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	qs, err := api.Queues(ctx)
	if err != nil {
		if d.warned.CompareAndSwap(false, true) {
			d.opts.Logger.Warn("docket ui: sampling queue totals", "err", err)
		}
		return
	}
	d.rates.add(api.Clock().Now(), qs)
}

const (
	csrfCookie  = "docket_csrf"
	tokenCookie = "docket_token"
)

// contentSecurityPolicy allows nothing but the dashboard's own script,
// stylesheet and requests: no inline script, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP implements http.Handler.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	path := r.URL.Path
	if !strings.HasPrefix(path, d.opts.Prefix) {
		if path+"/" == d.opts.Prefix {
			http.Redirect(w, r, d.opts.Prefix, http.StatusFound)
			return
		}
		http.NotFound(w, r)
		return
	}
	rel := strings.TrimPrefix(path, d.opts.Prefix)
	if strings.HasPrefix(rel, "static/") {
		h.Set("Cache-Control", "max-age=300")
		d.static.ServeHTTP(w, r)
		return
	}
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := r.ParseForm(); err != nil {
			d.fail(w, r, http.StatusBadRequest, fmt.Errorf("the form could not be read: %v", err))
			return
		}
		if !d.checkCSRF(r) {
			d.fail(w, r, http.StatusForbidden, errors.New("the form's CSRF token is missing or wrong: reload the page and try again"))
			return
		}
	} else if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, POST")
		d.fail(w, r, http.StatusMethodNotAllowed, fmt.Errorf("method %s is not allowed", r.Method))
		return
	}
	switch rel {
	case "login":
		d.login(w, r)
		return
	case "logout":
		d.logout(w, r)
		return
	}
	api, who, err := d.view(r)
	if err != nil {
		if d.opts.Caller == nil && d.opts.Login != nil {
			http.Redirect(w, r, d.opts.Prefix+"login", http.StatusSeeOther)
			return
		}
		d.fail(w, r, http.StatusUnauthorized, err)
		return
	}
	rq := &request{d: d, w: w, r: r, api: api, who: who}
	if r.Method == http.MethodPost {
		if rel != "action" {
			d.fail(w, r, http.StatusNotFound, errors.New("no such action"))
			return
		}
		rq.action()
		return
	}
	switch rel {
	case "":
		rq.overview()
	case "queue":
		rq.queue()
	case "task":
		rq.task()
	case "dead":
		rq.dead()
	case "kv":
		rq.kv()
	case "cluster":
		if d.opts.Cluster == nil {
			d.fail(w, r, http.StatusNotFound, errors.New("this dashboard has no cluster"))
			return
		}
		rq.cluster()
	default:
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("no page %q", rel))
	}
}

// view returns the API the request runs as, and the caller's id ("" for the
// program itself).
func (d *Dashboard) view(r *http.Request) (engine.API, string, error) {
	var c engine.Caller
	switch {
	case d.opts.Caller != nil:
		var err error
		if c, err = d.opts.Caller(r); err != nil {
			return nil, "", fmt.Errorf("not signed in: %w", err)
		}
	case d.opts.Login != nil:
		tok := BearerToken(r)
		if tok == "" {
			return nil, "", errors.New("not signed in")
		}
		var err error
		if c, err = d.opts.Login(tok); err != nil {
			return nil, "", fmt.Errorf("not signed in: %w", err)
		}
	default:
		return d.api, "", nil
	}
	if d.opts.As != nil {
		return d.opts.As(c), c.ID, nil
	}
	if a, ok := d.api.(interface {
		As(engine.Caller) *engine.DB
	}); ok {
		return a.As(c), c.ID, nil
	}
	return nil, "", errors.New("this API cannot act for a caller: set Options.As")
}

// BearerToken returns the request's bearer token, from the Authorization
// header or the dashboard's login cookie, "" if it has none.
func BearerToken(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	if c, err := r.Cookie(tokenCookie); err == nil {
		return c.Value
	}
	return ""
}

// csrfToken returns the token forms must carry, setting the cookie it is
// bound to if the browser has none yet.
func (d *Dashboard) csrfToken(w http.ResponseWriter, r *http.Request) string {
	var id string
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 64 {
		id = c.Value
	} else {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: id, Path: d.opts.Prefix, HttpOnly: true,
			Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
		// The request continues with the new cookie so the token matches it.
		r.AddCookie(&http.Cookie{Name: csrfCookie, Value: id})
	}
	return d.sign(id)
}

func (d *Dashboard) sign(id string) string {
	m := hmac.New(sha256.New, d.secret)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}

// checkCSRF accepts a POST only with the token bound to the browser's CSRF
// cookie, and only from this origin when the browser names one.
func (d *Dashboard) checkCSRF(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if !strings.HasSuffix(o, "://"+r.Host) {
			return false
		}
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	got := r.PostForm.Get("csrf")
	return got != "" && hmac.Equal([]byte(got), []byte(d.sign(c.Value)))
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if d.opts.Login == nil {
		d.fail(w, r, http.StatusNotFound, errors.New("this dashboard has no login: its program decides who you are"))
		return
	}
	data := map[string]any{}
	status := http.StatusOK
	if r.Method == http.MethodPost {
		tok := strings.TrimSpace(r.PostForm.Get("token"))
		if _, err := d.opts.Login(tok); err != nil || tok == "" {
			data["Error"] = "That token was not accepted."
			status = http.StatusUnauthorized
		} else {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: tok, Path: d.opts.Prefix, HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, d.opts.Prefix, http.StatusSeeOther)
			return
		}
	}
	d.render(w, r, status, "login", "Sign in", "", data)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		d.fail(w, r, http.StatusMethodNotAllowed, errors.New("sign out with the button"))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: "", Path: d.opts.Prefix, MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	target := d.opts.Prefix
	if d.opts.Login != nil {
		target += "login"
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// fail renders an error page with status.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status >= 500 {
		d.opts.Logger.Error("docket ui", "path", r.URL.Path, "err", err)
	}
	d.render(w, r, status, "error", http.StatusText(status), "", map[string]any{"Status": status, "Err": err.Error()})
}

// page is what every template gets.
type page struct {
	Title, Heading string
	Prefix         string
	Nav            string
	CSRF           string
	Actions        bool
	Login          bool
	Cluster        bool
	Who            string
	Refresh        int // milliseconds; 0 turns live refresh off
	Data           any
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name, heading, nav string, data any) {
	d.renderAs(w, r, status, name, heading, nav, "", 0, data)
}

func (d *Dashboard) renderAs(w http.ResponseWriter, r *http.Request, status int, name, heading, nav, who string, refresh time.Duration, data any) {
	p := page{Title: d.opts.Title, Heading: heading, Prefix: d.opts.Prefix, Nav: nav, CSRF: d.csrfToken(w, r),
		Actions: d.opts.AllowActions, Login: d.opts.Login != nil && d.opts.Caller == nil,
		Cluster: d.opts.Cluster != nil, Who: who, Refresh: int(refresh / time.Millisecond), Data: data}
	t := d.tmpl[name]
	var buf strings.Builder
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		d.opts.Logger.Error("docket ui: rendering", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}
