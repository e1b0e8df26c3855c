package browsertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
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
	profileDir  string
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
	if profileDir != "" {
		os.RemoveAll(profileDir)
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
		// A fresh profile, and nothing that talks to the network by itself.
		if profileDir, browserErr = os.MkdirTemp("", "docket-chromium-"); browserErr != nil {
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
			chromedp.UserDataDir(profileDir), chromedp.WindowSize(1280, 860),
			chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
			chromedp.Flag("no-first-run", true), chromedp.Flag("hide-scrollbars", true))
		alloc, _ := chromedp.NewExecAllocator(context.Background(), opts...)
		browserCtx, _ = chromedp.NewContext(alloc)
		browserErr = chromedp.Do(browserCtx) // starts the browser, outside any timeout
	})
	if browserErr != nil {
		t.Fatalf("starting %s: %v", path, browserErr)
	}
	return browserCtx
}

// setup is how a tab's DB and dashboard are made.
type setup struct {
	engine engine.Options
	wrap   func(*engine.DB) engine.API // the API the dashboard runs on; default the DB
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

func newTab(t *testing.T, o ui.Options, tweak ...func(*setup)) *tab {
	t.Helper()
	bctx := startBrowser(t)
	s := setup{engine: engine.Options{RetainCompleted: time.Hour}}
	for _, f := range tweak {
		f(&s)
	}
	db, err := engine.OpenInMemory(s.engine)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var api engine.API = db
	if s.wrap != nil {
		api = s.wrap(db)
	}
	o.Prefix = "/docket/"
	d := ui.New(api, o)
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
	tb.ctx, cancel = context.WithTimeout(tctx, 90*time.Second)
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

// get fetches a page outside the browser, as a second viewer would.
func (b *tab) get(path string) {
	b.t.Helper()
	r, err := http.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		b.t.Fatalf("GET %s: %d", path, r.StatusCode)
	}
}

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

// click clicks sel, then waits for the page it leads to to show ready.
func (b *tab) click(sel, ready string) {
	b.t.Helper()
	b.do(chromedp.Click(sel), chromedp.WaitVisible(ready))
}

// confirm clicks an action button, checks the confirmation page says want,
// confirms, and returns the report.
func (b *tab) confirm(button, want string) string {
	b.t.Helper()
	b.click(button, `#confirm-form`)
	if got := b.text("main"); !strings.Contains(got, want) {
		b.t.Fatalf("confirmation page lacks %q:\n%s", want, got)
	}
	b.click(`#confirm-form button[type="submit"]`, `#report`)
	return b.text("#report")
}

// scheme emulates the light or dark colour scheme.
func (b *tab) scheme(name string) {
	b.t.Helper()
	b.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: name}}})
		return err
	}))
}

