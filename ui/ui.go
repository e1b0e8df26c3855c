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
	"net/url"
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
	// token comes from the Authorization header or from the dashboard's
	// sign-in form, which starts a session kept on the server: the
	// browser's cookie holds only the session's random id (HttpOnly,
	// SameSite=Lax, Secure under TLS). Every request checks the session's
	// token again, so a token Login stops accepting (revoked at a reload)
	// ends its sessions. A request without a valid token or session is sent
	// to the sign-in form, which then returns to the page asked for.
	Login func(token string) (engine.Caller, error)
	// SessionIdle ends a session after this long without a request
	// (default DefaultSessionIdle, 2 h); SessionLifetime ends it this long
	// after sign-in whatever its use (default DefaultSessionLifetime,
	// 12 h). At most MaxSessions are kept (default DefaultMaxSessions); a
	// new one beyond ends the least recently used. Time is the API's
	// clock.
	SessionIdle, SessionLifetime time.Duration
	MaxSessions                  int
	// As returns the view of the API that runs for caller. Default: the
	// API's own As method (engine.DB has one); an API without one cannot
	// serve callers and the dashboard says so.
	As func(engine.Caller) engine.API
	// AllowActions turns on the action buttons (redrive, cancel, run now,
	// delete completed, pause and resume).
	// Without it the dashboard is read-only and refuses every action with
	// 403. With it, a page shows the buttons only to a caller who may use
	// them (the admin permission on the namespace, when the API's view
	// reports its permissions as engine.DB.Permissions does).
	AllowActions bool
	// Cluster, if set, adds a cluster page (members, leader, lag). On a
	// node that is not the leader, pages read the node's own state (stale
	// reads, engine.WithStaleReads), say so in a banner naming the leader,
	// and offer no actions.
	Cluster ClusterInfo
	// Logger receives errors the dashboard could not show on a page.
	// Default slog.Default().
	Logger *slog.Logger
	// SampleEvery is how often queue totals are sampled for rates and
	// charts. Default 5 s. Handler samples when pages are viewed; New also
	// samples in the background.
	SampleEvery time.Duration
	// Samples is how many samples are kept per queue, in memory: the
	// charts' history. Default an hour's worth (720 at the default
	// period), 48 bytes each. A restarted dashboard starts empty.
	Samples int
	// MaxTrackedQueues bounds the queues whose samples are kept (default
	// DefaultMaxTrackedQueues). Past it, a queue seen for the first time
	// shows no rates or chart, and the overview says how many are left
	// out, until a tracked queue has gone unlisted for the history's
	// length.
	MaxTrackedQueues int
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

// DefaultMaxTrackedQueues is the default of Options.MaxTrackedQueues: with
// an hour of samples every 5 s, about 7 MB at most.
const DefaultMaxTrackedQueues = 200

// Dashboard is the dashboard's handler. Close stops its background sampler.
type Dashboard struct {
	api    engine.API
	opts   Options
	tmpl   map[string]*template.Template
	static http.Handler
	secret []byte
	rates  *sampler
	auth   *sessions
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
		o.Samples = max(2, int(time.Hour/o.SampleEvery))
	}
	if o.MaxTrackedQueues <= 0 {
		o.MaxTrackedQueues = DefaultMaxTrackedQueues
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
	if o.SessionIdle <= 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	if o.SessionLifetime <= 0 {
		o.SessionLifetime = DefaultSessionLifetime
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	d := &Dashboard{api: api, opts: o, secret: make([]byte, 32),
		auth: newSessions(o.SessionIdle, o.SessionLifetime, o.MaxSessions)}
	if _, err := rand.Read(d.secret); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	d.rates = newSampler(o.Samples, o.SampleEvery, o.MaxTrackedQueues)
	d.tmpl = templates()
	sub, _ := fs.Sub(staticFS, "static")
	d.static = http.StripPrefix(o.Prefix+"static/", http.FileServer(http.FS(sub)))
	return d
}

func (d *Dashboard) sampleLoop() {
	defer close(d.done)
	t := time.NewTicker(d.opts.SampleEvery)
	defer t.Stop()
	// Totals for rates may come from a follower's own state.
	ctx := engine.WithStaleReads(context.Background())
	d.sample(ctx, d.api)
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.sample(ctx, d.api)
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
	csrfCookie    = "docket_csrf"
	sessionCookie = "docket_session"
)

// hsts is the Strict-Transport-Security header sent under TLS: browsers
// then refuse plain HTTP to this host for a year.
const hsts = "max-age=31536000"

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
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", hsts)
	}
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
		if err := d.checkCSRF(r); err != nil {
			d.fail(w, r, http.StatusForbidden, err)
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
			target := d.opts.Prefix + "login"
			if next := r.URL.RequestURI(); r.Method != http.MethodPost && next != d.opts.Prefix {
				target += "?" + url.Values{"next": {next}}.Encode()
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
			return
		}
		d.fail(w, r, http.StatusUnauthorized, err)
		return
	}
	rq := &request{d: d, w: w, r: r, api: api, who: who, c: r.Context()}
	if d.opts.Cluster != nil && rel != "cluster" {
		rq.follower = d.followerOf(r.Context())
		if rq.follower != nil {
			rq.c = engine.WithStaleReads(rq.c)
		}
	}
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
	case "rates":
		rq.ratesJSON()
	case "kv":
		rq.kv()
	case "workers":
		rq.workers()
	case "periodic":
		rq.periodic()
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

// follower is what a page served by a node that is not the leader says.
type follower struct {
	Leader string // "" when no leader is known
	URL    string // the leader's dashboard, "" when unknown
	Err    string // why the node could not say, if it could not
}

