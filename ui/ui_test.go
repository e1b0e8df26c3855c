package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

func TestPagesRenderEveryState(t *testing.T) {
	e := newEnv(t, Options{Cluster: fakeCluster{}})
	q := e.queue("mail")
	ready := e.enqueue(q, engine.Task{Payload: []byte(`{"to":"a@b.c","n":[1,2]}`), Kind: "send",
		Headers: map[string]string{"traceparent": "00-abc"}, Priority: 3})
	sched := e.enqueue(q, engine.Task{Payload: []byte(`{}`), Delay: time.Hour})
	dead := e.kill(q, "smtp: 550 mailbox unavailable")
	e.enqueue(q, engine.Task{Payload: []byte(`{"x":1}`), Priority: 5})
	ls, err := q.Claim(ctx, "worker-7", time.Minute, 1)
	if err != nil || len(ls) != 1 {
		t.Fatal(ls, err)
	}
	if _, err := e.db.KV(ns).Commit(ctx, engine.Set("user/1", []byte(`{"name":"ann"}`))); err != nil {
		t.Fatal(err)
	}

	body := e.mustGet("/docket/")
	mustContain(t, body, "acme/prod", ">mail</a>", "read-only", "static/app.js")
	body = e.mustGet("/docket/queue?p=acme&s=prod&q=mail")
	mustContain(t, body, fmt.Sprintf(">%d</a>", ready), "send", "ready <span class=\"n\">1</span>")
	body = e.mustGet("/docket/queue?p=acme&s=prod&q=mail&state=scheduled")
	mustContain(t, body, fmt.Sprintf(">%d</a>", sched), "in 1h00m")
	body = e.mustGet("/docket/queue?p=acme&s=prod&q=mail&state=in-flight")
	mustContain(t, body, fmt.Sprintf(">%d</a>", ls[0].ID))
	body = e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=mail&id=%d", ls[0].ID))
	mustContain(t, body, "<strong>worker-7</strong> until", "in 1m00s", "&#34;x&#34;: 1")
	body = e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=mail&id=%d", ready))
	mustContain(t, body, "traceparent", "00-abc", "&#34;n&#34;: [\n    1,")
	body = e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=mail&id=%d", dead))
	mustContain(t, body, "smtp: 550 mailbox unavailable", "dead-lettered")

	// Every failed attempt is listed in order with its time and error.
	e.serve(&countingAPI{API: e.db, attempts: []engine.AttemptError{
		{Attempt: 1, At: t0.Add(time.Second), Error: "dial tcp: timeout"},
		{Attempt: 2, At: t0.Add(3 * time.Second), Error: "smtp: 550 mailbox unavailable"}}}, Options{Cluster: fakeCluster{}})
	body = e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=mail&id=%d", dead))
	mustContain(t, body, "attempt 1, 2030-01-02 03:04:06.000 UTC", "dial tcp: timeout", "attempt 2, 2030-01-02 03:04:08.000 UTC")
	if strings.Index(body, "dial tcp") > strings.Index(body, "attempt 2,") {
		t.Fatal("attempts out of order")
	}
	body = e.mustGet("/docket/dead?p=acme&s=prod&q=mail")
	mustContain(t, body, "<strong>1</strong> dead task in 1 group", "smtp: 550 mailbox unavailable")
	body = e.mustGet("/docket/kv?p=acme&s=prod&prefix=user/")
	mustContain(t, body, "user/1", "&#34;name&#34;: &#34;ann&#34;")
	body = e.mustGet("/docket/cluster")
	mustContain(t, body, "n1", "10.0.0.2:7000", "follower")
}

type fakeCluster struct{}

func (fakeCluster) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	return ClusterStatus{Leader: "n1", Members: []Member{
		{ID: "n1", Address: "10.0.0.1:7000", Voter: true, State: "leader", AppliedIndex: 90},
		{ID: "n2", Address: "10.0.0.2:7000", Voter: true, State: "follower", AppliedIndex: 88, Lag: 2, LastContact: 40 * time.Millisecond},
	}}, nil
}

func TestNoClusterPageWithoutCluster(t *testing.T) {
	e := newEnv(t, Options{})
	if st, _ := e.get("/docket/cluster"); st != http.StatusNotFound {
		t.Fatalf("cluster page without a cluster: %d", st)
	}
	mustNotContain(t, e.mustGet("/docket/"), ">Cluster</a>")
}