// shot takes a screenshot of the window (or of the whole page), kept in
// the test's temp dir and, with -docs, in the docs directory.
func (b *tab) shot(name string, whole bool) {
	b.t.Helper()
	a := chromedp.CaptureScreenshot()
	if whole {
		a = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(b.ctx, a)
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
	b.t.Helper()
	t, err := b.db.Queue(ns, queue).Get(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return "gone"
	}
	if err != nil {
		b.t.Fatal(err)
	}
	return t.State.String()
}

// cluster is a three-node cluster as the replication layer would report it.
type cluster struct{}

func (cluster) ClusterStatus(context.Context) (ui.ClusterStatus, error) {
	return ui.ClusterStatus{Self: "node-1", Leader: "node-1", Term: 7, CommitIndex: 182_204, Members: []ui.Member{
		{ID: "node-1", Address: "10.0.0.1:7070", Voter: true, State: "leader", CommitIndex: 182_204, AppliedIndex: 182_204},
		{ID: "node-2", Address: "10.0.0.2:7070", Voter: true, State: "follower", CommitIndex: 182_204, AppliedIndex: 182_201, Lag: 3, LastContact: 12 * time.Millisecond},
		{ID: "node-3", Address: "10.0.0.3:7070", Voter: true, State: "follower", CommitIndex: 182_190, AppliedIndex: 182_160, Lag: 44, LastContact: 31 * time.Millisecond},
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

// Every page loads with its own stylesheet and script under the CSP, and
// shows what the engine holds; the screenshots are of a DB with a few
// minutes of history.
func TestPagesLoadWithScreenshots(t *testing.T) {
	clock := engine.NewManualClock(time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC))
	b := newTab(t, ui.Options{AllowActions: true, Cluster: cluster{}, SampleEvery: 10 * time.Second},
		func(s *setup) {
			s.engine.Clock = clock
		})
	sc := scene(b, clock)
	pages := []struct{ name, path, heading, contains string }{
		{"overview", "", "Queues", "webhooks"},
		{"queue", "queue?p=acme&s=prod&q=webhooks&state=retrying", "webhooks", "502 Bad Gateway"},
		{"task", fmt.Sprintf("task?p=acme&s=prod&q=email&id=%d", sc.task), fmt.Sprintf("Task %d", sc.task), "INV-1042.pdf"},
		{"dead", "dead?p=acme&s=prod&q=webhooks", "Dead letters", "503 Service Unavailable"},
		{"dead-task", fmt.Sprintf("task?p=acme&s=prod&q=webhooks&id=%d", sc.dead), fmt.Sprintf("Task %d", sc.dead), "cannot unmarshal"},
		{"kv", "kv?p=acme&s=prod&prefix=", "Key-value entries", "config/retry"},
		{"cluster", "cluster", "Cluster", "node-3"},
	}
	phone := map[string]bool{"overview": true, "queue": true, "task": true, "dead": true}
	drawn := `[...document.querySelectorAll(".chart")].every(c => c.dataset.drawn && c.querySelector("canvas"))`
	for _, size := range []string{"desktop", "phone"} {
		if size == "desktop" {
			b.do(chromedp.EmulateViewport(1440, 900))
		} else {
			b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
		}
		for _, p := range pages {
			if size == "phone" && !phone[p.name] {
				continue
			}
			b.open(p.path)
			if h := b.text("h1"); !strings.HasPrefix(h, p.heading) {
				t.Fatalf("%s: heading %q, want %q", p.name, h, p.heading)
			}
			if body := b.text("main"); !strings.Contains(body, p.contains) {
				t.Fatalf("%s lacks %q:\n%s", p.name, p.contains, body)
			}
			// The stylesheet applied: the CSP let the dashboard's own assets in.
			if bg := eval[string](b, `getComputedStyle(document.querySelector("header")).display`); bg != "flex" {
				t.Fatalf("%s: the stylesheet did not apply (%q)", p.name, bg)
			}
			b.waitFor(drawn, 10*time.Second)
			switch {
			case p.name == "dead-task":
			case size == "phone" && p.name == "overview":
				b.shot("phone", false)
			case size == "phone":
				b.shot("phone-"+p.name, false)
			default:
				b.shot(p.name, false)
			}
		}
	}
	// The overview has the sampled rates and their charts, drawn by uPlot
	// from five minutes of samples.
	b.do(chromedp.EmulateViewport(1440, 900))
	b.open("")
	b.waitFor(drawn, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll(".chart .uplot canvas").length`); n != 2 {
		t.Fatalf("%d chart canvases on the overview, want 2", n)
	}
	if n := eval[int](b, `Number(document.querySelector(".chart[data-chart=rates]").dataset.points)`); n < 30 {
		t.Fatalf("the overview's chart has %d points, want one for each of the 30 sample intervals or more", n)
	}
	if s := b.text("#totals .flow .n"); s == "…" || s == "0.00" {
		t.Fatalf("overall completion rate %q", s)
	}
}

// scene is what the screenshots show: producers and workers on four
// queues for five minutes of the manual clock, the dashboard sampling every
// ten seconds, then a backlog, tasks in flight, retries, timers, dead
// letters and a few KV entries.
type sceneIDs struct{ task, dead uint64 }

func scene(b *tab, clock *engine.ManualClock) sceneIDs {
	b.t.Helper()
	email, hooks, billing := b.db.Queue(ns, "email"), b.db.Queue(ns, "webhooks"), b.db.Queue(ns, "billing")
	templates := []string{"welcome", "invoice", "password-reset", "digest"}
	n := 0
	work := func(q engine.Queue, owner string, max int, fail func(i int) (string, bool)) {
		ls, err := q.Claim(ctx, owner, time.Minute, max)
		if err != nil {
			b.t.Fatal(err)
		}
		for i, l := range ls {
			if msg, permanent := fail(n + i); msg != "" {
				if err := q.Fail(ctx, l, engine.Failure{Err: msg, Permanent: permanent}); err != nil {
					b.t.Fatal(err)
				}
				continue
			}
			if _, err := q.Complete(ctx, l, engine.Done{Result: []byte(`{"ok":true}`)}); err != nil {
				b.t.Fatal(err)
			}
		}
		n += len(ls)
	}
	hookErrs := []string{"POST https://hooks.example.com/orders: 503 Service Unavailable", "dial tcp 203.0.113.9:443: i/o timeout"}
	for step := range 31 {
		wave := math.Sin(float64(step) / 4)
		for i := range 14 + int(8*wave) {
			b.enqueue("email", engine.Task{Kind: "email.send", Priority: i % 3,
				Payload: []byte(fmt.Sprintf(`{"to":"user%d@example.com","template":%q}`, step*40+i, templates[i%4]))})
		}
		for i := range 5 + step%3 {
			b.enqueue("webhooks", engine.Task{Kind: "webhook.deliver", MaxAttempts: 3,
				Payload: []byte(fmt.Sprintf(`{"event":"order.paid","order":%d}`, 7000+step*10+i))})
		}
		if step%3 == 0 {
			b.enqueue("reports", engine.Task{Kind: "report.daily", Delay: time.Duration(step+1) * time.Hour,
				Payload: []byte(fmt.Sprintf(`{"day":"2026-12-%02d","format":"pdf"}`, step/3+2))})
		}
		for i := range 3 {
			b.enqueue("billing", engine.Task{Kind: "invoice.render", Payload: []byte(fmt.Sprintf(`{"invoice":"INV-%d"}`, 1000+step*3+i))})
		}
		work(email, "mailer-1@host-a", 12+int(7*wave), func(i int) (string, bool) {
			if i%13 == 0 {
				return "smtp 451 4.7.1: try again later", false
			}
			return "", false
		})
		work(hooks, "hooks-2@host-b", 6, func(i int) (string, bool) {
			if i%5 == 0 {
				return hookErrs[(i/5)%2], false
			}
			return "", false
		})
		work(billing, "billing-1@host-c", 3, func(i int) (string, bool) { return "", false })
		clock.Advance(10 * time.Second)
		b.get("") // the dashboard samples the totals on the overview
	}
	// The dead letters of the dead-letter page, and a task in flight on its second attempt, with progress and headers.
	for i := range 5 {
		b.kill("webhooks", "webhook.deliver", fmt.Sprintf("POST https://hooks.example.com/orders/%d: 503 Service Unavailable", 8100+i), fmt.Sprintf(`{"event":"order.paid","order":%d}`, 8100+i))
	}
	for i := range 2 {
		b.kill("webhooks", "webhook.deliver", fmt.Sprintf("dial tcp 203.0.113.%d:443: i/o timeout", 9+i), fmt.Sprintf(`{"event":"order.shipped","order":%d}`, 8200+i))
	}
	// Deliveries waiting out their backoff after a failed attempt.
	for i := range 3 {
		id := b.enqueue("webhooks", engine.Task{Kind: "webhook.deliver", MaxAttempts: 5, Priority: 1 << 29,
			Payload: []byte(fmt.Sprintf(`{"event":"order.refunded","order":%d}`, 8300+i))})
		ls, err := hooks.Claim(ctx, "hooks-2@host-b", time.Minute, 1)
		if err != nil || len(ls) != 1 || ls[0].ID != id {
			b.t.Fatalf("claim %d: %v %v", id, ls, err)
		}
		if err := hooks.Fail(ctx, ls[0], engine.Failure{Err: fmt.Sprintf("POST https://hooks.example.com/orders/%d: 502 Bad Gateway", 8300+i),
			RetryAfter: time.Duration(i+1) * 90 * time.Second}); err != nil {
			b.t.Fatal(err)
		}
	}
	dead := b.kill("webhooks", "webhook.refund", "json: cannot unmarshal string into Go struct field Refund.amount of type int", `{"event":"refund","amount":"12.00"}`)
	task := b.enqueue("email", engine.Task{Kind: "email.send", Priority: 9,
		Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "acme"},
		Payload: []byte(`{"to":"ann@example.com","template":"invoice","attachments":[{"name":"INV-1042.pdf","bytes":48213}]}`)})
	ls, err := email.Claim(ctx, "mailer-1@host-a", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != task {
		b.t.Fatalf("claim %d: %v %v", task, ls, err)
	}
	if err := email.Fail(ctx, ls[0], engine.Failure{Err: "smtp 421 4.4.2 mx.example.com: connection timed out"}); err != nil {
		b.t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	if ls, err = email.Claim(ctx, "mailer-2@host-b", 5*time.Minute, 3); err != nil || len(ls) != 3 || ls[0].ID != task {
		b.t.Fatalf("second claim of %d: %v %v", task, ls, err)
	}
	if err := email.Heartbeat(ctx, &ls[0], 5*time.Minute, []byte(`{"step":"rendering","done":3,"of":7}`)); err != nil {
		b.t.Fatal(err)
	}
	// What waits for the task, and the limits of the webhooks.
	b.enqueue("reports", engine.Task{Kind: "report.invoices", DependsOn: []uint64{task}, Payload: []byte(`{"day":"2026-12-01"}`)})
	if err := hooks.SetLimits(ctx, engine.Limits{MaxInFlight: 16, Rate: 50, Per: time.Second}); err != nil {
		b.t.Fatal(err)
	}
	kv := b.db.KV(ns)
	for k, v := range map[string]string{
		"config/retry":      `{"maxAttempts":5,"backoff":"1s..60s"}`,
		"config/smtp":       `{"host":"mx.example.com","port":587,"tls":true}`,
		"rate/webhooks":     `{"perSecond":50,"burst":200}`,
		"user/1042/welcome": `"sent"`,
		"user/1043/welcome": `"pending"`,
	} {
		if _, err := kv.Commit(ctx, engine.Set(k, []byte(v))); err != nil {
			b.t.Fatal(err)
		}
	}
	return sceneIDs{task: task, dead: dead}
}

// A change in the engine shows up on an open page without a reload.
func TestLiveUpdateArrives(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
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
	// A selection survives the refresh that brings a new task in.
	b.do(chromedp.Click(fmt.Sprintf(`input[name="id"][value="%d"]`, id)))
	other := b.enqueue("jobs", engine.Task{Kind: "arrives-live", Priority: 5})
	b.waitFor(fmt.Sprintf(`!!document.querySelector('#tasks a[href$="id=%d"]')`, other), 5*time.Second)
	if !eval[bool](b, fmt.Sprintf(`document.querySelector('input[name="id"][value="%d"]').checked`, id)) {
		t.Fatal("the live update dropped the selection")
	}
	// The task page follows the task through its states.
	b.open(fmt.Sprintf("task?p=acme&s=prod&q=jobs&id=%d", other))
	q := b.db.Queue(ns, "jobs")
	ls, err := q.Claim(ctx, "w-live", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != other {
		t.Fatalf("claim: %v %v", ls, err)
	}
	b.waitFor(`document.querySelector("#task").textContent.includes("w-live")`, 5*time.Second)
}

// Redrive, cancel, run now and delete, clicked in the browser, change the
// engine's state through the confirmation page; each report counts what
// it did. A form without its CSRF token changes nothing.
func TestActionsChangeTheEngine(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})

	// Run now, from the task page.
	timer := b.enqueue("jobs", engine.Task{Kind: "k", Delay: time.Hour})
	b.open(fmt.Sprintf("task?p=acme&s=prod&q=jobs&id=%d", timer))
	if r := b.confirm(`button[value="run-now"]`, "make these scheduled tasks due now: 1 task"); r != "Made due 1 of 1 task." {
		t.Fatalf("run now: %q", r)
	}
	if s := b.state("jobs", timer); s != "ready" {
		t.Fatalf("after run now the task is %s", s)
	}

	// Redrive of the selected tasks, picked with the select-all box.
	ids := []uint64{b.kill("jobs", "k", "boom", `{}`), b.kill("jobs", "k", "boom", `{}`), b.kill("jobs", "k", "bang", `{}`)}
	b.open("queue?p=acme&s=prod&q=jobs&state=dead")
	b.do(chromedp.Click(`#select-all`))
	if s := b.text("#selected-count"); s != "3 selected:" {
		t.Fatalf("selection count %q", s)
	}
	if r := b.confirm(`button[value="redrive"]`, "3 tasks of acme/prod · jobs"); r != "Redrove 3 of 3 tasks." {
		t.Fatalf("redrive: %q", r)
	}
	for _, id := range ids {
		if s := b.state("jobs", id); s != "ready" {
			t.Fatalf("after redrive task %d is %s", id, s)
		}
	}

	// By last error, from the dead-letter page: redrive one group, delete
	// another, then redrive everything left.
	a1, a2 := b.kill("jobs", "k", "503 from upstream", `{}`), b.kill("jobs", "k", "503 from upstream", `{}`)
	c := b.kill("jobs", "k", "bad payload", `{}`)
	d := b.kill("jobs", "k", "disk full", `{}`)
	b.open("dead?p=acme&s=prod&q=jobs")
	group := func(text string) string {
		return fmt.Sprintf(`//article[.//pre[text()=%q]]`, text)
	}
	// Groups are headed by the shape of their errors: numbers are placeholders.
	b.do(chromedp.WaitVisible(group("<n> from upstream")))
	if r := b.confirmXPath(group("<n> from upstream")+`//button[@value="redrive-error"]`, "whose last error has this shape"); r != "Redrove 2 tasks." {
		t.Fatalf("redrive by error: %q", r)
	}
	if b.state("jobs", a1) != "ready" || b.state("jobs", a2) != "ready" || b.state("jobs", c) != "dead" {
		t.Fatalf("redrive by error: %s %s %s", b.state("jobs", a1), b.state("jobs", a2), b.state("jobs", c))
	}
	b.open("dead?p=acme&s=prod&q=jobs")
	if r := b.confirmXPath(group("bad payload")+`//button[@value="delete-error"]`, "delete every dead task"); r != "Deleted 1 task." {
		t.Fatalf("delete by error: %q", r)
	}
	if s := b.state("jobs", c); s != "gone" {
		t.Fatalf("deleted dead task is %s", s)
	}
	b.open("dead?p=acme&s=prod&q=jobs")
	if r := b.confirm(`button[value="redrive-all"]`, "1 task now"); r != "Redrove 1 task." || b.state("jobs", d) != "ready" {
		t.Fatalf("redrive all: %q, task %s", r, b.state("jobs", d))
	}

	// Cancel, from the task page.
	b.open(fmt.Sprintf("task?p=acme&s=prod&q=jobs&id=%d", d))
	if r := b.confirm(`button[value="cancel"]`, "1 task"); r != "Cancelled 1 of 1 task." || b.state("jobs", d) != "gone" {
		t.Fatalf("cancel: %q, task %s", r, b.state("jobs", d))
	}

	// Delete the retained completions.
	q := b.db.Queue(ns, "jobs")
	ls, err := q.Claim(ctx, "w", time.Minute, 4)
	if err != nil || len(ls) != 4 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	for _, l := range ls {
		if _, err := q.Complete(ctx, l, engine.Done{}); err != nil {
			t.Fatal(err)
		}
	}
	b.open("queue?p=acme&s=prod&q=jobs&state=completed")
	if r := b.confirm(`button[value="delete-completed-all"]`, "4 tasks now"); r != "Deleted 4 tasks." {
		t.Fatalf("delete completed: %q", r)
	}
	if n, _ := q.Counts(ctx); n.Completed != 0 {
		t.Fatalf("%d completed tasks left", n.Completed)
	}

	// Without its CSRF token a form changes nothing.
	other := b.kill("jobs", "k", "boom again", `{}`)
	b.open("queue?p=acme&s=prod&q=jobs&state=dead")
	eval[bool](b, `(document.querySelectorAll('input[name="csrf"]').forEach(i => i.remove()), true)`)
	b.do(chromedp.Click(fmt.Sprintf(`input[name="id"][value="%d"]`, other)))
	b.click(`button[value="redrive"]`, `.errors`)
	if msg := b.text(".errors"); !strings.Contains(msg, "CSRF") {
		t.Fatalf("without a token: %q", msg)
	}
	if s := b.state("jobs", other); s != "dead" {
		t.Fatalf("a form without a CSRF token changed the task: %s", s)
	}
}

func (b *tab) confirmXPath(button, want string) string {
	b.t.Helper()
	b.do(chromedp.Click(button), chromedp.WaitVisible(`#confirm-form`))
	if got := b.text("main"); !strings.Contains(got, want) {
		b.t.Fatalf("confirmation page lacks %q:\n%s", want, got)
	}
	b.click(`#confirm-form button[type="submit"]`, `#report`)
	return b.text("#report")
}

// Markup in a payload, kind, header, error, queue name, KV key or value is
// shown as text and never runs, neither on the first render nor after a
// live update swaps it in.
func TestScriptPayloadIsInert(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true, Refresh: 300 * time.Millisecond})
	const attack = `<script>window.pwned=1;document.title="pwned"</script><img src=x onerror="window.pwned=2">`
	esc := strings.ReplaceAll(attack, `"`, `\"`)
	queue := "x<img src=x onerror=window.pwned=3>"
	id := b.kill(queue, attack, attack, `{"html":"`+esc+`"}`)
	hdr := b.enqueue(queue, engine.Task{Kind: attack, Headers: map[string]string{attack: attack}, Payload: []byte(`"` + esc + `"`)})
	if _, err := b.db.KV(ns).Commit(ctx, engine.Set("k"+attack, []byte(`{"v":"`+esc+`"}`))); err != nil {
		t.Fatal(err)
	}
	qs := "p=acme&s=prod&q=" + strings.NewReplacer("<", "%3C", ">", "%3E", " ", "+", "=", "%3D").Replace(queue)
	for _, p := range []struct{ path, shown string }{
		{"", queue},
		{"queue?state=dead&" + qs, "<script>window.pwned=1"},
		{"queue?" + qs, "<script>window.pwned=1"},
		{"dead?" + qs, "<script>window.pwned=1"},
		{fmt.Sprintf("task?id=%d&%s", id, qs), "<script>window.pwned=1"},
		{fmt.Sprintf("task?id=%d&%s", hdr, qs), "<script>window.pwned=1"},
		{"kv?p=acme&s=prod", "k<script>window.pwned=1"},
	} {
		b.open(p.path)
		b.waitFor(`Number(document.body.dataset.updated || 0) >= 1`, 5*time.Second) // a live swap happened
		if ran := eval[bool](b, `typeof window.pwned !== "undefined" || document.title === "pwned"`); ran {
			t.Fatalf("%s: the payload ran: pwned=%s", p.path, eval[string](b, `String(window.pwned)`))
		}
		if n := eval[int](b, `document.querySelectorAll("main script, main img").length`); n != 0 {
			t.Fatalf("%s: %d script or img elements in the page's content", p.path, n)
		}
		if main := b.text("main"); !strings.Contains(main, p.shown) {
			t.Fatalf("%s: %q is not shown as text:\n%s", p.path, p.shown, main)
		}
	}
	b.open(fmt.Sprintf("task?id=%d&%s", hdr, qs))
	if text := b.text(".headers"); strings.Count(text, "<script>window.pwned=1") != 2 {
		t.Fatalf("the header's name and value are not shown as text: %q", text)
	}
}

// Everything can be reached and used from the keyboard: the skip link,
// links to a queue, a task's checkbox, the action buttons.
func TestKeyboardNavigation(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	id := b.kill("jobs", "k", "boom", `{}`)
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
	tabTo := func(is string) {
		t.Helper()
		for range 60 {
			b.do(chromedp.KeyEvent(kb.Tab))
			if eval[bool](b, is) {
				return
			}
		}
		t.Fatalf("no Tab reaches %s", is)
	}
	tabTo(fmt.Sprintf(`document.activeElement.name === "id" && document.activeElement.value === "%d"`, id))
	b.do(chromedp.KeyEvent(" "))
	if !eval[bool](b, `document.activeElement.checked`) {
		t.Fatal("space did not select the task")
	}
	// Shift+Tab goes back to the action buttons, Enter presses one.
	for range 20 {
		b.do(chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)))
		if eval[string](b, `document.activeElement.value`) == "redrive" {
			break
		}
	}
	if eval[string](b, `document.activeElement.value`) != "redrive" {
		t.Fatal("Shift+Tab does not reach the redrive button")
	}
	b.do(chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#confirm-form`))
	if !eval[bool](b, `document.activeElement.matches('#confirm-form button[type="submit"]')`) {
		t.Fatal("the confirmation page does not focus its button")
	}
	b.do(chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#report`))
	if s := b.state("jobs", id); s != "ready" {
		t.Fatalf("a keyboard-only redrive left the task %s", s)
	}
}

// contrastJS lists the visible text whose colour is below WCAG AA contrast
// (4.5:1, or 3:1 for large text) against its composited background.
const contrastJS = `(() => {
  const parse = c => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const over = (top, base) => [0, 1, 2].map(i => top[i] * top[3] + base[i] * (1 - top[3]));
  const background = el => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let base = [255, 255, 255];
    for (let i = layers.length - 1; i >= 0; i--) base = over(layers[i], base);
    return base; };
  const bad = [];
  document.querySelectorAll("body *").forEach(el => {
    if (![...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) return;
    const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    if (!r.width || !r.height || r.right < 0 || s.visibility === "hidden") return;
    const bg = background(el), fg = over(parse(s.color), bg);
    const a = lum(fg), b = lum(bg), ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const size = parseFloat(s.fontSize), large = size >= 24 || (size >= 18.66 && Number(s.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) bad.push(el.tagName.toLowerCase() + "." + el.className + " “" + el.textContent.trim().slice(0, 40) + "” " + ratio.toFixed(2));
  });
  return bad;
})()`

// Every text on every page, in the light and the dark scheme, has the
// contrast WCAG AA asks for.
func TestContrast(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true, Cluster: cluster{}})
	task, dead := seed(b)
	paths := []string{"", "queue?p=acme&s=prod&q=email", "queue?p=acme&s=prod&q=webhooks&state=dead",
		fmt.Sprintf("task?p=acme&s=prod&q=email&id=%d", task), fmt.Sprintf("task?p=acme&s=prod&q=webhooks&id=%d", dead),
		"dead?p=acme&s=prod&q=webhooks", "kv?p=acme&s=prod", "cluster"}
	for _, scheme := range []string{"light", "dark"} {
		b.scheme(scheme)
		for _, path := range paths {
			b.open(path)
			dark := eval[bool](b, `(() => { const c = getComputedStyle(document.body).backgroundColor.match(/\d+/g).map(Number); return c[0] + c[1] + c[2] < 150; })()`)
			if dark != (scheme == "dark") {
				t.Fatalf("%s scheme not in effect on %q", scheme, path)
			}
			if bad := eval[[]string](b, contrastJS); len(bad) > 0 {
				t.Errorf("%s scheme, %q: low contrast:\n%s", scheme, path, strings.Join(bad, "\n"))
			}
		}
	}
	// The check sees grey on white.
	b.scheme("light")
	b.open("")
	eval[bool](b, `(() => { const p = document.createElement("p"); p.textContent = "faint";
		p.style.color = "#aaa"; p.style.background = "#fff"; document.querySelector("main").append(p); return true; })()`)
	if bad := eval[[]string](b, contrastJS); len(bad) != 1 || !strings.Contains(bad[0], "faint") {
		t.Fatalf("the contrast check missed grey on white: %q", bad)
	}
}

