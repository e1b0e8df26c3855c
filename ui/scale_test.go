package ui

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// fill enqueues n small tasks of kind "bulk" in batches.
func fill(t testing.TB, q engine.Queue, n int) {
	t.Helper()
	batch := make([]engine.Task, 0, engine.MaxBatch)
	for i := 0; i < n; i += len(batch) {
		batch = batch[:0]
		for j := 0; j < min(engine.MaxBatch, n-i); j++ {
			batch = append(batch, engine.Task{Kind: "bulk", Priority: j % 3})
		}
		if _, err := q.EnqueueBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
}

// With a million tasks in a queue, every view reads a bounded number of
// task records: a page in the engine's order, the scan window for a filter
// or another sort, one lookup for an id. The sweep covers each sort with
// each filter.
func TestLargeQueueBoundedWork(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 20_000
	}
	e := newEnv(t, Options{AllowActions: true, PageSize: 50, ScanWindow: 2000})
	q := e.queue("big")
	start := time.Now()
	fill(t, q, n)
	t.Logf("enqueued %d tasks in %v", n, time.Since(start))
	api := &countingAPI{API: e.db}
	e.serve(api, Options{AllowActions: true, PageSize: 50, ScanWindow: 2000})
	base := "/docket/queue?p=acme&s=prod&q=big"
	nextRE := regexp.MustCompile(`href="/docket/queue\?([^"]+)" rel="next"`)

	check := func(name, path string, maxRecords int64, want ...string) string {
		t.Helper()
		api.listed.Store(0)
		start := time.Now()
		body := e.mustGet(path)
		took := time.Since(start)
		if got := api.listed.Load(); got > maxRecords {
			t.Fatalf("%s read %d task records, want at most %d", name, got, maxRecords)
		}
		mustContain(t, body, want...)
		t.Logf("%s: %d records read, %v", name, api.listed.Load(), took)
		return body
	}
	next := func(body string) string {
		t.Helper()
		m := nextRE.FindStringSubmatch(body)
		if m == nil {
			t.Fatal("no next page link")
		}
		return "/docket/queue?" + strings.ReplaceAll(m[1], "&amp;", "&")
	}
	check("overview", "/docket/", 0, fmt.Sprintf(`state=ready">%s</a>`, group(fmt.Sprint(n))))
	body := check("first page", base, 50, fmt.Sprintf(`ready <span class="n">%s</span>`, group(fmt.Sprint(n))))
	if rows := strings.Count(body, `type="checkbox" name="id"`); rows != 50 {
		t.Fatalf("first page has %d rows", rows)
	}
	body = check("second page", next(body), 50)
	if rows := strings.Count(body, `type="checkbox" name="id"`); rows != 50 {
		t.Fatalf("second page has %d rows", rows)
	}
	// A filter runs in the engine over the whole queue (Search, which
	// lists nothing through List) and says how many match.
	body = check("filter matching nothing", base+"&kind=none", 0, "0 tasks match in the whole queue")
	if strings.Contains(body, `rel="next"`) {
		t.Fatal("a search that matched nothing has a next page")
	}
	check("filter matching all", base+"&kind=bulk", 0, group(fmt.Sprint(n))+" tasks match in the whole queue")
	for _, by := range []string{"", "priority", "due", "age"} {
		for _, f := range []string{"", "&kind=none", "&kind=bulk", "&err=timeout", "&kind=bulk&err=timeout"} {
			limit := int64(2000)
			if f == "" && (by == "" || by == "priority") {
				limit = 50 // the engine's own order for ready tasks
			}
			name := fmt.Sprintf("sort %q filter %q", by, f)
			body := check(name, base+"&sort="+by+f, limit)
			if strings.Contains(body, `rel="next"`) {
				check(name+", next page", next(body), limit)
			}
		}
	}
	body = check("sorted by age", base+"&sort=age", 0)
	if strings.Contains(body, "Sorted within a window") {
		t.Fatal("oldest first is sorted within a window, not over the queue")
	}
	if rows := strings.Count(body, `type="checkbox" name="id"`); rows != 50 {
		t.Fatalf("sorted page has %d rows", rows)
	}
	check("id lookup", base+"&id=777", 0, `>777</a>`)
	check("dead letters", "/docket/dead?p=acme&s=prod&q=big", 2000, "<strong>0</strong> dead tasks")
	if api.gets.Load() != 1 {
		t.Fatalf("%d Get calls, want 1 (the id lookup)", api.gets.Load())
	}
	// Finding a task by id alone asks each queue once.
	st, _ := e.get("/docket/task?id=778")
	if st != http.StatusSeeOther || api.gets.Load() != 2 {
		t.Fatalf("find by id: %d, %d Get calls", st, api.gets.Load())
	}
}

