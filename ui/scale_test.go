package ui

import (
	"fmt"
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

// With a million tasks in a queue, every page reads a bounded number of
// task records: a page, or the scan window for a filter.
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
	check("overview", "/docket/", 0, fmt.Sprintf(`state=ready">%d</a>`, n))
	body := check("first page", base, 50, fmt.Sprintf(`ready <span class="n">%d</span>`, n))
	if rows := strings.Count(body, `type="checkbox" name="id"`); rows != 50 {
		t.Fatalf("first page has %d rows", rows)
	}
	m := nextRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no next page link")
	}
	body = check("second page", "/docket/queue?"+strings.ReplaceAll(m[1], "&amp;", "&"), 50)
	if rows := strings.Count(body, `type="checkbox" name="id"`); rows != 50 {
		t.Fatalf("second page has %d rows", rows)
	}
	body = check("filter matching nothing", base+"&kind=none", 2000, "Read 2000 tasks (the scan window) and found 0 matching")
	if nextRE.FindStringSubmatch(body) == nil {
		t.Fatal("a capped scan offers no way to read on")
	}
	check("filter by error text", base+"&err=timeout", 2000)
	check("sort within the page", base+"&sort=priority", 50)
	check("id lookup", base+"&id=777", 0, `>777</a>`)
	check("dead letters", "/docket/dead?p=acme&s=prod&q=big", 2000, "0 dead")
	if api.gets.Load() != 1 {
		t.Fatalf("%d Get calls, want 1 (the id lookup)", api.gets.Load())
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
	if got := ids(e.mustGet(base + "&kind=a")); got != "5 3" {
		t.Fatalf("kind a: %q", got)
	}
	if got := ids(e.mustGet(base + "&kind=a&sort=age")); got != "3 5" {
		t.Fatalf("kind a by age: %q", got)
	}
	body := e.mustGet(base + "&kind=zzz")
	mustContain(t, body, "Read 4 tasks (the scan window) and found 0 matching", "rel=\"next\"")
	if got := ids(e.mustGet(base + "&id=4")); got != "4" {
		t.Fatalf("by id: %q", got)
	}
	id := e.kill(q, "Connection RESET by peer")
	e.kill(q, "bad payload")
	if got := ids(e.mustGet(base + "&state=dead&err=reset")); got != fmt.Sprint(id) {
		t.Fatalf("error text filter: %q", got)
	}
}

// Rates come from the difference of sampled totals over time, on the
// engine's clock; a page is robust to totals that stay zero.
func TestRatesFromSampledTotals(t *testing.T) {
	e := newEnv(t, Options{})
	e.enqueue(e.queue("jobs"), engine.Task{})
	// The engine's own totals (one enqueue) are replaced by the test's.
	api := &countingAPI{API: e.db, totals: map[string]engine.Totals{"jobs": {}}}
	e.serve(api, Options{SampleEvery: 5 * time.Second})
	mustContain(t, e.mustGet("/docket/"), "sampling")
	e.clock.Advance(5 * time.Second)
	body := e.mustGet("/docket/")
	mustContain(t, body, `<td class="num">0.0</td>`)
	api.totals["jobs"] = engine.Totals{Enqueued: 60, Claimed: 40, Completed: 30, Retried: 4, DeadLettered: 2}
	e.clock.Advance(5 * time.Second)
	body = e.mustGet("/docket/")
	// 60 enqueued, 30 completed and 6 errors over 10 s.
	mustContain(t, body, `<td class="num">360.0</td><td class="num">180.0</td><td class="num">36.0</td>`, "<polyline points=")
	// Views within a sampling period do not add samples.
	before := api.queues.Load()
	e.mustGet("/docket/")
	if api.queues.Load() != before+1 {
		t.Fatalf("a view within the period sampled: %d Queues calls", api.queues.Load()-before)
	}
}

func TestSamplerRestartedCountersAndRing(t *testing.T) {
	s := newSampler(3, time.Second)
	info := func(c uint64) []engine.QueueInfo {
		return []engine.QueueInfo{{Namespace: ns, Name: "q", Totals: engine.Totals{Completed: c}}}
	}
	for i, c := range []uint64{10, 20, 5, 65} {
		s.add(t0.Add(time.Duration(i)*time.Minute), info(c))
	}
	r := s.rates(ns, "q")
	// The ring keeps the last 3 samples (20, 5, 65) over 2 minutes; the
	// drop to 5 is a restart, not a negative rate.
	if len(r.Spark) != 2 || r.Spark[0] != 0 || r.Spark[1] != 60 || r.Completed != 22.5 || r.Window != 2*time.Minute {
		t.Fatalf("%+v", r)
	}
	s.add(t0.Add(10*time.Minute), nil)
	if r := s.rates(ns, "q"); r.Known {
		t.Fatalf("a queue gone from the listing keeps rates: %+v", r)
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
