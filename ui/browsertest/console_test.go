package browsertest

import (
	_ "embed"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/ui"
)

// axe-core, injected into the pages by the tests; the dashboard never
// serves it.
//
//go:embed testdata/axe-core/axe.min.js
var axeJS string

// axe runs axe-core on the page and returns its serious and critical
// violations, one line each.
func (b *tab) axe() []string {
	b.t.Helper()
	if !eval[bool](b, `typeof window.axe === "object"`) {
		if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](axeJS+"\n;true")); err != nil {
			b.t.Fatalf("injecting axe-core: %v", err)
		}
	}
	out, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`axe.run(document, {resultTypes: ["violations"]}).then(r =>
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v =>
			v.impact + " " + v.id + ": " + v.help + " — " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(" | ")))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("axe.run: %v", err)
	}
	return out
}

// evalAsync evaluates js, a promise, and returns what it resolves to.
func evalAsync[T any](b *tab, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// richScene fills a DB with what the console's pages show: retries,
// timers, dead letters with ids in their errors, limits, a dependency
// chain, and a queue created by a burst.
type richIDs struct{ merge, extract, retry uint64 }

func richScene(b *tab) richIDs {
	b.t.Helper()
	var ids richIDs
	hooks := b.db.Queue(ns, "webhooks")
	for i := range 6 {
		b.kill("webhooks", "webhook.deliver", fmt.Sprintf("POST https://hooks.example.com/orders/%d: 503 Service Unavailable", 7000+i), `{}`)
		b.kill("webhooks", "webhook.deliver", fmt.Sprintf("order %d: customer 3fa85f64-5717-4562-b3fc-%012x not found", i, i*7919), `{}`)
	}
	ids.retry = b.enqueue("webhooks", engine.Task{Kind: "webhook.deliver", MaxAttempts: 5, Priority: 1 << 30})
	ls, err := hooks.Claim(ctx, "hooks-1@host-b", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != ids.retry {
		b.t.Fatalf("claim: %v %v", ls, err)
	}
	if err := hooks.Fail(ctx, ls[0], engine.Failure{Err: "POST https://hooks.example.com/orders/7100: 502 Bad Gateway", RetryAfter: 2 * time.Minute}); err != nil {
		b.t.Fatal(err)
	}
	b.enqueue("webhooks", engine.Task{Kind: "webhook.digest", Delay: time.Hour})
	if err := hooks.SetLimits(ctx, engine.Limits{MaxInFlight: 16, Rate: 50, Per: time.Second}); err != nil {
		b.t.Fatal(err)
	}
	ids.extract = b.enqueue("etl", engine.Task{Kind: "extract", Payload: []byte(`{"table":"orders"}`)})
	other := b.enqueue("etl", engine.Task{Kind: "extract", Payload: []byte(`{"table":"refunds"}`), Delay: time.Minute})
	ids.merge = b.enqueue("etl", engine.Task{Kind: "merge", DependsOn: []uint64{ids.extract, other}})
	b.enqueue("reports", engine.Task{Kind: "report.daily", DependsOn: []uint64{ids.merge}})
	return ids
}

// TestRetryingInBrowser: the queue page's retrying tab lists the task in
// backoff with its error and next attempt, apart from the timers.
func TestRetryingInBrowser(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	ids := richScene(b)
	b.open("queue?p=acme&s=prod&q=webhooks&state=scheduled")
	if s := eval[string](b, `document.querySelector('#states a[href$="state=retrying"]').textContent`); s != "retrying 1" {
		t.Fatalf("retrying tab %q", s)
	}
	if strings.Contains(b.text("#tasks"), "502 Bad Gateway") {
		t.Fatal("the scheduled tab lists the retry")
	}
	b.click(`#states a[href$="state=retrying"]`, `#tasks table`)
	text := b.text("#tasks")
	for _, want := range []string{fmt.Sprint(ids.retry), "502 Bad Gateway", "in 1m", "1/5"} {
		if !strings.Contains(text, want) {
			t.Fatalf("retrying tab lacks %q:\n%s", want, text)
		}
	}
	if h := eval[string](b, `document.querySelector("#tasks thead").textContent`); !strings.Contains(h, "Next attempt") {
		t.Fatalf("retrying tab heading %q", h)
	}
}

