package record

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
)

// onlyAPI hides every method of a DB but engine.API's.
type onlyAPI struct{ engine.API }

// TestWrapCountsAndPassesThrough: calls are counted under their names and
// answered by the wrapped value, through the Queue and KV handles too; the
// wrapped value implements Presence and Quotas exactly when the DB given
// does.
func TestWrapCountsAndPassesThrough(t *testing.T) {
	ctx := context.Background()
	db, err := engine.OpenInMemory(engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := New()
	api := r.Wrap(db)
	ns := engine.NS("p", "s")
	q := api.Queue(ns, "q")
	e, err := q.Enqueue(ctx, engine.Task{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.Queue(ns, "q").Get(ctx, e.ID); err != nil || got.ID != e.ID {
		t.Fatalf("the enqueue did not reach the DB: %v %v", got, err)
	}
	q.Enqueue(ctx, engine.Task{})
	if _, err := api.KV(ns).Commit(ctx, engine.Set("k", []byte("1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := api.(engine.Presence).Workers(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.(engine.Quotas).Quota(ctx, ns); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"API.Queue": 1, "Queue.Enqueue": 2, "API.KV": 1, "KV.Commit": 1, "Presence.Workers": 1, "Quotas.Quota": 1}
	got := r.Calls()
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s counted %d, want %d (%v)", k, got[k], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("counted %v, want %v", got, want)
	}
	r.Reset()
	if len(r.Calls()) != 0 || r.Count("Queue.Enqueue") != 0 {
		t.Errorf("after Reset: %v", r.Calls())
	}

	bare := r.Wrap(onlyAPI{db})
	if _, ok := bare.(engine.Presence); ok {
		t.Error("a wrapped API without Presence implements it")
	}
	if _, ok := bare.(engine.Quotas); ok {
		t.Error("a wrapped API without Quotas implements it")
	}
}

// TestMissing: a method neither reached nor exempt, an exemption of a
// method that was reached, one of a method that does not exist and one
// without a reason are each reported, naming the layer and the method.
func TestMissing(t *testing.T) {
	all := Methods()
	if len(all) < 40 || !strings.HasPrefix(all[0], "API.") {
		t.Fatalf("Methods: %v", all)
	}
	r := New()
	exempt := map[string]string{}
	for _, m := range all {
		if m != "Queue.RunNow" && m != "Queue.Claim" && m != "KV.Get" {
			exempt[m] = "because"
		}
	}
	r.hit("KV.Get")
	r.hit("Queue.Claim")
	exempt["Queue.Claim"] = "workers claim"
	exempt["Queue.Gone"] = "removed"
	exempt["KV.Scan"] = " "
	got := strings.Join(r.Missing("layer x", exempt), "\n")
	for _, want := range []string{
		"layer x: Queue.RunNow is not reached",
		"layer x: Queue.Claim is exempt (\"workers claim\") but was reached",
		"layer x: exemption of Queue.Gone (\"removed\") names no method",
		"layer x: exemption of KV.Scan gives no reason",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 4 {
		t.Errorf("%d lines, want 4:\n%s", n, got)
	}
	delete(exempt, "Queue.Gone")
	exempt["KV.Scan"] = "reason"
	exempt["Queue.RunNow"] = "reason"
	delete(exempt, "Queue.Claim")
	if got := r.Missing("layer x", exempt); len(got) != 0 {
		t.Errorf("all reached or exempt: %v", got)
	}
}
