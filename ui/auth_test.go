package ui

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// rolesEnv serves a secure DB to whichever caller who names, with actions
// allowed: "reader" may read acme/*, "admin" may do anything.
func rolesEnv(t *testing.T) (*env, *string, engine.Queue) {
	t.Helper()
	policy := engine.Policy{
		"reader": {{Project: "acme", Scope: "*", Perms: engine.PermRead | engine.PermKVRead}},
		"admin":  {{Project: "*", Scope: "*", Perms: engine.PermAll}},
	}
	who := new(string)
	o := Options{AllowActions: true, Caller: func(r *http.Request) (engine.Caller, error) {
		return engine.Caller{ID: *who}, nil
	}}
	e := newEnv(t, o, func(eo *engine.Options) { eo.Secure, eo.Authorizer = true, policy })
	return e, who, e.db.As(engine.Caller{ID: "admin"}).Queue(ns, "jobs")
}

// actionMarks are what a page offering actions holds.
var actionMarks = []string{`action="/docket/action"`, `name="op"`, `type="checkbox"`}

// A caller who may only read is shown no action, on any page about the
// namespace; an admin is shown them; both see the same tasks.
func TestReadOnlyCallerSeesNoActions(t *testing.T) {
	e, who, q := rolesEnv(t)
	dead := e.kill(q, "boom")
	sched := e.enqueue(q, engine.Task{Delay: time.Hour})
	pages := []string{
		"/docket/queue?p=acme&s=prod&q=jobs&state=dead",
		"/docket/queue?p=acme&s=prod&q=jobs&state=scheduled",
		fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", dead),
		fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", sched),
		"/docket/dead?p=acme&s=prod&q=jobs",
	}
	for _, path := range pages {
		*who = "reader"
		body := e.mustGet(path)
		for _, m := range actionMarks[:2] {
			mustNotContain(t, body, m)
		}
		mustNotContain(t, body, `value="redrive"`, `value="cancel"`, `value="pause"`, `value="redrive-all"`, `value="redrive-error"`)
		mustContain(t, body, `title="You may not act on acme/prod: that needs the admin permission">read-only</span>`)
		*who = "admin"
		body = e.mustGet(path)
		mustContain(t, body, actionMarks[:2]...)
		mustNotContain(t, body, ">read-only</span>")
	}
	*who = "reader"
	mustNotContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=dead"), `type="checkbox"`)
	*who = "admin"
	mustContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=dead"), `type="checkbox"`, `value="redrive"`, `value="pause"`)
}