// TestChartsDraw: a queue created by a burst of 5,000 shows the burst in
// its rate, on the overview's table and in the charts uPlot draws on the
// overview and the queue page.
func TestChartsDraw(t *testing.T) {
	clock := engine.NewManualClock(time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC))
	b := newTab(t, ui.Options{SampleEvery: 5 * time.Second}, func(s *setup) { s.engine.Clock = clock })
	b.enqueue("steady", engine.Task{})
	b.get("") // the first sample: steady has no baseline yet
	burst := make([]engine.Task, 5000)
	if _, err := b.db.Queue(ns, "burst").EnqueueBatch(ctx, burst); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	b.open("")
	// In/s is the eighth cell of the row.
	if s := eval[string](b, `document.querySelector('#queues a.qname[href*="q=burst&"]').closest("tr").querySelectorAll("td")[7].textContent`); s != "1,000" {
		t.Fatalf("the burst's enqueue rate %q, want 1,000 per second", s)
	}
	b.waitFor(`[...document.querySelectorAll(".chart")].every(c => c.dataset.drawn && c.querySelector("canvas"))`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll(".chart .uplot").length`); n != 2 {
		t.Fatalf("%d uPlot charts on the overview", n)
	}
	// The chart's legend shows the burst at the cursor's point.
	if s := eval[string](b, `document.querySelector(".chart[data-chart=rates]").dataset.points`); s != "1" {
		t.Fatalf("overview chart has %s points", s)
	}
	b.open("queue?p=acme&s=prod&q=burst")
	b.waitFor(`[...document.querySelectorAll(".chart")].every(c => c.dataset.drawn && c.querySelector("canvas"))`, 10*time.Second)
	peak := evalAsync[float64](b, `fetch(document.querySelector(".chart").dataset.src).then(r => r.json()).then(d => Math.max(...d.enqueued))`)
	if peak != 1000 {
		t.Fatalf("the queue chart's peak enqueue rate %v", peak)
	}
}

// TestErrorGroupsInBrowser: 2,000 failures with ids in their texts make
// five groups; the page that refreshes itself stays small; a group's
// redrive redrives its tasks.
func TestErrorGroupsInBrowser(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	q := b.db.Queue(ns, "hooks")
	tasks := make([]engine.Task, 2000)
	for i := range tasks {
		tasks[i] = engine.Task{Kind: "hook", MaxAttempts: 1}
	}
	if _, err := q.EnqueueBatch(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 2000; {
		ls, err := q.Claim(ctx, "w", time.Minute, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			msg := fmt.Sprintf("POST https://hooks.example.com/orders/%d: 503", l.ID)
			switch l.ID % 5 {
			case 1:
				msg = fmt.Sprintf("customer %08x-1c2d-4e5f-8a9b-%012x not found", l.ID*7919, l.ID)
			case 2:
				msg = fmt.Sprintf("dial tcp 203.0.113.%d:443: i/o timeout", l.ID%250)
			case 3:
				msg = fmt.Sprintf("lock 'tenant-%d' held since 2026-12-01T09:%02d:00Z", l.ID, l.ID%60)
			case 4:
				msg = fmt.Sprintf("json: cannot unmarshal %q into int\ngoroutine %d", fmt.Sprint(l.ID), l.ID)
			}
			if err := q.Fail(ctx, l, engine.Failure{Err: msg, Permanent: true}); err != nil {
				t.Fatal(err)
			}
		}
		n += len(ls)
	}
	b.open("dead?p=acme&s=prod&q=hooks")
	if n := eval[int](b, `document.querySelectorAll("#groups article.group").length`); n != 5 {
		t.Fatalf("%d groups", n)
	}
	size := evalAsync[int](b, `fetch(location.href, {headers: {"X-Docket-Live": "1"}}).then(r => r.text()).then(t => t.length)`)
	t.Logf("the dead-letter page's live refresh with 2,000 dead tasks: %d bytes", size)
	if size > 64<<10 {
		t.Fatalf("the live refresh is %d bytes", size)
	}
	// Redrive the customer group: 400 tasks.
	eval[bool](b, `[...document.querySelectorAll("#groups article.group")].find(g => g.querySelector("pre.shape").textContent.startsWith("customer")).querySelector('button[value="redrive-error"]').click() || true`)
	b.do(chromedp.WaitVisible(`#confirm-form`))
	b.click(`#confirm-form button[type="submit"]`, `#report`)
	if r := b.text("#report"); r != "Redrove 400 tasks." {
		t.Fatalf("report %q", r)
	}
	c, _ := q.Counts(ctx)
	if c.Dead != 1600 || c.Ready != 400 {
		t.Fatalf("counts after the group's redrive: %+v", c)
	}
}