// A payload, error, kind, header, key and queue name holding markup are
// shown as text, never as markup, on every page that shows them.
func TestScriptInDataIsEscaped(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("x<script>q")
	id := e.enqueue(q, engine.Task{Payload: []byte(`{"html":"` + strings.ReplaceAll(xss, `"`, `\"`) + `"}`), Kind: xss,
		Headers: map[string]string{xss: xss}})
	dead := e.kill(q, xss)
	if _, err := e.db.KV(ns).Commit(ctx, engine.Set("k"+xss, []byte(`"`+strings.ReplaceAll(xss, `"`, `\"`)+`"`))); err != nil {
		t.Fatal(err)
	}
	qq := url.Values{"p": {"acme"}, "s": {"prod"}, "q": {"x<script>q"}}.Encode()
	for _, path := range []string{"/docket/", "/docket/queue?" + qq, "/docket/queue?state=dead&" + qq,
		fmt.Sprintf("/docket/task?id=%d&%s", id, qq), fmt.Sprintf("/docket/task?id=%d&%s", dead, qq),
		"/docket/dead?" + qq, "/docket/kv?p=acme&s=prod", "/docket/queue?kind=" + url.QueryEscape(xss) + "&" + qq} {
		body := e.mustGet(path)
		if n := strings.Count(body, "<script"); n != 2 {
			t.Fatalf("%s: %d <script elements, want only the dashboard's own two:\n%s", path, n, body)
		}
		mustContain(t, body, `<script src="/docket/static/vendor/uplot/uPlot.iife.min.js" defer></script>
<script src="/docket/static/app.js" defer></script>`)
	}
	body := e.mustGet(fmt.Sprintf("/docket/task?id=%d&%s", dead, qq))
	mustContain(t, body, "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;")
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, Options{})
	r, err := e.c.Get(e.srv.URL + "/docket/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	csp := r.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Fatalf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Fatalf("CSP allows inline code: %q", csp)
	}
	if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers: %v", r.Header)
	}
	var csrf *http.Cookie
	for _, c := range r.Cookies() {
		if c.Name == csrfCookie {
			csrf = c
		}
	}
	if csrf == nil || !csrf.HttpOnly || csrf.SameSite != http.SameSiteStrictMode || csrf.Path != "/docket/" {
		t.Fatalf("CSRF cookie: %+v", csrf)
	}
	// No page carries inline script or style attributes the CSP would block.
	body := e.mustGet("/docket/kv")
	if regexp.MustCompile(`<script>|\son[a-z]+=|style=`).MatchString(body) {
		t.Fatalf("inline script or style:\n%s", body)
	}
	for _, asset := range []string{"/docket/static/app.js", "/docket/static/app.css"} {
		if st, b := e.get(asset); st != http.StatusOK || len(b) < 100 {
			t.Fatalf("%s: %d, %d bytes", asset, st, len(b))
		}
	}
}

func TestReadOnlyByDefault(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.queue("jobs")
	id := e.kill(q, "boom")
	body := e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=dead")
	mustNotContain(t, body, `value="redrive"`, `value="cancel"`, `type="checkbox"`)
	st, body := e.post("/docket/action", url.Values{"csrf": {e.csrf()}, "op": {"redrive"}, "p": {"acme"}, "s": {"prod"},
		"q": {"jobs"}, "id": {fmt.Sprint(id)}, "confirm": {"yes"}})
	if st != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Fatalf("action on a read-only dashboard: %d\n%s", st, body)
	}
	if s := e.state(q, id); s != "dead" {
		t.Fatalf("task is %s after a refused action", s)
	}
}

func TestActionNeedsCSRF(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	id := e.kill(q, "boom")
	good := e.csrf()
	form := func(tok string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"redrive"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"},
			"id": {fmt.Sprint(id)}, "confirm": {"yes"}}
	}
	for name, tok := range map[string]string{"missing": "", "wrong": strings.Repeat("0", 64), "truncated": good[:20]} {
		if st, body := e.post("/docket/action", form(tok)); st != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Fatalf("%s token: %d\n%s", name, st, body)
		}
	}
	// A token is bound to its browser's cookie: another browser's is refused.
	other := newEnv(t, Options{AllowActions: true})
	other.serve(e.db, Options{AllowActions: true})
	if st, _ := other.post("/docket/action", form(good)); st != http.StatusForbidden {
		t.Fatalf("a token of another browser: %d", st)
	}
	// A cross-origin form is refused even with a valid token.
	req, _ := http.NewRequest("POST", e.srv.URL+"/docket/action", strings.NewReader(form(good).Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if r, err := e.c.Do(req); err != nil || r.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin post: %v %v", r.StatusCode, err)
	}
	if s := e.state(q, id); s != "dead" {
		t.Fatalf("task is %s after refused actions", s)
	}
	if st, body := e.post("/docket/action", form(good)); st != http.StatusOK || !strings.Contains(body, "Redrove 1 of 1 task.") {
		t.Fatalf("good token: %d\n%s", st, body)
	}
	if s := e.state(q, id); s != "ready" {
		t.Fatalf("task is %s after redrive", s)
	}
}

