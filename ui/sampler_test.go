package ui

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// Rates come from the difference of sampled totals over time, on the
// engine's clock, per second; a page is robust to totals that stay zero.
func TestRatesFromSampledTotals(t *testing.T) {
	e := newEnv(t, Options{})
	e.enqueue(e.queue("jobs"), engine.Task{})
	// The engine's own totals (one enqueue) are replaced by the test's.
	api := &countingAPI{API: e.db, totals: map[string]engine.Totals{"jobs": {}}}
	e.serve(api, Options{SampleEvery: 5 * time.Second})
	mustContain(t, e.mustGet("/docket/"), "sampling")
	e.clock.Advance(5 * time.Second)
	body := e.mustGet("/docket/")
	mustContain(t, body, `<td class="num opt">0.00</td><td class="num">0.00</td><td class="num" title="0.00 failed attempts and 0.00 dead letters per second">—</td>`)
	api.totals["jobs"] = engine.Totals{Enqueued: 60, Claimed: 40, Completed: 30, Retried: 4, DeadLettered: 2}
	e.clock.Advance(5 * time.Second)
	body = e.mustGet("/docket/")
	// 60 enqueued, 30 completed and 6 errors over 10 s: 6 of 36 finished
	// attempts failed.
	mustContain(t, body, `<td class="num opt">6.00</td><td class="num">3.00</td><td class="num alarm" title="0.60 failed attempts and 0.20 dead letters per second">17%</td>`,
		`<li class="card flow"><span class="n">3.00</span>`, "6.00 in / s", `<span class="n">17%</span> <span class="l">failing</span>`)
	// Views within a sampling period do not add samples.
	before := api.queues.Load()
	e.mustGet("/docket/")
	if api.queues.Load() != before+1 {
		t.Fatalf("a view within the period sampled: %d Queues calls", api.queues.Load()-before)
	}
}

func info(name string, t engine.Totals, oldest time.Time) []engine.QueueInfo {
	return []engine.QueueInfo{{Namespace: ns, Name: name, Totals: t, OldestReady: oldest}}
}