// An action refused for want of permission answers 403 with a page headed
// as a refusal, at the confirmation step and at the action itself, whether
// the dashboard knew the caller's permissions beforehand or the engine
// refused the call.
func TestRefusedActionReadsAsRefusal(t *testing.T) {
	e, who, q := rolesEnv(t)
	id := e.kill(q, "boom")
	*who = "reader"
	csrf := e.csrf()
	check := func(name string, form url.Values) {
		t.Helper()
		st, body := e.post("/docket/action", form)
		if st != http.StatusForbidden {
			t.Fatalf("%s: %d\n%s", name, st, body)
		}
		mustContain(t, body, "<h1>Refused</h1>", "<title>Refused · docket</title>", `caller &#34;reader&#34; lacks admin on acme/prod`, "Nothing changed.")
		mustNotContain(t, body, "Done", "Redrove")
		if e.state(q, id) != "dead" {
			t.Fatalf("%s: the task changed", name)
		}
	}
	form := url.Values{"csrf": {csrf}, "op": {"redrive"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "id": {fmt.Sprint(id)}}
	check("confirmation", form)
	form.Set("confirm", "yes")
	check("action", form)
	pause := url.Values{"csrf": {csrf}, "op": {"pause"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "confirm": {"yes"}}
	check("pause", pause)

	// An API whose views do not report permissions: the engine refuses.
	e.serve(&countingAPI{API: e.db.As(engine.Caller{ID: "reader"})}, Options{AllowActions: true})
	csrf = e.csrf()
	form.Set("csrf", csrf)
	pause.Set("csrf", csrf)
	check("engine's refusal", form)
	check("engine's refusal of a pause", pause)
}

// loginEnv serves a dashboard whose sign-in accepts the tokens of the map
// tokens holds (a reload replaces it).
type loginEnv struct {
	*env
	mu     sync.Mutex
	tokens map[string]string
}

func newLoginEnv(t *testing.T, o Options) *loginEnv {
	t.Helper()
	le := &loginEnv{tokens: map[string]string{"s3cret": "admin", "other": "admin"}}
	o.Login = func(tok string) (engine.Caller, error) {
		le.mu.Lock()
		defer le.mu.Unlock()
		if id, ok := le.tokens[tok]; ok {
			return engine.Caller{ID: id}, nil
		}
		return engine.Caller{}, errors.New("unknown token")
	}
	le.env = newEnv(t, o, func(eo *engine.Options) {
		eo.Secure, eo.Authorizer = true, engine.Policy{"admin": {{Project: "*", Scope: "*", Perms: engine.PermAll}}}
	})
	return le
}

func (le *loginEnv) revoke(tok string) {
	le.mu.Lock()
	defer le.mu.Unlock()
	delete(le.tokens, tok)
}

// signIn posts the sign-in form with token and next, as a browser without
// a session would, and returns the answer's redirect and the session id
// it set.
func (le *loginEnv) signIn(token, next string) (string, string) {
	le.t.Helper()
	r, err := http.Get(le.srv.URL + "/docket/login")
	if err != nil {
		le.t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	m := csrfRE.FindStringSubmatch(string(b))
	if m == nil || len(r.Cookies()) == 0 {
		le.t.Fatal("no CSRF token on the sign-in form")
	}
	form := url.Values{"csrf": {m[1]}, "token": {token}}
	if next != "" {
		form.Set("next", next)
	}
	req, _ := http.NewRequest("POST", le.srv.URL+"/docket/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range r.Cookies() {
		req.AddCookie(c)
	}
	r, err = http.DefaultTransport.RoundTrip(req)
	if err != nil {
		le.t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusSeeOther {
		le.t.Fatalf("sign in: %d", r.StatusCode)
	}
	for _, c := range r.Cookies() {
		if c.Name == sessionCookie {
			return r.Header.Get("Location"), c.Value
		}
	}
	le.t.Fatal("sign in set no session cookie")
	return "", ""
}

// getWith fetches path with only the session cookie id and returns the
// status and where it redirects.
func (le *loginEnv) getWith(id, path string) (int, string) {
	le.t.Helper()
	req, _ := http.NewRequest("GET", le.srv.URL+path, nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
	r, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		le.t.Fatal(err)
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return r.StatusCode, r.Header.Get("Location")
}

// The session cookie holds a random id, never the token; signing out ends
// the session on the server, so a copy of the old cookie is refused.
func TestSessionCookieAndLogout(t *testing.T) {
	le := newLoginEnv(t, Options{})
	_, id := le.signIn("s3cret", "")
	if len(id) != 64 || strings.Contains(id, "s3cret") {
		t.Fatalf("session id %q", id)
	}
	if st, _ := le.getWith(id, "/docket/"); st != http.StatusOK {
		t.Fatalf("signed in: %d", st)
	}
	if st, _ := le.getWith("s3cret", "/docket/"); st != http.StatusSeeOther {
		t.Fatalf("the token as a session cookie: %d", st)
	}
	le.c.Jar.SetCookies(mustURL(t, le.srv.URL+"/docket/"), []*http.Cookie{{Name: sessionCookie, Value: id, Path: "/docket/"}})
	m := csrfRE.FindStringSubmatch(le.mustGet("/docket/"))
	if st, _ := le.post("/docket/logout", url.Values{"csrf": {m[1]}}); st != http.StatusSeeOther {
		t.Fatalf("sign out: %d", st)
	}
	if st, loc := le.getWith(id, "/docket/"); st != http.StatusSeeOther || loc != "/docket/login" {
		t.Fatalf("the old cookie after sign-out: %d %q", st, loc)
	}
	if n := le.dash.auth.len(); n != 0 {
		t.Fatalf("%d sessions kept after sign-out", n)
	}
}

// A session ends after SessionIdle without a request and SessionLifetime
// after sign-in, on the API's clock.
func TestSessionExpiry(t *testing.T) {
	le := newLoginEnv(t, Options{SessionIdle: time.Hour, SessionLifetime: 3 * time.Hour})
	_, id := le.signIn("s3cret", "")
	le.clock.Advance(59 * time.Minute)
	if st, _ := le.getWith(id, "/docket/"); st != http.StatusOK {
		t.Fatalf("used within the idle time: %d", st)
	}
	le.clock.Advance(time.Hour)
	if st, _ := le.getWith(id, "/docket/"); st != http.StatusSeeOther {
		t.Fatalf("idle an hour: %d", st)
	}
	// Used every 50 minutes, it still ends 3 h after sign-in.
	_, id = le.signIn("s3cret", "")
	for range 3 {
		le.clock.Advance(50 * time.Minute)
		if st, _ := le.getWith(id, "/docket/"); st != http.StatusOK {
			t.Fatalf("in use: %d", st)
		}
	}
	le.clock.Advance(30 * time.Minute)
	if st, _ := le.getWith(id, "/docket/"); st != http.StatusSeeOther {
		t.Fatalf("3 h 20 m after sign-in: %d", st)
	}
}

// A token revoked (the tokens file reloaded without it) ends the sessions
// made with it, for good, and those of other tokens live on.
func TestRevokedTokenEndsSessions(t *testing.T) {
	le := newLoginEnv(t, Options{})
	_, a := le.signIn("s3cret", "")
	_, b := le.signIn("s3cret", "")
	_, other := le.signIn("other", "")
	le.revoke("s3cret")
	for _, id := range []string{a, b} {
		if st, _ := le.getWith(id, "/docket/"); st != http.StatusSeeOther {
			t.Fatalf("a session of a revoked token: %d", st)
		}
	}
	if st, _ := le.getWith(other, "/docket/"); st != http.StatusOK {
		t.Fatalf("a session of another token: %d", st)
	}
	le.mu.Lock()
	le.tokens["s3cret"] = "admin"
	le.mu.Unlock()
	if st, _ := le.getWith(a, "/docket/"); st != http.StatusSeeOther {
		t.Fatalf("a session ended by revocation came back: %d", st)
	}
}

// At most MaxSessions are kept: a new one ends the least recently used.
func TestMaxSessions(t *testing.T) {
	le := newLoginEnv(t, Options{MaxSessions: 2})
	_, a := le.signIn("s3cret", "")
	_, b := le.signIn("s3cret", "")
	le.getWith(a, "/docket/") // a is now the most recently used
	_, c := le.signIn("s3cret", "")
	for id, want := range map[string]int{a: 200, b: 303, c: 200} {
		if st, _ := le.getWith(id, "/docket/"); st != want {
			t.Errorf("session %.8s: %d, want %d", id, st, want)
		}
	}
	if n := le.dash.auth.len(); n != 2 {
		t.Fatalf("%d sessions kept, want 2", n)
	}
}

// Signing in returns to the page first asked for.
func TestSignInKeepsDeepLink(t *testing.T) {
	le := newLoginEnv(t, Options{})
	le.enqueue(le.db.As(engine.Caller{ID: "admin"}).Queue(ns, "jobs"), engine.Task{})
	deep := "/docket/queue?p=acme&s=prod&q=jobs&state=ready"
	r, err := le.c.Get(le.srv.URL + deep)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	loc := r.Header.Get("Location")
	if r.StatusCode != http.StatusSeeOther || loc != "/docket/login?next="+url.QueryEscape(deep) {
		t.Fatalf("signed out: %d %q", r.StatusCode, loc)
	}
	form := le.mustGet(loc)
	mustContain(t, form, `name="next" value="/docket/queue?p=acme&amp;s=prod&amp;q=jobs&amp;state=ready"`)
	if got, _ := le.signIn("s3cret", deep); got != deep {
		t.Fatalf("after sign-in: %q, want %q", got, deep)
	}
	if got, _ := le.signIn("s3cret", ""); got != "/docket/" {
		t.Fatalf("after sign-in without a page: %q", got)
	}
}

// A sign-in link cannot send the browser anywhere but a page of the
// dashboard.
func TestSignInRefusesOpenRedirects(t *testing.T) {
	le := newLoginEnv(t, Options{})
	for _, next := range []string{
		"//evil.example/docket/", "/\\evil.example", "/docket/\\evil.example", "https://evil.example/docket/",
		"http:/docket/", "javascript:alert(1)", "/docket/../../evil", "/elsewhere", "evil.example/docket/",
		"/docket/\r\nLocation: https://evil.example", "/docket/logout", "/docket/login?next=//evil.example",
		"/%2F%2Fevil.example", " /docket/",
	} {
		if got, _ := le.signIn("s3cret", next); got != "/docket/" {
			t.Errorf("next %q: redirected to %q", next, got)
		}
		if body := le.mustGet("/docket/login?next=" + url.QueryEscape(next)); !strings.Contains(body, `name="next" value="/docket/"`) {
			t.Errorf("next %q kept by the form", next)
		}
	}
}

// Under TLS the dashboard sends HSTS; over plain HTTP it does not.
func TestHSTSUnderTLS(t *testing.T) {
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := Handler(db, Options{Prefix: "/docket/"})
	tls := httptest.NewTLSServer(h)
	defer tls.Close()
	plain := httptest.NewServer(h)
	defer plain.Close()
	r, err := tls.Client().Get(tls.URL + "/docket/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if got := r.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
		t.Fatalf("HSTS under TLS: %q", got)
	}
	for _, c := range r.Cookies() {
		if !c.Secure {
			t.Fatalf("cookie %s without Secure under TLS", c.Name)
		}
	}
	r, err = plain.Client().Get(plain.URL + "/docket/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if got := r.Header.Get("Strict-Transport-Security"); got != "" {
		t.Fatalf("HSTS over plain HTTP: %q", got)
	}
}

// A form posted from another site is refused as such, not as a bad token.
func TestForeignOriginRefusedAsSuch(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	id := e.kill(e.queue("jobs"), "boom")
	form := url.Values{"csrf": {e.csrf()}, "op": {"redrive"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"},
		"id": {fmt.Sprint(id)}, "confirm": {"yes"}}
	req, _ := http.NewRequest("POST", e.srv.URL+"/docket/action", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	r, err := e.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: %d", r.StatusCode)
	}
	mustContain(t, string(b), "<h1>Refused</h1>", "sent from another site (&#34;https://evil.example&#34;)")
	mustNotContain(t, string(b), "CSRF token is missing")
	if e.state(e.queue("jobs"), id) != "dead" {
		t.Fatal("the task changed")
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// An action that did nothing for another reason than a refusal is headed
// as a failure, 409, with what went wrong.
func TestFailedActionHeadedAsFailure(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	e.enqueue(e.queue("jobs"), engine.Task{})
	st, body := e.post("/docket/action", url.Values{"csrf": {e.csrf()}, "op": {"cancel"}, "p": {"acme"}, "s": {"prod"},
		"q": {"jobs"}, "id": {"999"}, "confirm": {"yes"}})
	if st != http.StatusConflict {
		t.Fatalf("cancel of a missing task: %d\n%s", st, body)
	}
	mustContain(t, body, "<h1>Failed: cancel</h1>", "Cancelled 0 of 1 task.", "<h2>Not done</h2>", "task 999")
	mustNotContain(t, body, "Done", "Refused")
}