func TestActionsConfirmThenReport(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	a, b, c := e.kill(q, "x"), e.kill(q, "x"), e.kill(q, "y")
	tok := e.csrf()
	form := url.Values{"csrf": {tok}, "op": {"redrive"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"},
		"id": {fmt.Sprint(a), fmt.Sprint(b)}}
	body := e.mustGetPost(form)
	mustContain(t, body, "Confirm redrive", "2 tasks of acme/prod · jobs", `name="confirm" value="yes"`)
	if e.state(q, a) != "dead" || e.state(q, b) != "dead" {
		t.Fatal("the confirmation page changed state")
	}
	form.Set("confirm", "yes")
	body = e.mustGetPost(form)
	mustContain(t, body, "Redrove 2 of 2 tasks.")
	if e.state(q, a) != "ready" || e.state(q, b) != "ready" || e.state(q, c) != "dead" {
		t.Fatalf("states %s %s %s", e.state(q, a), e.state(q, b), e.state(q, c))
	}
	// Redriving a task that is no longer dead is reported, not hidden.
	st, body := e.post("/docket/action", form)
	if st != http.StatusConflict || !strings.Contains(body, "Redrove 0 of 2 tasks.") || !strings.Contains(body, "not dead") {
		t.Fatalf("second redrive: %d\n%s", st, body)
	}
	d := e.kill(q, "z")
	body = e.mustGetPost(url.Values{"csrf": {tok}, "op": {"redrive-all"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "confirm": {"yes"}})
	mustContain(t, body, "Redrove 2 tasks.")
	if e.state(q, c) != "ready" || e.state(q, d) != "ready" {
		t.Fatal("redrive-all left dead tasks")
	}
	body = e.mustGetPost(url.Values{"csrf": {tok}, "op": {"cancel"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"},
		"id": {fmt.Sprint(a)}, "confirm": {"yes"}})
	mustContain(t, body, "Cancelled 1 of 1 task.")
	if s := e.state(q, a); !strings.Contains(s, "not found") {
		t.Fatalf("cancelled task: %s", s)
	}
}

func (e *env) mustGetPost(form url.Values) string {
	e.t.Helper()
	st, body := e.post("/docket/action", form)
	if st != http.StatusOK {
		e.t.Fatalf("POST action %v: %d\n%s", form, st, body)
	}
	return body
}

func TestDeleteCompleted(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	var ids []uint64
	for i := range 5 {
		e.enqueue(q, engine.Task{Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	ls, err := q.Claim(ctx, "w", time.Minute, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if _, err := q.Complete(ctx, l, engine.Done{Result: []byte(`{"ok":true}`)}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.ID)
	}
	live := e.enqueue(q, engine.Task{})
	tok := e.csrf()
	body := e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", ids[0]))
	mustContain(t, body, "&#34;ok&#34;: true", `value="delete-completed"`)
	// A task that is not completed is refused by "delete completed".
	st, body := e.post("/docket/action", url.Values{"csrf": {tok}, "op": {"delete-completed"}, "p": {"acme"}, "s": {"prod"},
		"q": {"jobs"}, "id": {fmt.Sprint(live)}, "confirm": {"yes"}})
	if st != http.StatusConflict || !strings.Contains(body, "not completed") || e.state(q, live) != "ready" {
		t.Fatalf("delete of a ready task: %d\n%s", st, body)
	}
	body = e.mustGetPost(url.Values{"csrf": {tok}, "op": {"delete-completed"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"},
		"id": {fmt.Sprint(ids[0])}, "confirm": {"yes"}})
	mustContain(t, body, "Deleted 1 of 1 task.")
	body = e.mustGetPost(url.Values{"csrf": {tok}, "op": {"delete-completed-all"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "confirm": {"yes"}})
	mustContain(t, body, "Deleted 4 tasks.")
	if n, _ := q.Counts(ctx); n.Completed != 0 || n.Ready != 1 {
		t.Fatalf("counts after delete: %+v", n)
	}
}

func TestRunNowMakesATaskDue(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	id := e.enqueue(q, engine.Task{Delay: time.Hour})
	page := fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", id)
	mustContain(t, e.mustGet(page), `value="run-now"`)
	mustContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=scheduled"), `value="run-now"`)
	form := url.Values{"csrf": {e.csrf()}, "op": {"run-now"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "id": {fmt.Sprint(id)}, "confirm": {"yes"}}
	mustContain(t, e.mustGetPost(form), "Made due 1 of 1 task.")
	info, err := q.Get(context.Background(), id)
	if err != nil || info.State != engine.Ready {
		t.Fatalf("after run now: %v %v; want ready", info.State, err)
	}
}

// Actions run as the request's caller, so the engine's authorizer decides:
// a reader sees the pages but cannot redrive.
func TestActionsNeedAdmin(t *testing.T) {
	policy := engine.Policy{
		"reader": {{Project: "acme", Scope: "*", Perms: engine.PermRead | engine.PermKVRead}},
		"admin":  {{Project: "*", Scope: "*", Perms: engine.PermAll}},
	}
	who := "reader"
	o := Options{AllowActions: true, Caller: func(r *http.Request) (engine.Caller, error) {
		if who == "" {
			return engine.Caller{}, errors.New("no session")
		}
		return engine.Caller{ID: who}, nil
	}}
	e := newEnv(t, o, func(eo *engine.Options) { eo.Secure, eo.Authorizer = true, policy })
	q := e.db.As(engine.Caller{ID: "admin"}).Queue(ns, "jobs")
	id := e.kill(q, "boom")
	mustContain(t, e.mustGet("/docket/"), `<span class="who">reader</span>`, ">jobs</a>")
	form := url.Values{"csrf": {e.csrf()}, "op": {"redrive"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "id": {fmt.Sprint(id)}, "confirm": {"yes"}}
	st, body := e.post("/docket/action", form)
	if st != http.StatusForbidden || !strings.Contains(body, "lacks admin") {
		t.Fatalf("reader redrive: %d\n%s", st, body)
	}
	if e.state(q, id) != "dead" {
		t.Fatal("a reader's redrive changed the task")
	}
	who = "admin"
	mustContain(t, e.mustGetPost(form), "Redrove 1 of 1 task.")
	who = ""
	if st, _ := e.get("/docket/"); st != http.StatusUnauthorized {
		t.Fatalf("no caller: %d", st)
	}
	who = "stranger"
	body = e.mustGet("/docket/")
	mustNotContain(t, body, ">jobs</a>")
}

func TestLoginForm(t *testing.T) {
	tokens := map[string]string{"s3cret": "admin"}
	e := newEnv(t, Options{Login: func(tok string) (engine.Caller, error) {
		if id, ok := tokens[tok]; ok {
			return engine.Caller{ID: id}, nil
		}
		return engine.Caller{}, errors.New("unknown token")
	}}, func(eo *engine.Options) {
		eo.Secure, eo.Authorizer = true, engine.Policy{"admin": {{Project: "*", Scope: "*", Perms: engine.PermAll}}}
	})
	r, err := e.c.Get(e.srv.URL + "/docket/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/docket/login" {
		t.Fatalf("signed out: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	m := csrfRE.FindStringSubmatch(e.mustGet("/docket/login"))
	if m == nil {
		t.Fatal("no CSRF token on the login form")
	}
	if st, _ := e.post("/docket/login", url.Values{"token": {"s3cret"}}); st != http.StatusForbidden {
		t.Fatalf("login without CSRF: %d", st)
	}
	if st, body := e.post("/docket/login", url.Values{"csrf": {m[1]}, "token": {"nope"}}); st != http.StatusUnauthorized || !strings.Contains(body, "not accepted") {
		t.Fatalf("bad token: %d", st)
	}
	resp, err := e.c.PostForm(e.srv.URL+"/docket/login", url.Values{"csrf": {m[1]}, "token": {"s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var tc *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			tc = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || tc == nil || !tc.HttpOnly || tc.SameSite != http.SameSiteLaxMode || tc.Path != "/docket/" {
		t.Fatalf("login: %d cookie %+v", resp.StatusCode, tc)
	}
	// The browser holds a random session id, not the token.
	if len(tc.Value) != 64 || strings.Contains(tc.Value, "s3cret") || strings.Contains(resp.Header.Get("Set-Cookie"), "s3cret") {
		t.Fatalf("session cookie %q", tc.Value)
	}
	mustContain(t, e.mustGet("/docket/"), `<span class="who">admin</span>`, "Sign out")
	// A bearer header works without the cookie (a script, curl).
	req, _ := http.NewRequest("GET", e.srv.URL+"/docket/", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("bearer: %v %v", r, err)
	}
	if st, _ := e.post("/docket/logout", url.Values{"csrf": {m[1]}}); st != http.StatusSeeOther {
		t.Fatalf("logout: %d", st)
	}
	if st, _ := e.get("/docket/"); st != http.StatusSeeOther {
		t.Fatalf("after logout: %d", st)
	}
}

func TestBadInputIsRefusedClearly(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	e.enqueue(e.queue("jobs"), engine.Task{})
	for path, want := range map[string]int{
		"/docket/queue": 400,
		"/docket/queue?p=acme&s=prod&q=jobs&state=nope": 400,
		"/docket/queue?p=acme&s=prod&q=jobs&sort=nope":  400,
		"/docket/queue?p=acme&s=prod&q=jobs&id=x":       400,
		"/docket/queue?p=acme&s=prod&q=jobs&cursor=zzz": 400,
		"/docket/task?p=acme&s=prod&q=jobs&id=x":        400,
		"/docket/task?p=acme&s=prod&q=jobs&id=999":      404,
		"/docket/nope": 404,
		"/elsewhere":   404,
		"/docket/queue?p=acme&s=prod&q=jobs&id=999":        200,
		"/docket/queue?p=acme&s=prod&q=jobs&state=ready":   200,
		"/docket/queue?p=acme&s=prod&q=jobs&sort=priority": 200,
	} {
		if st, body := e.get(path); st != want {
			t.Errorf("GET %s: %d, want %d\n%s", path, st, want, body)
		}
	}
	tok := e.csrf()
	for name, form := range map[string]url.Values{
		"unknown op":  {"op": {"explode"}, "q": {"jobs"}},
		"no queue":    {"op": {"cancel"}, "id": {"1"}},
		"bad id":      {"op": {"cancel"}, "q": {"jobs"}, "id": {"one"}},
		"no task":     {"op": {"cancel"}, "q": {"jobs"}},
		"not allowed": {"op": {"cancel"}, "q": {"jobs"}, "id": strings.Fields(strings.Repeat("1 ", engine.MaxBatch+1))},
	} {
		form.Set("csrf", tok)
		form.Set("confirm", "yes")
		if st, body := e.post("/docket/action", form); st != http.StatusBadRequest {
			t.Errorf("%s: %d\n%s", name, st, body)
		}
	}
	if n, _ := e.queue("jobs").Counts(ctx); n.Ready != 1 {
		t.Fatalf("bad input changed the queue: %+v", n)
	}
	if st, _ := e.post("/docket/queue", url.Values{"csrf": {tok}}); st != http.StatusNotFound {
		t.Fatalf("POST to a page: %d", st)
	}
	req, _ := http.NewRequest("DELETE", e.srv.URL+"/docket/", nil)
	if r, _ := e.c.Do(req); r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d", r.StatusCode)
	}
}

func TestBackLinkStaysInTheDashboard(t *testing.T) {
	ref := queueRef{NS: ns, Name: "jobs"}
	fallback := "/docket/queue?p=acme&q=jobs&s=prod"
	for back, want := range map[string]string{
		"/docket/queue?p=acme&q=jobs&state=dead": "/docket/queue?p=acme&q=jobs&state=dead",
		"https://evil.example/docket/":           fallback,
		"//evil.example/docket/":                 fallback,
		"/other/":                                fallback,
		"/docket/../x":                           fallback,
		"":                                       fallback,
		"javascript:alert(1)":                    fallback,
	} {
		if got := safeBack("/docket/", back, ref); got != want {
			t.Errorf("safeBack(%q) = %q, want %q", back, got, want)
		}
	}
}

func TestPrefixWithoutSlashRedirects(t *testing.T) {
	e := newEnv(t, Options{})
	mux := http.NewServeMux()
	mux.Handle("/docket", Handler(e.db, Options{Prefix: "/docket/"}))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/docket", nil))
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "/docket/" {
		t.Fatalf("%d %q", rec.Code, rec.Header().Get("Location"))
	}
}