// Every view of every state, with every sort and filter, reads at most the
// scan window, and a view in the engine's order at most a page.
func TestEveryViewIsBounded(t *testing.T) {
	const each, page, window = 1200, 20, 500
	e := newEnv(t, Options{AllowActions: true, PageSize: page, ScanWindow: window})
	q := e.queue("mixed")
	fill(t, q, 5*each)
	claim := func(n int) []engine.Lease {
		t.Helper()
		ls, err := q.Claim(ctx, "w", time.Hour, n)
		if err != nil || len(ls) != n {
			t.Fatalf("claim %d: %d, %v", n, len(ls), err)
		}
		return ls
	}
	for _, l := range claim(each) {
		if err := q.Fail(ctx, l, engine.Failure{Err: "boom", Permanent: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range claim(each) {
		if err := q.Fail(ctx, l, engine.Failure{Err: "later", RetryAfter: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.CompleteBatch(ctx, claim(each)); err != nil {
		t.Fatal(err)
	}
	claim(each)
	parent, err := e.queue("upstream").Enqueue(ctx, engine.Task{})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make([]engine.Task, each)
	for i := range waiting {
		waiting[i] = engine.Task{Kind: "bulk", DependsOn: []uint64{parent.ID}}
	}
	if _, err := q.EnqueueBatch(ctx, waiting); err != nil {
		t.Fatal(err)
	}
	c, _ := q.Counts(ctx)
	if c != (engine.Counts{Ready: each, Scheduled: each, InFlight: each, Dead: each, Completed: each, Waiting: each}) {
		t.Fatalf("counts %+v", c)
	}
	api := &countingAPI{API: e.db}
	e.serve(api, Options{AllowActions: true, PageSize: page, ScanWindow: window})
	tabs := append([]string(nil), retryingTab)
	for _, st := range states {
		tabs = append(tabs, st.String())
	}
	for _, tab := range tabs {
		st := engine.Scheduled
		if tab != retryingTab {
			st, _ = parseState(tab)
		}
		for _, by := range []string{"", "priority", "due", "age"} {
			for _, f := range []string{"", "&kind=bulk", "&kind=none", "&err=o", "&kind=bulk&err=zzz"} {
				native := by == "" || by == engineOrder(st)
				limit := int64(window)
				if native && (f == "" || f == "&kind=bulk") {
					limit = page // a filter every task matches reads no more than a page
				}
				rows := page
				if st == engine.Scheduled {
					// The scheduled tasks split into timers and retries,
					// counted over a window, each tab a filtered scan.
					limit = 2 * window
					if tab != retryingTab {
						rows = 0 // every scheduled task here is a retry
					}
				}
				path := fmt.Sprintf("/docket/queue?p=acme&s=prod&q=mixed&state=%s&sort=%s%s", tab, by, f)
				api.listed.Store(0)
				body := e.mustGet(path)
				if got := api.listed.Load(); got > limit {
					t.Fatalf("%s read %d task records, want at most %d", path, got, limit)
				}
				if (f == "" || f == "&kind=bulk") && strings.Count(body, `type="checkbox" name="id"`) != rows {
					t.Fatalf("%s shows %d rows, want %d", path, strings.Count(body, `type="checkbox" name="id"`), rows)
				}
			}
		}
	}
	api.listed.Store(0)
	mustContain(t, e.mustGet("/docket/dead?p=acme&s=prod&q=mixed"), "grouped from the first 500")
	if got := api.listed.Load(); got > window {
		t.Fatalf("dead letters read %d records", got)
	}
}

// Oldest first (and newest first) is over the whole queue; a sort the
// engine does not keep (due time, for ready tasks) is applied to one
// window at a time, and its pages walk that window before the next.
func TestWindowedSort(t *testing.T) {
	e := newEnv(t, Options{PageSize: 2, ScanWindow: 4})
	q := e.queue("jobs")
	for i := range 6 {
		e.enqueue(q, engine.Task{Priority: i})
		e.clock.Advance(time.Second)
	}
	rowsRE := regexp.MustCompile(`task\?p=acme&amp;q=jobs&amp;s=prod&amp;id=(\d+)"`)
	nextRE := regexp.MustCompile(`href="/docket/queue\?([^"]+)" rel="next"`)
	walk := func(path string) string {
		var pages []string
		for range 5 {
			body := e.mustGet(path)
			var ids []string
			for _, m := range rowsRE.FindAllStringSubmatch(body, -1) {
				ids = append(ids, m[1])
			}
			pages = append(pages, strings.Join(ids, " "))
			m := nextRE.FindStringSubmatch(body)
			if m == nil {
				break
			}
			path = "/docket/queue?" + strings.ReplaceAll(m[1], "&amp;", "&")
		}
		return strings.Join(pages, " | ")
	}
	if got := walk("/docket/queue?p=acme&s=prod&q=jobs&sort=age"); got != "1 2 | 3 4 | 5 6" {
		t.Fatalf("oldest first: pages %q", got)
	}
	if got := walk("/docket/queue?p=acme&s=prod&q=jobs&sort=newest"); got != "6 5 | 4 3 | 2 1" {
		t.Fatalf("newest first: pages %q", got)
	}
	// Priority order is 6 5 4 3 | 2 1; each window of 4 is sorted by due time.
	if got := walk("/docket/queue?p=acme&s=prod&q=jobs&sort=due"); got != "3 4 | 5 6 | 1 2" {
		t.Fatalf("due: pages %q", got)
	}
	mustContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&sort=due"), "Sorted within a window of 4 tasks read")
	if st, _ := e.get("/docket/queue?p=acme&s=prod&q=jobs&sort=due&off=4"); st != http.StatusBadRequest {
		t.Fatalf("an offset past the window: %d", st)
	}
}

func TestFiltersAndPaging(t *testing.T) {
	e := newEnv(t, Options{PageSize: 2, ScanWindow: 4})
	q := e.queue("jobs")
	for i := range 6 {
		kind := "a"
		if i%2 == 1 {
			kind = "b"
		}
		e.enqueue(q, engine.Task{Kind: kind, Priority: i})
		e.clock.Advance(time.Second)
	}
	rowsRE := regexp.MustCompile(`task\?p=acme&amp;q=jobs&amp;s=prod&amp;id=(\d+)"`)
	ids := func(body string) string {
		var out []string
		for _, m := range rowsRE.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return strings.Join(out, " ")
	}
	base := "/docket/queue?p=acme&s=prod&q=jobs"
	// Ready order: priority high first.
	if got := ids(e.mustGet(base)); got != "6 5" {
		t.Fatalf("first page %q", got)
	}
	// A filter searches the whole queue, oldest first, and counts.
	body := e.mustGet(base + "&kind=a")
	if got := ids(body); got != "1 3" {
		t.Fatalf("kind a: %q", got)
	}
	mustContain(t, body, "3 tasks match in the whole queue")
	if got := ids(e.mustGet(base + "&kind=a&sort=newest")); got != "5 3" {
		t.Fatalf("kind a newest first: %q", got)
	}
	// In the engine's priority order, the filter reads a window.
	if got := ids(e.mustGet(base + "&kind=a&sort=priority")); got != "5 3" {
		t.Fatalf("kind a by priority: %q", got)
	}
	body = e.mustGet(base + "&kind=zzz")
	mustContain(t, body, "0 tasks match in the whole queue")
	if got := ids(e.mustGet(base + "&id=4")); got != "4" {
		t.Fatalf("by id: %q", got)
	}
	id := e.kill(q, "Connection RESET by peer")
	e.kill(q, "bad payload")
	if got := ids(e.mustGet(base + "&state=dead&err=reset")); got != fmt.Sprint(id) {
		t.Fatalf("error text filter: %q", got)
	}
}

func TestNewSamplesInTheBackgroundAndCloses(t *testing.T) {
	e := newEnv(t, Options{})
	e.enqueue(e.queue("jobs"), engine.Task{})
	api := &countingAPI{API: e.db, sampled: make(chan struct{}, 1)}
	d := New(api, Options{SampleEvery: time.Millisecond})
	for range 2 {
		select {
		case <-api.sampled:
		case <-time.After(10 * time.Second):
			t.Fatal("no background sample in 10 s")
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	n := api.queues.Load()
	if n < 2 {
		t.Fatalf("%d samples", n)
	}
	if err := d.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if api.queues.Load() != n {
		t.Fatal("sampling went on after Close")
	}
}
