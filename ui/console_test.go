package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// TestRetryingTab: a task waiting out its backoff after a failed attempt is
// on the retrying tab with its last error and next attempt, not on the
// scheduled tab, which keeps the timers; the tabs count each.
func TestRetryingTab(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	timer := e.enqueue(q, engine.Task{Kind: "timer", Delay: time.Hour})
	retry := e.enqueue(q, engine.Task{Kind: "flaky", MaxAttempts: 5})
	ls, err := q.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != retry {
		t.Fatalf("claim: %v %v", ls, err)
	}
	if err := q.Fail(ctx, ls[0], engine.Failure{Err: "upstream 502", RetryAfter: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	row := func(id uint64) string { return fmt.Sprintf(`value="%d" aria-label="Select task %d"`, id, id) }
	body := e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=retrying")
	mustContain(t, body, row(retry), "<th scope=\"col\">Next attempt</th>", "in 1m30s", "upstream 502", "1/5",
		`state=retrying" aria-current="page">retrying <span class="n">1</span>`, `state=scheduled">scheduled <span class="n">1</span>`,
		`value="run-now">Run selected now</button>`)
	mustNotContain(t, body, row(timer))
	body = e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=scheduled")
	mustContain(t, body, row(timer), "<th scope=\"col\">Due</th>")
	mustNotContain(t, body, row(retry), "upstream 502")
	// Other tabs do not read the scheduled tasks to count the retries.
	mustContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs"), `state=scheduled" title="Timers and retries; open a tab to count each">scheduled <span class="n">2</span>`,
		`state=retrying">retrying</a>`)
	// Looked up by id, the retry is shown under its tab.
	mustContain(t, e.mustGet(fmt.Sprintf("/docket/queue?p=acme&s=prod&q=jobs&id=%d", retry)), `state=retrying" aria-current="page"`)
}

// TestRetryingCountIsExact: past the scan window, the engine still counts
// the retries and the timers exactly, over the whole queue.
func TestRetryingCountIsExact(t *testing.T) {
	e := newEnv(t, Options{ScanWindow: 3, PageSize: 2})
	q := e.queue("jobs")
	for range 5 {
		e.enqueue(q, engine.Task{Delay: time.Hour})
	}
	e.enqueue(q, engine.Task{MaxAttempts: 3})
	ls, err := q.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 {
		t.Fatal(ls, err)
	}
	if err := q.Fail(ctx, ls[0], engine.Failure{Err: "later", RetryAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	body := e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=retrying")
	mustContain(t, body, `>retrying <span class="n">1</span>`, `>scheduled <span class="n">5</span>`)
}

func limitsPost(tok string, kv ...string) url.Values {
	f := url.Values{"csrf": {tok}, "op": {"set-limits"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "confirm": {"yes"}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

// TestSetLimitsForm: an admin sees the queue's limits in the form and sets
// them; bad input is refused with a message naming the field and changes
// nothing; empty fields remove the limits.
func TestSetLimitsForm(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	e.enqueue(q, engine.Task{})
	if err := q.SetLimits(ctx, engine.Limits{MaxInFlight: 4}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs"), `<details class="panel controls" id="controls" open>`,
		`<input name="max_in_flight" value="4"`, `value="set-limits"`)
	tok := e.csrf()
	body := e.mustGetPost(limitsPost(tok, "max_in_flight", "8", "rate", "50", "per", "1s", "burst", "100",
		"part_max_in_flight", "2", "part_rate", "5", "part_per", "1m"))
	mustContain(t, body, "Set the queue&#39;s limits: at most 8 in flight; 50 per 1s, bursts of 100; at most 2 in flight per partition; 5 per 1m0s per partition.")
	// Settings reports the burst in effect: a partition's is its rate.
	want := engine.Limits{MaxInFlight: 8, Rate: 50, Per: time.Second, Burst: 100, PartitionMaxInFlight: 2, PartitionRate: 5, PartitionPer: time.Minute, PartitionBurst: 5}
	settings := func() engine.Limits {
		t.Helper()
		s, err := q.Settings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s.Limits
	}
	if got := settings(); got != want {
		t.Fatalf("limits %+v", got)
	}
	// A burst equal to the rate (the default) is left empty, so a new rate
	// brings its own.
	mustContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs"), `<input name="per" value="1s"`, `<input name="burst" value="100"`,
		`<input name="part_per" value="1m0s"`, `<input name="part_burst" value=""`)
	for _, c := range []struct {
		kv   []string
		says string
	}{
		{[]string{"max_in_flight", "x"}, `in flight at most: &#34;x&#34; is not a whole number`},
		{[]string{"max_in_flight", "-1"}, "in flight at most: -1 is outside 0.."},
		{[]string{"rate", "5"}, "a rate of 5 needs a period"},
		{[]string{"per", "1s"}, "a period or burst needs a rate"},
		{[]string{"rate", "5", "per", "soon"}, `per: &#34;soon&#34; is not a duration`},
		{[]string{"rate", "5", "per", "-1s"}, "per: -1s is outside"},
		{[]string{"part_rate", "5", "part_per", "1s", "part_burst", "9999999999999"}, "burst per partition:"},
		{[]string{"part_burst", "3"}, "a partition period or burst needs a rate"},
	} {
		st, body := e.post("/docket/action", limitsPost(tok, c.kv...))
		if st != http.StatusBadRequest || !strings.Contains(body, c.says) || !strings.Contains(body, "Nothing changed.") {
			t.Errorf("%v: %d, want 400 saying %q:\n%s", c.kv, st, c.says, body)
		}
		if got := settings(); got != want {
			t.Fatalf("%v changed the limits: %+v", c.kv, got)
		}
	}
	mustContain(t, e.mustGetPost(limitsPost(tok)), "Removed the queue&#39;s limits.")
	if got := settings(); got != (engine.Limits{}) {
		t.Fatalf("limits after removing: %+v", got)
	}
	// Without the CSRF token, nothing changes.
	if st, _ := e.post("/docket/action", limitsPost("bad", "max_in_flight", "3")); st != http.StatusForbidden || settings() != (engine.Limits{}) {
		t.Fatalf("without CSRF: %d, %+v", st, settings())
	}
}

// TestLimitsFormOnlyForAdmins: a read-only caller sees the limits but no
// form, and its post is refused without a change.
func TestLimitsFormOnlyForAdmins(t *testing.T) {
	e, who, q := rolesEnv(t)
	e.enqueue(q, engine.Task{})
	if err := q.SetLimits(ctx, engine.Limits{MaxInFlight: 4}); err != nil {
		t.Fatal(err)
	}
	*who = "reader"
	body := e.mustGet("/docket/queue?p=acme&s=prod&q=jobs")
	mustContain(t, body, `<p class="limits">Limits: at most 4 in flight</p>`)
	mustNotContain(t, body, `value="set-limits"`, `name="max_in_flight"`)
	st, _ := e.post("/docket/action", limitsPost(e.csrf(), "max_in_flight", "9"))
	if s, _ := q.Settings(ctx); st != http.StatusForbidden || s.Limits.MaxInFlight != 4 {
		t.Fatalf("a reader's post: %d, limits %+v", st, s.Limits)
	}
	*who = "admin"
	mustContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs"), `value="set-limits"`)
}

// TestDependencyTree: a task's page shows what it waits for and what waits
// for it, two levels each way, with their states and queues, linked to
// their pages; the queue page lists the waiting tasks that wait for a task.
func TestDependencyTree(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	up, mid, down := e.queue("extract"), e.queue("merge"), e.queue("report")
	a := e.enqueue(up, engine.Task{Kind: "extract"})
	b := e.enqueue(up, engine.Task{Kind: "extract", Delay: time.Hour})
	m := e.enqueue(mid, engine.Task{Kind: "merge", DependsOn: []uint64{a, b}})
	r := e.enqueue(down, engine.Task{Kind: "report", DependsOn: []uint64{m}})
	other := e.enqueue(mid, engine.Task{Kind: "unrelated", DependsOn: []uint64{b}})
	link := func(q string, id uint64) string {
		return fmt.Sprintf(`<a href="/docket/task?p=acme&amp;s=prod&amp;q=%s&amp;id=%d">%d</a>`, q, id, id)
	}
	page := e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=merge&id=%d", m))
	mustContain(t, page, `<h2 id="deps-h">Dependencies</h2>`, `<p class="tree-label">Waits for</p>`,
		link("extract", a)+` <span class="pill s-ready">ready</span> <code class="kind">extract</code> <span class="muted">on extract</span>`,
		link("extract", b)+` <span class="pill s-scheduled">scheduled</span>`,
		`<p class="tree-label">Waited for by</p>`, link("report", r)+` <span class="pill s-waiting">waiting</span>`)
	// Two levels: a's page shows m, and under it r.
	page = e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=extract&id=%d", a))
	mi, ri := strings.Index(page, link("merge", m)), strings.Index(page, link("report", r))
	if mi < 0 || ri < mi {
		t.Fatalf("a's tree lacks m then r:\n%s", page)
	}
	mustNotContain(t, page, `<p class="tree-label">Waits for</p>`)
	// A task with no dependencies has no tree.
	lone := e.enqueue(mid, engine.Task{})
	mustNotContain(t, e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=merge&id=%d", lone)), `id="deps"`)
	// The queue page's filter: the tasks of merge waiting for b.
	list := e.mustGet(fmt.Sprintf("/docket/queue?p=acme&s=prod&q=merge&on=%d", b))
	mustContain(t, list, fmt.Sprintf(`value="%d" aria-label`, m), fmt.Sprintf(`value="%d" aria-label`, other),
		fmt.Sprintf("Waiting tasks of this queue that wait for task %d (task %d is scheduled; 2 of the namespace wait for it)", b, b))
	list = e.mustGet(fmt.Sprintf("/docket/queue?p=acme&s=prod&q=merge&on=%d&kind=merge", b))
	mustNotContain(t, list, fmt.Sprintf(`value="%d" aria-label`, other))
	// r is on another queue: report's filter on m finds it, merge's not.
	mustContain(t, e.mustGet(fmt.Sprintf("/docket/queue?p=acme&s=prod&q=report&on=%d", m)), fmt.Sprintf(`value="%d" aria-label`, r))
	mustContain(t, e.mustGet(fmt.Sprintf("/docket/queue?p=acme&s=prod&q=merge&on=%d", m)), "No waiting tasks")
	mustContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=merge&on=999"), "no task 999 in acme/prod: none waits for it")
	if st, _ := e.get("/docket/queue?p=acme&s=prod&q=merge&on=x"); st != http.StatusBadRequest {
		t.Fatalf("a bad id: %d", st)
	}
}

// TestDependencyTreeBounded: a task with many dependents looks up a
// bounded number of them.
func TestDependencyTreeBounded(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.queue("jobs")
	p := e.enqueue(q, engine.Task{})
	kids := make([]engine.Task, 500)
	for i := range kids {
		kids[i] = engine.Task{DependsOn: []uint64{p}}
	}
	if _, err := q.EnqueueBatch(ctx, kids); err != nil {
		t.Fatal(err)
	}
	api := &countingAPI{API: e.db}
	e.serve(api, Options{})
	body := e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", p))
	if n := api.gets.Load(); n > 1+depLookups {
		t.Fatalf("%d lookups for the task page", n)
	}
	mustContain(t, body, `<li class="muted">and 492 more</li>`)
}