// followerOf returns nil on the leader (or a node that does not name
// itself), else what its pages say: they then read the node's own state.
func (d *Dashboard) followerOf(ctx context.Context) *follower {
	st, err := d.opts.Cluster.ClusterStatus(ctx)
	if err != nil {
		return &follower{Err: err.Error()}
	}
	if st.Self == "" || st.Leader == st.Self {
		return nil
	}
	f := &follower{Leader: st.Leader}
	for _, m := range st.Members {
		if m.ID == st.Leader && m.ID != "" {
			if u, err := url.Parse(m.Address); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
				f.URL = strings.TrimSuffix(m.Address, "/") + d.opts.Prefix
			}
		}
	}
	return f
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
		tok, sid := BearerToken(r), ""
		if tok == "" {
			ck, err := r.Cookie(sessionCookie)
			if err != nil || ck.Value == "" {
				return nil, "", errors.New("not signed in")
			}
			var ok bool
			if tok, ok = d.auth.token(ck.Value, d.api.Clock().Now()); !ok {
				return nil, "", errors.New("not signed in: the session ended")
			}
			sid = ck.Value
		}
		var err error
		if c, err = d.opts.Login(tok); err != nil {
			if sid != "" {
				// The token was revoked since: so is every session made with it.
				d.auth.end(sid)
			}
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

// BearerToken returns the request's bearer token, from its Authorization
// header, "" if it has none. (A browser signed in through the dashboard's
// form holds a session id, not the token.)
func BearerToken(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
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

// checkCSRF accepts a POST only from this origin when the browser names
// one, and only with the token bound to the browser's CSRF cookie.
func (d *Dashboard) checkCSRF(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if !strings.HasSuffix(o, "://"+r.Host) {
			return fmt.Errorf("this form was sent from another site (%.100q), not from this dashboard (%.100q): refused", o, r.Host)
		}
	}
	c, err := r.Cookie(csrfCookie)
	got := r.PostForm.Get("csrf")
	if err != nil || c.Value == "" || got == "" || !hmac.Equal([]byte(got), []byte(d.sign(c.Value))) {
		return errors.New("the form's CSRF token is missing or wrong: reload the page and try again")
	}
	return nil
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if d.opts.Login == nil {
		d.fail(w, r, http.StatusNotFound, errors.New("this dashboard has no login: its program decides who you are"))
		return
	}
	var next string
	if r.Method == http.MethodPost {
		next = localTarget(d.opts.Prefix, r.PostForm.Get("next"))
	} else {
		next = localTarget(d.opts.Prefix, r.URL.Query().Get("next"))
	}
	data := map[string]any{"Next": next}
	status := http.StatusOK
	if r.Method == http.MethodPost {
		tok := strings.TrimSpace(r.PostForm.Get("token"))
		if _, err := d.opts.Login(tok); err != nil || tok == "" {
			data["Error"] = "That token was not accepted."
			status = http.StatusUnauthorized
		} else {
			if old, err := r.Cookie(sessionCookie); err == nil {
				d.auth.end(old.Value)
			}
			id := d.auth.start(tok, d.api.Clock().Now())
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: d.opts.Prefix, HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
			http.Redirect(w, r, next, http.StatusSeeOther)
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
	if c, err := r.Cookie(sessionCookie); err == nil {
		d.auth.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: d.opts.Prefix, MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	target := d.opts.Prefix
	if d.opts.Login != nil {
		target += "login"
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// fail renders an error page with status; a 403 is headed as a refusal.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	d.failAs(w, r, status, err, chrome{readOnly: d.readOnly()})
}

func (d *Dashboard) failAs(w http.ResponseWriter, r *http.Request, status int, err error, c chrome) {
	if status >= 500 {
		d.opts.Logger.Error("docket ui", "path", r.URL.Path, "err", err)
	}
	heading := http.StatusText(status)
	if status == http.StatusForbidden {
		heading = "Refused"
	}
	c.refresh = 0
	d.renderAs(w, r, status, "error", heading, "", c, map[string]any{"Status": status, "Err": err.Error()})
}

// readOnly is why the dashboard as a whole offers no actions, "" if it does.
func (d *Dashboard) readOnly() string {
	if !d.opts.AllowActions {
		return "The program serving this dashboard did not allow actions"
	}
	return ""
}

// page is what every template gets.
type page struct {
	Title, Heading string
	Prefix         string
	Nav            string
	CSRF           string
	Actions        bool   // the page may show the actions of its subject
	ReadOnly       string // why it shows none, for the read-only badge; "" for no badge
	Login          bool
	Cluster        bool
	Follower       *follower // set on a node that is not the leader
	Who            string
	Refresh        int // milliseconds; 0 turns live refresh off
	Data           any
}

// chrome is what a page shows around its content for the request: who is
// signed in, whether it may act, whether it refreshes, the follower banner.
type chrome struct {
	who      string
	refresh  time.Duration
	actions  bool
	readOnly string
	follower *follower
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name, heading, nav string, data any) {
	d.renderAs(w, r, status, name, heading, nav, chrome{readOnly: d.readOnly()}, data)
}

func (d *Dashboard) renderAs(w http.ResponseWriter, r *http.Request, status int, name, heading, nav string, c chrome, data any) {
	p := page{Title: d.opts.Title, Heading: heading, Prefix: d.opts.Prefix, Nav: nav, CSRF: d.csrfToken(w, r),
		Actions: c.actions, ReadOnly: c.readOnly, Login: d.opts.Login != nil && d.opts.Caller == nil,
		Cluster: d.opts.Cluster != nil, Follower: c.follower, Who: c.who, Refresh: int(c.refresh / time.Millisecond), Data: data}
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