// TestLimitsAndDeleteDeadInBrowser: the queue page's form sets the limits,
// bad input is refused and changes nothing; "Delete all dead" confirms with
// the count.
func TestLimitsAndDeleteDeadInBrowser(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	richScene(b)
	q := b.db.Queue(ns, "webhooks")
	b.open("queue?p=acme&s=prod&q=webhooks")
	if !eval[bool](b, `document.querySelector("#controls").open`) {
		t.Fatal("the limits of a limited queue are not open")
	}
	b.do(chromedp.SetValue(`input[name="max_in_flight"]`, "4"), chromedp.SetValue(`input[name="rate"]`, "abc"))
	b.click(`button[value="set-limits"]`, `p.errors[role="alert"]`) // the error page's: main is on the queue page too
	if s := b.text("main"); !strings.Contains(s, `rate: "abc" is not a whole number`) || !strings.Contains(s, "Nothing changed.") {
		t.Fatalf("bad input:\n%s", s)
	}
	if s, _ := q.Settings(ctx); s.Limits.MaxInFlight != 16 {
		t.Fatalf("bad input changed the limits: %+v", s.Limits)
	}
	b.open("queue?p=acme&s=prod&q=webhooks")
	b.do(chromedp.SetValue(`input[name="max_in_flight"]`, "4"), chromedp.SetValue(`input[name="rate"]`, "10"), chromedp.SetValue(`input[name="per"]`, "1m"))
	b.click(`button[value="set-limits"]`, `#report`)
	if r := b.text("#report"); r != "Set the queue's limits: at most 4 in flight; 10 per 1m0s." {
		t.Fatalf("report %q", r)
	}
	if s, _ := q.Settings(ctx); s.Limits.MaxInFlight != 4 || s.Limits.Rate != 10 || s.Limits.Per != time.Minute {
		t.Fatalf("limits %+v", s.Limits)
	}
	b.open("queue?p=acme&s=prod&q=webhooks&state=dead")
	if r := b.confirm(`button[value="delete-dead-all"]`, "delete every dead task of the queue (acme/prod · webhooks): 12 tasks now."); r != "Deleted 12 tasks." {
		t.Fatalf("report %q", r)
	}
	if c, _ := q.Counts(ctx); c.Dead != 0 || c.Scheduled != 2 {
		t.Fatalf("counts %+v", c)
	}
}

// TestDependencyTreeInBrowser: the merge task's page shows what it waits
// for and what waits for it, with states; a link leads to the parent, and
// the queue page's filter lists the tasks waiting for it.
func TestDependencyTreeInBrowser(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	ids := richScene(b)
	b.open(fmt.Sprintf("task?p=acme&s=prod&q=etl&id=%d", ids.merge))
	tree := b.text("#deps")
	for _, want := range []string{"Waits for", fmt.Sprintf("%d ready extract", ids.extract), "scheduled", "Waited for by", "waiting report.daily on reports"} {
		if !strings.Contains(tree, want) {
			t.Fatalf("the tree lacks %q:\n%s", want, tree)
		}
	}
	b.click(fmt.Sprintf(`#deps a[href$="id=%d"]`, ids.extract), `#deps`)
	if h := b.text("h1"); !strings.HasPrefix(h, fmt.Sprintf("Task %d", ids.extract)) {
		t.Fatalf("the link led to %q", h)
	}
	b.open("queue?p=acme&s=prod&q=etl")
	b.do(chromedp.SetValue(`input[name="on"]`, fmt.Sprint(ids.extract)))
	b.do(chromedp.Click(`form.filters button[type="submit"]`))
	b.waitFor(`location.search.includes("on=") && document.readyState === "complete"`, 10*time.Second)
	if s := b.text("#tasks"); !strings.Contains(s, fmt.Sprint(ids.merge)) || !strings.Contains(s, "merge") {
		t.Fatalf("the waiting filter at %s:\n%s", eval[string](b, "location.href"), s)
	}
}