// On a phone-sized screen the page does not scroll sideways: wide tables
// scroll inside their own box.
func TestPhoneViewport(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true, Cluster: cluster{}})
	task, _ := seed(b)
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	for _, path := range []string{"", "queue?p=acme&s=prod&q=email", fmt.Sprintf("task?p=acme&s=prod&q=email&id=%d", task),
		"dead?p=acme&s=prod&q=webhooks", "kv?p=acme&s=prod", "cluster"} {
		b.open(path)
		if w := eval[[]int](b, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
			t.Fatalf("%q is %d px wide on a %d px screen", path, w[0], w[1])
		}
		if fs := eval[string](b, `getComputedStyle(document.body).fontSize`); fs != "16px" {
			t.Fatalf("%q: body font %s on a phone", path, fs)
		}
	}
}

// The queue page's button pauses and resumes the engine's queue, through
// the confirmation: while it is paused a claim leases nothing, and the
// overview shows the state.
func TestPauseButton(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	b.enqueue("jobs", engine.Task{})
	q := b.db.Queue(ns, "jobs")
	paused := func() bool {
		t.Helper()
		s, err := q.Settings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s.Paused
	}
	b.open("queue?p=acme&s=prod&q=jobs")
	if r := b.confirm(`button[value="pause"]`, "stop workers from claiming tasks of this queue"); r != "Paused the queue." || !paused() {
		t.Fatalf("pause: %q, paused %v", r, paused())
	}
	if ls, err := q.Claim(ctx, "w", time.Minute, 1); err != nil || len(ls) != 0 {
		t.Fatalf("a claim on the paused queue: %v %v", ls, err)
	}
	b.open("")
	if s := b.text("#queues .pill.paused"); s != "paused" {
		t.Fatalf("overview pause badge %q", s)
	}
	b.open("queue?p=acme&s=prod&q=jobs")
	if r := b.confirm(`button[value="resume"]`, "let workers claim tasks of this queue again"); r != "Resumed the queue." || paused() {
		t.Fatalf("resume: %q, paused %v", r, paused())
	}
	if ls, err := q.Claim(ctx, "w", time.Minute, 1); err != nil || len(ls) != 1 {
		t.Fatalf("a claim after resume: %v %v", ls, err)
	}
	b.open("")
	if n := eval[int](b, `document.querySelectorAll("#queues .pill.paused").length`); n != 0 {
		t.Fatalf("%d pause badges after resume", n)
	}
}

