package browsertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/ui"
)

var docsDir = flag.String("docs", "", "also write the screenshots of the main pages into this directory (../../docs refreshes the README's)")

var (
	ctx = context.Background()
	ns  = engine.NS("acme", "prod")
)

// The browser is started once and shared; each test gets its own tab.
var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
)

func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	return ""
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if browserCtx != nil {
		chromedp.Cancel(browserCtx)
	}
	os.Exit(code)
}

func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("chromium is not installed (Debian: apt-get install chromium); the browser tests need it")
	}
	browserOnce.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
			chromedp.WindowSize(1280, 900), chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
		alloc, _ := chromedp.NewExecAllocator(context.Background(), opts...)
		browserCtx, _ = chromedp.NewContext(alloc)
		browserErr = chromedp.Do(browserCtx) // starts the browser, outside any timeout
	})
	if browserErr != nil {
		t.Fatalf("starting %s: %v", path, browserErr)
	}
	return browserCtx
}

// tab is one browser tab on a dashboard over its own DB.
type tab struct {
	t    *testing.T
	ctx  context.Context
	db   *engine.DB
	base string // the dashboard's URL, ending in /docket/

	kills      int
	mu         sync.Mutex
	exceptions []string
}

func newTab(t *testing.T, o ui.Options) *tab {
	t.Helper()
	bctx := startBrowser(t)
	db, err := engine.OpenInMemory(engine.Options{RetainCompleted: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	o.Prefix = "/docket/"
	d := ui.New(db, o)
	t.Cleanup(func() { d.Close() })
	mux := http.NewServeMux()
	mux.Handle("/docket/", d)
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)

	tctx, cancelTab := chromedp.NewContext(bctx)
	tb := &tab{t: t, db: db, base: srv.URL + "/docket/"}
	if err := chromedp.Do(tctx); err != nil {
		t.Fatal(err)
	}
	_ = chromedp.Listen(tctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			tb.mu.Lock()
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			tb.exceptions = append(tb.exceptions, msg)
			tb.mu.Unlock()
		}
	})
	var cancel context.CancelFunc
	tb.ctx, cancel = context.WithTimeout(tctx, 60*time.Second)
	t.Cleanup(func() {
		cancel()
		cancelTab()
		tb.mu.Lock()
		defer tb.mu.Unlock()
		if len(tb.exceptions) > 0 {
			t.Errorf("script exceptions in the page: %v", tb.exceptions)
		}
	})
	return tb
}

func (b *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *tab) open(path string) { b.t.Helper(); b.do(chromedp.Navigate(b.base + path)) }

func eval[T any](b *tab, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor evaluates the boolean expression js until it holds, for at most
// d, and returns how long that took. (chromedp's Poll compiles its predicate
// with new Function, which the dashboard's CSP rightly forbids.)
func (b *tab) waitFor(js string, d time.Duration) time.Duration {
	b.t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](js)); err == nil && ok {
			return time.Since(start)
		}
		select {
		case <-b.ctx.Done():
			b.t.Fatal(b.ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	b.t.Fatalf("%s did not hold within %v; page:\n%s", js, d, eval[string](b, "document.body.innerText"))
	return 0
}

func (b *tab) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(sel))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// shot takes a full-page screenshot, kept in the test's temp dir and, with
// -docs, in the docs directory.
func (b *tab) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if len(png) < 1000 {
		b.t.Fatalf("screenshot %s is %d bytes", name, len(png))
	}
	dirs := []string{b.t.TempDir()}
	if *docsDir != "" {
		dirs = append(dirs, *docsDir)
	}
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "ui-"+name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

func (b *tab) enqueue(queue string, t engine.Task) uint64 {
	b.t.Helper()
	r, err := b.db.Queue(ns, queue).Enqueue(ctx, t)
	if err != nil {
		b.t.Fatal(err)
	}
	return r.ID
}