// TestPhoneOverview: at 390×844 the overview keeps the oldest ready task's
// wait, the rates and the errors on screen, and a queue row is compact.
func TestPhoneOverview(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	seed(b)
	richScene(b)
	b.enqueue("a-queue-with-a-rather-long-name-for-a-phone", engine.Task{})
	if err := b.db.Queue(ns, "a-queue-with-a-rather-long-name-for-a-phone").Pause(ctx); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	b.open("")
	tallest := eval[float64](b, `Math.max(...[...document.querySelectorAll("#queues tbody tr")].map(r => r.getBoundingClientRect().height))`)
	t.Logf("tallest queue row on a phone: %.0f px", tallest)
	if tallest > 72 {
		t.Fatalf("a queue row is %.0f px tall on a phone", tallest)
	}
	for _, head := range []string{"Oldest", "Done/s", "Errors"} {
		visible := eval[bool](b, fmt.Sprintf(`[...document.querySelectorAll("#queues thead th")].some(th => th.textContent === %q &&
			getComputedStyle(th).display !== "none" && th.getBoundingClientRect().right <= window.innerWidth)`, head))
		if !visible {
			t.Fatalf("column %s is not on screen", head)
		}
	}
	for _, card := range []string{".card.wait", ".card.flow", ".card.errs"} {
		if !eval[bool](b, fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return r.bottom <= window.innerHeight && r.right <= window.innerWidth; })()`, card)) {
			t.Fatalf("card %s is not on the first screen", card)
		}
	}
	if w := eval[[]int](b, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
		t.Fatalf("the overview is %d px wide on a %d px screen", w[0], w[1])
	}
}

// TestAxeEveryPage: axe-core finds no serious or critical violation on any
// page, in the light and the dark scheme.
func TestAxeEveryPage(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true, Cluster: cluster{}})
	task, dead := seed(b)
	ids := richScene(b)
	paths := []string{"", "queue?p=acme&s=prod&q=email", "queue?p=acme&s=prod&q=webhooks&state=dead",
		"queue?p=acme&s=prod&q=webhooks&state=retrying", "queue?p=acme&s=prod&q=webhooks",
		fmt.Sprintf("task?p=acme&s=prod&q=email&id=%d", task), fmt.Sprintf("task?p=acme&s=prod&q=webhooks&id=%d", dead),
		fmt.Sprintf("task?p=acme&s=prod&q=etl&id=%d", ids.merge),
		"dead?p=acme&s=prod&q=webhooks", "kv?p=acme&s=prod", "kv", "cluster", "queue?p=acme&s=prod&q=nope&state=bogus",
		"workers", "periodic"}
	for _, scheme := range []string{"light", "dark"} {
		b.scheme(scheme)
		for _, path := range paths {
			b.open(path)
			b.waitFor(`[...document.querySelectorAll(".chart")].every(c => c.dataset.drawn)`, 10*time.Second)
			if v := b.axe(); len(v) > 0 {
				t.Errorf("%s scheme, %q:\n%s", scheme, path, strings.Join(v, "\n"))
			}
		}
		// The forms of the task actions, opened.
		b.open(fmt.Sprintf("task?p=acme&s=prod&q=email&id=%d", task))
		if !eval[bool](b, `(() => { const ds = document.querySelectorAll("details.task-action"); ds.forEach(d => d.open = true); return ds.length > 0 })()`) {
			t.Fatal("the task page offers no task action's form")
		}
		if v := b.axe(); len(v) > 0 {
			t.Errorf("%s scheme, task action forms:\n%s", scheme, strings.Join(v, "\n"))
		}
		// The confirmation and the report.
		b.open("queue?p=acme&s=prod&q=webhooks&state=dead")
		b.click(`button[value="redrive-all"]`, `#confirm-form`)
		if v := b.axe(); len(v) > 0 {
			t.Errorf("%s scheme, confirmation:\n%s", scheme, strings.Join(v, "\n"))
		}
		b.click(`#confirm-form button[type="submit"]`, `#report`)
		if v := b.axe(); len(v) > 0 {
			t.Errorf("%s scheme, report:\n%s", scheme, strings.Join(v, "\n"))
		}
	}
	// The check finds a violation where there is one.
	eval[bool](b, `(() => { const i = document.createElement("input"); document.querySelector("main").append(i);
		const img = document.createElement("img"); img.src = "data:,"; document.querySelector("main").append(img); return true; })()`)
	if v := b.axe(); len(v) == 0 {
		t.Fatal("axe found nothing wrong with an unlabelled input and an image without alt")
	}
}

// TestKeyboardReachesConsoleActions: from the keyboard alone, the limits
// form is filled and sent, and "Delete all dead" is pressed and confirmed.
func TestKeyboardReachesConsoleActions(t *testing.T) {
	b := newTab(t, ui.Options{AllowActions: true})
	richScene(b)
	q := b.db.Queue(ns, "webhooks")
	tabTo := func(is string) {
		t.Helper()
		for range 120 {
			b.do(chromedp.KeyEvent(kb.Tab))
			if eval[bool](b, is) {
				return
			}
		}
		t.Fatalf("no Tab reaches %s", is)
	}
	b.open("queue?p=acme&s=prod&q=webhooks")
	tabTo(`document.activeElement.name === "max_in_flight"`)
	b.do(chromedp.KeyEvent(kb.End), chromedp.KeyEvent(kb.Backspace), chromedp.KeyEvent(kb.Backspace), chromedp.KeyEvent("7"))
	tabTo(`document.activeElement.value === "set-limits"`)
	b.do(chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#report`))
	if s, _ := q.Settings(ctx); s.Limits.MaxInFlight != 7 {
		t.Fatalf("limits after the keyboard: %+v", s.Limits)
	}
	b.open("dead?p=acme&s=prod&q=webhooks")
	tabTo(`document.activeElement.value === "delete-dead-all"`)
	b.do(chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#confirm-form`))
	if s := b.text("main"); !strings.Contains(s, "12 tasks now") {
		t.Fatalf("confirmation:\n%s", s)
	}
	b.do(chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#report`))
	if c, _ := q.Counts(ctx); c.Dead != 0 {
		t.Fatalf("dead after the keyboard: %d", c.Dead)
	}
}