// TestPartitionsShow: the queue page's partitions open to their counts, the
// partition bound shows among the limits, and a task's page names its
// partition.
func TestPartitionsShow(t *testing.T) {
	b := newTab(t, ui.Options{})
	id := b.enqueue("reports", engine.Task{Partition: "tenant-7"})
	b.enqueue("reports", engine.Task{})
	if err := b.db.Queue(ns, "reports").SetLimits(ctx, engine.Limits{PartitionMaxInFlight: 2, PartitionRate: 3, PartitionPer: time.Second}); err != nil {
		t.Fatal(err)
	}
	b.open("queue?p=acme&s=prod&q=reports")
	if s := b.text("p.limits"); s != "Limits: at most 2 in flight per partition; 3 per 1s per partition" {
		t.Fatalf("limits %q", s)
	}
	b.click("#partitions summary", "#partitions tbody")
	if n := eval[int](b, `document.querySelectorAll("#partitions tbody tr").length`); n != 2 {
		t.Fatalf("%d partition rows", n)
	}
	if s := b.text("#partitions tbody tr:nth-child(2) th"); s != "tenant-7" {
		t.Fatalf("second partition %q", s)
	}
	b.open(fmt.Sprintf("task?p=acme&s=prod&q=reports&id=%d", id))
	if s := b.text("#task-partition"); s != "tenant-7" {
		t.Fatalf("task partition %q", s)
	}
}