// kill enqueues a task and fails it for good with msg.
func (b *tab) kill(queue, kind, msg string, payload string) uint64 {
	b.t.Helper()
	q := b.db.Queue(ns, queue)
	b.kills++ // each outranks what came before, so the claim below takes it
	id := b.enqueue(queue, engine.Task{Kind: kind, Payload: []byte(payload), MaxAttempts: 1, Priority: 1<<20 + b.kills})
	ls, err := q.Claim(ctx, "worker-1", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != id {
		b.t.Fatalf("claim: %v %v", ls, err)
	}
	if err := q.Fail(ctx, ls[0], engine.Failure{Err: msg, Permanent: true}); err != nil {
		b.t.Fatal(err)
	}
	return id
}

func (b *tab) state(queue string, id uint64) string {
	t, err := b.db.Queue(ns, queue).Get(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return "gone"
	}
	if err != nil {
		b.t.Fatal(err)
	}
	return t.State.String()
}

type cluster struct{}

func (cluster) ClusterStatus(context.Context) (ui.ClusterStatus, error) {
	return ui.ClusterStatus{Leader: "node-1", Members: []ui.Member{
		{ID: "node-1", Address: "10.0.0.1:7070", Voter: true, State: "leader", AppliedIndex: 18_204},
		{ID: "node-2", Address: "10.0.0.2:7070", Voter: true, State: "follower", AppliedIndex: 18_201, Lag: 3, LastContact: 12 * time.Millisecond},
		{ID: "node-3", Address: "10.0.0.3:7070", Voter: true, State: "follower", AppliedIndex: 18_190, Lag: 14, LastContact: 31 * time.Millisecond},
	}}, nil
}

// seed fills a DB with a little of everything.
func seed(b *tab) (task, dead uint64) {
	kinds := []string{"email.send", "invoice.render", "webhook.deliver"}
	for i := range 40 {
		b.enqueue("email", engine.Task{Kind: kinds[i%3], Priority: i % 4,
			Payload: []byte(fmt.Sprintf(`{"to":"user%d@example.com","template":"welcome","locale":"en"}`, i))})
	}
	for i := range 12 {
		b.enqueue("reports", engine.Task{Kind: "report.daily", Delay: time.Duration(i+1) * time.Hour,
			Payload: []byte(fmt.Sprintf(`{"day":"2026-12-%02d"}`, i+1))})
	}
	task = b.enqueue("email", engine.Task{Kind: "email.send", Priority: 9, Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "acme"},
		Payload: []byte(`{"to":"ann@example.com","template":"invoice","attachments":[{"name":"INV-1042.pdf","bytes":48213}]}`)})
	q := b.db.Queue(ns, "email")
	ls, err := q.Claim(ctx, "worker-7@host-a", 5*time.Minute, 3)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := q.Heartbeat(ctx, &ls[0], 5*time.Minute, []byte(`{"step":"rendering","done":3,"of":7}`)); err != nil {
		b.t.Fatal(err)
	}
	if _, err := q.Complete(ctx, ls[1], engine.Done{Result: []byte(`{"messageId":"<1042@mx>"}`)}); err != nil {
		b.t.Fatal(err)
	}
	for i := range 5 {
		b.kill("webhooks", "webhook.deliver", "POST https://hooks.example.com/x: 503 Service Unavailable", fmt.Sprintf(`{"event":"order.paid","n":%d}`, i))
	}
	for i := range 2 {
		b.kill("webhooks", "webhook.deliver", "dial tcp 203.0.113.9:443: i/o timeout", fmt.Sprintf(`{"event":"order.shipped","n":%d}`, i))
	}
	dead = b.kill("webhooks", "webhook.deliver", "json: cannot unmarshal string into Go value of type int", `{"event":"refund","amount":"12"}`)
	kv := b.db.KV(ns)
	for _, k := range []string{"config/retry", "config/smtp", "user/1042", "user/1043"} {
		if _, err := kv.Commit(ctx, engine.Set(k, []byte(`{"updated":"2026-12-01","by":"ops"}`))); err != nil {
			b.t.Fatal(err)
		}
	}
	return task, dead
}