// TestSamplerCountsTheBurstThatCreatesAQueue: a queue that appears between
// two samples with 100,000 tasks enqueued counts them in that interval
// (its baseline is zero at the previous sample), where it used to show 0.
// A queue listed at the dashboard's first sample has no baseline.
func TestSamplerCountsTheBurstThatCreatesAQueue(t *testing.T) {
	s := newSampler(720, 5*time.Second, 10)
	s.add(t0, info("old", engine.Totals{Enqueued: 500}, time.Time{}))
	if r := s.rates(ns, "old"); r.Known {
		t.Fatalf("a queue seen once has rates: %+v", r)
	}
	// Not sampled twice yet: every column an empty array, which the
	// dashboard's charts take the length of (null made them fail).
	b, err := json.Marshal(s.seriesOf([]qkey{{ns, "old"}}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"t":[],"enqueued":[],"completed":[],"failed":[],"dead":[],"oldest":[]`; !strings.Contains(string(b), want) {
		t.Fatalf("the series of a queue seen once: %s, want %s", b, want)
	}
	at := t0.Add(5 * time.Second)
	s.add(at, append(info("old", engine.Totals{Enqueued: 500}, time.Time{}), info("new", engine.Totals{Enqueued: 100_000}, at.Add(-3*time.Second))...))
	r := s.rates(ns, "new")
	if !r.Known || r.Enqueued != 20_000 || r.Window != 5*time.Second {
		t.Fatalf("the burst that created the queue: %+v", r)
	}
	if r := s.rates(ns, "old"); !r.Known || r.Enqueued != 0 {
		t.Fatalf("the queue seen at the first sample: %+v", r)
	}
	sr := s.seriesOf([]qkey{{ns, "new"}})
	if len(sr.T) != 1 || sr.Enqueued[0] != 20_000 || sr.Oldest[0] == nil || *sr.Oldest[0] != 3 {
		t.Fatalf("series %+v", sr)
	}
}

// TestSamplerRingBounds: a ring keeps its last n points whatever the
// number of samples; past maxQueues, new queues are not tracked and are
// counted as such; a queue unlisted for the history's length frees its
// ring, and its totals are its baseline when it comes back.
func TestSamplerRingBounds(t *testing.T) {
	s := newSampler(3, time.Minute, 2)
	for i, c := range []uint64{10, 20, 5, 65} {
		s.add(t0.Add(time.Duration(i)*time.Minute), info("q", engine.Totals{Completed: c}, time.Time{}))
	}
	if ps := s.points(qkey{ns, "q"}); len(ps) != 3 || ps[0].completed != 20 || ps[2].completed != 65 {
		t.Fatalf("ring %+v", ps)
	}
	// The drop to 5 is a restart, not a negative rate: 45 over 2 minutes.
	if r := s.rates(ns, "q"); r.Completed != 0.375 || r.Window != 2*time.Minute {
		t.Fatalf("%+v", r)
	}
	two := func(a, b string, ta, tb uint64) []engine.QueueInfo {
		return append(info(a, engine.Totals{Completed: ta}, time.Time{}), info(b, engine.Totals{Completed: tb}, time.Time{})...)
	}
	now := t0.Add(4 * time.Minute)
	s.add(now, append(two("q", "a", 65, 0), info("b", engine.Totals{}, time.Time{})...))
	if ok, untracked := s.tracked(ns, "b"); ok || untracked != 1 || len(s.rings) != 2 {
		t.Fatalf("past the cap: tracked %v, %d untracked, %d rings", ok, untracked, len(s.rings))
	}
	// q goes unlisted; once the history (3 minutes) has passed, its ring
	// is freed and b takes the slot.
	for i := 1; i <= 4; i++ {
		s.add(now.Add(time.Duration(i)*time.Minute), two("a", "b", 0, 0))
	}
	if ok, _ := s.tracked(ns, "q"); ok {
		t.Fatal("a queue gone for the history's length keeps its ring")
	}
	if ok, untracked := s.tracked(ns, "b"); !ok || untracked != 0 {
		t.Fatalf("b not tracked once a ring was freed: %v %d", ok, untracked)
	}
	// a goes too, and q comes back with the totals it had plus 30: its
	// baseline is what it had when last seen, so 30 count, not 95.
	for i := 5; i <= 8; i++ {
		s.add(now.Add(time.Duration(i)*time.Minute), info("b", engine.Totals{}, time.Time{}))
	}
	s.add(now.Add(9*time.Minute), two("b", "q", 0, 95))
	if r := s.rates(ns, "q"); !r.Known || r.Completed != 0.5 {
		t.Fatalf("q back: %+v", r)
	}
	if len(s.gone) != 1 { // a
		t.Fatalf("%d gone queues kept", len(s.gone))
	}
	// Gone totals are forgotten after goneKeep.
	s.add(now.Add(10*time.Minute+goneKeep), nil)
	if len(s.gone) != 0 {
		t.Fatalf("%d gone queues kept after %v", len(s.gone), goneKeep)
	}
}

// TestRatesEndpoint: the charts' JSON holds the queue's series, per second;
// the overview's sums the queues; an unknown queue parameter is refused.
func TestRatesEndpoint(t *testing.T) {
	e := newEnv(t, Options{})
	api := &countingAPI{API: e.db, totals: map[string]engine.Totals{"a": {}, "b": {}}}
	e.enqueue(e.queue("a"), engine.Task{})
	e.enqueue(e.queue("b"), engine.Task{})
	e.serve(api, Options{SampleEvery: 10 * time.Second})
	e.mustGet("/docket/")
	api.totals["a"] = engine.Totals{Enqueued: 100, Completed: 50, Retried: 10, DeadLettered: 5}
	api.totals["b"] = engine.Totals{Enqueued: 20}
	e.clock.Advance(10 * time.Second)
	var one, all series
	if err := json.Unmarshal([]byte(e.mustGet("/docket/rates?p=acme&s=prod&q=a")), &one); err != nil {
		t.Fatal(err)
	}
	if len(one.T) != 1 || one.Enqueued[0] != 10 || one.Completed[0] != 5 || one.Failed[0] != 1.5 || one.Dead[0] != 0.5 || one.Every != 10 || one.History != 3600 {
		t.Fatalf("queue a: %+v", one)
	}
	if err := json.Unmarshal([]byte(e.mustGet("/docket/rates")), &all); err != nil {
		t.Fatal(err)
	}
	if len(all.T) != 1 || all.Enqueued[0] != 12 || all.Queues != 2 {
		t.Fatalf("every queue: %+v", all)
	}
	if st, body := e.get("/docket/rates?p=acme&s=prod"); st != http.StatusOK || !strings.Contains(body, `"queues":2`) {
		t.Fatalf("without q: %d %s", st, body)
	}
}