func TestPagesLoadWithScreenshots(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true, Cluster: cluster{}})
	task, dead := seed(b)
	pages := []struct{ name, path, heading, contains string }{
		{"overview", "", "Queues", "webhooks"},
		{"queue", "queue?p=acme&s=prod&q=email", "acme/prod · email", "email.send"},
		{"task", fmt.Sprintf("task?p=acme&s=prod&q=email&id=%d", task), fmt.Sprintf("Task %d", task), "INV-1042.pdf"},
		{"dead", "dead?p=acme&s=prod&q=webhooks", "Dead letters · acme/prod · webhooks", "503 Service Unavailable"},
		{"dead-task", fmt.Sprintf("task?p=acme&s=prod&q=webhooks&id=%d", dead), fmt.Sprintf("Task %d", dead), "cannot unmarshal"},
		{"kv", "kv?p=acme&s=prod&prefix=", "Key-value entries", "config/retry"},
		{"cluster", "cluster", "Cluster", "node-3"},
	}
	for _, p := range pages {
		b.open(p.path)
		if h := b.text("h1"); h != p.heading {
			t.Fatalf("%s: heading %q, want %q", p.name, h, p.heading)
		}
		if body := b.text("main"); !strings.Contains(body, p.contains) {
			t.Fatalf("%s lacks %q:\n%s", p.name, p.contains, body)
		}
		// The stylesheet applied: the CSP let the dashboard's own assets in.
		if bg := eval[string](b, `getComputedStyle(document.querySelector("header")).borderBottomStyle`); bg != "solid" {
			t.Fatalf("%s: the stylesheet did not apply (%q)", p.name, bg)
		}
		if p.name != "dead-task" {
			b.shot(p.name)
		}
	}
}

// A change in the engine shows up on an open page without a reload.
func TestLiveUpdateArrives(t *testing.T) {
	b := newTab(t, ui.Options{})
	b.enqueue("jobs", engine.Task{})
	b.open("")
	if n := b.text("#totals li:first-child .n"); n != "1" {
		t.Fatalf("ready total %q", n)
	}
	eval[bool](b, `(window.__marker = true)`) // gone if the page reloads
	for i := 0; i < 4; i++ {
		b.enqueue("jobs", engine.Task{})
	}
	took := b.waitFor(`document.querySelector("#totals li:first-child .n").textContent === "5"`, 5*time.Second)
	t.Logf("overview updated %v after the enqueue", took.Round(time.Millisecond))
	if !eval[bool](b, `window.__marker === true`) {
		t.Fatal("the page reloaded instead of updating")
	}
	b.open("queue?p=acme&s=prod&q=jobs")
	id := b.enqueue("jobs", engine.Task{Kind: "arrives-live"})
	b.waitFor(fmt.Sprintf(`!!document.querySelector('#tasks a[href$="id=%d"]')`, id), 5*time.Second)
}

// Redrive and cancel from the browser change the engine's state, through
// the confirmation page; a form without its CSRF token changes nothing.
func TestActionsNeedTheirCSRFToken(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	id := b.kill("jobs", "k", "boom", `{}`)
	b.open("queue?p=acme&s=prod&q=jobs&state=dead")
	b.do(chromedp.Click(fmt.Sprintf(`input[name="id"][value="%d"]`, id)),
		chromedp.Click(`button[value="redrive"]`),
		chromedp.WaitVisible(`#confirm-form`))
	if s := b.state("jobs", id); s != "dead" {
		t.Fatalf("the confirmation page changed the task: %s", s)
	}
	b.do(chromedp.Click(`#confirm-form button[type="submit"]`), chromedp.WaitVisible(`#report`))
	if r := b.text("#report"); r != "Redrove 1 of 1 task." {
		t.Fatalf("report %q", r)
	}
	if s := b.state("jobs", id); s != "ready" {
		t.Fatalf("after redrive the task is %s", s)
	}

	other := b.kill("jobs", "k", "boom again", `{}`)
	b.open("queue?p=acme&s=prod&q=jobs&state=dead")
	eval[bool](b, `(document.querySelectorAll('input[name="csrf"]').forEach(i => i.remove()), true)`)
	b.do(chromedp.Click(fmt.Sprintf(`input[name="id"][value="%d"]`, other)), chromedp.Click(`button[value="redrive"]`),
		chromedp.WaitVisible(`.errors`))
	if msg := b.text(".errors"); !strings.Contains(msg, "CSRF") {
		t.Fatalf("without a token: %q", msg)
	}
	if s := b.state("jobs", other); s != "dead" {
		t.Fatalf("a form without a CSRF token changed the task: %s", s)
	}

	b.open(fmt.Sprintf("task?p=acme&s=prod&q=jobs&id=%d", other))
	b.do(chromedp.Click(`button[value="cancel"]`), chromedp.WaitVisible(`#confirm-form`),
		chromedp.Click(`#confirm-form button[type="submit"]`), chromedp.WaitVisible(`#report`))
	if r := b.text("#report"); r != "Cancelled 1 of 1 task." || b.state("jobs", other) != "gone" {
		t.Fatalf("cancel: %q, task %s", r, b.state("jobs", other))
	}
}

// Markup in a payload, kind, header or error is shown as text and never
// runs, neither on the first render nor after a live update swaps it in.
func TestScriptPayloadIsInert(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	const attack = `<script>window.pwned=1;document.title="pwned"</script><img src=x onerror="window.pwned=2">`
	esc := strings.ReplaceAll(attack, `"`, `\"`)
	id := b.kill("x<img src=x onerror=window.pwned=3>", attack, attack, `{"html":"`+esc+`"}`)
	qs := "p=acme&s=prod&q=" + strings.NewReplacer("<", "%3C", ">", "%3E", " ", "+", "=", "%3D").Replace("x<img src=x onerror=window.pwned=3>")
	for _, path := range []string{"", "queue?state=dead&" + qs, "dead?" + qs, fmt.Sprintf("task?id=%d&%s", id, qs)} {
		b.open(path)
		b.waitFor(`Number(document.body.dataset.updated || 0) >= 1`, 5*time.Second) // a live swap happened
		if ran := eval[bool](b, `typeof window.pwned !== "undefined" || document.title === "pwned"`); ran {
			t.Fatalf("%s: the payload ran: pwned=%s", path, eval[string](b, `String(window.pwned)`))
		}
	}
	if text := b.text("pre.err"); !strings.Contains(text, "<script>window.pwned=1") {
		t.Fatalf("the error is not shown as text: %q", text)
	}
}

// Everything can be reached and used from the keyboard: the skip link,
// links to a queue, a task's checkbox.
func TestKeyboardNavigation(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	b.kill("jobs", "k", "boom", `{}`)
	b.open("")
	b.do(chromedp.KeyEvent(kb.Tab))
	if a := eval[string](b, `document.activeElement.textContent`); a != "Skip to content" {
		t.Fatalf("first Tab focuses %q", a)
	}
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(`document.activeElement.id === "main"`, 2*time.Second)
	found := false
	for range 40 {
		b.do(chromedp.KeyEvent(kb.Tab))
		if eval[string](b, `document.activeElement.textContent`) == "jobs" {
			found = true
			break
		}
	}
	if !found {
		t.Fatal("no Tab reaches the queue's link")
	}
	// The focus ring is visible.
	if o := eval[string](b, `getComputedStyle(document.activeElement).outlineStyle`); o != "solid" {
		t.Fatalf("focused link outline %q", o)
	}
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(`location.pathname.endsWith("/queue")`, 5*time.Second)
	b.open("queue?p=acme&s=prod&q=jobs&state=dead")
	for range 40 {
		b.do(chromedp.KeyEvent(kb.Tab))
		if eval[string](b, `document.activeElement.name`) == "id" && eval[string](b, `document.activeElement.type`) == "checkbox" {
			b.do(chromedp.KeyEvent(" "))
			if !eval[bool](b, `document.activeElement.checked`) {
				t.Fatal("space did not select the task")
			}
			return
		}
	}
	t.Fatal("no Tab reaches a task's checkbox")
}

// On a phone-sized screen the page does not scroll sideways: wide tables
// scroll inside their own box.
func TestPhoneViewport(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	task, _ := seed(b)
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	for _, path := range []string{"", "queue?p=acme&s=prod&q=email", fmt.Sprintf("task?p=acme&s=prod&q=email&id=%d", task),
		"dead?p=acme&s=prod&q=webhooks"} {
		b.open(path)
		if w := eval[[]int](b, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
			t.Fatalf("%q is %d px wide on a %d px screen", path, w[0], w[1])
		}
		if fs := eval[string](b, `getComputedStyle(document.body).fontSize`); fs != "16px" {
			t.Fatalf("%q: body font %s on a phone", path, fs)
		}
		if path == "" {
			b.shot("phone")
		}
	}
}
