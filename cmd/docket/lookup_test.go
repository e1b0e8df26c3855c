package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
)

// TestGetByIDAlone: get finds a task by its id alone, in whichever queue
// and namespace it is; -ns narrows the search to a namespace, -queue names
// the queue; a task in none of them is not found (exit 1).
func TestGetByIDAlone(t *testing.T) {
	dir := dataDir(t)
	db, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Queue(engine.NS("acme", "prod"), "reports").Enqueue(ctx, engine.Task{Payload: []byte(`{"r":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	id := fmt.Sprint(res.ID)
	code, out, errs := docket(t, "get", "-dir", dir, id)
	if code != 0 || !strings.Contains(out, "task "+id+" in acme/prod reports: ready") || !strings.Contains(out, `"r": 1`) {
		t.Errorf("get %s: exit %d\n%s%s", id, code, out, errs)
	}
	if code, out, _ := docket(t, "get", "-dir", dir, "-ns", "acme/prod", "-json", id); code != 0 || !strings.Contains(out, `"queue": "reports"`) {
		t.Errorf("get -ns acme/prod %s: exit %d\n%s", id, code, out)
	}
	for _, args := range [][]string{
		{"get", "-dir", dir, "-ns", "demo/local", id},
		{"get", "-dir", dir, "-queue", "emails", id},
		{"get", "-dir", dir, "999"},
	} {
		if code, _, errs := docket(t, args...); code != 1 || !strings.Contains(errs, "not found") {
			t.Errorf("%v: exit %d, %q: want not found", args, code, errs)
		}
	}
}

// TestMissingQueueIsReported: the commands that read or act on a queue's
// tasks report a queue that holds no task and has no settings as missing,
// with exit 1, instead of showing it empty; stats does so for its -ns and
// -queue filters. Pause and enqueue may still start a queue.
func TestMissingQueueIsReported(t *testing.T) {
	dir := dataDir(t)
	for _, args := range [][]string{
		{"inspect", "-queue", "nosuch"},
		{"get", "-queue", "nosuch", "1"},
		{"dead", "-queue", "nosuch"},
		{"dead", "-queue", "nosuch", "-by-error"},
		{"dead", "-queue", "nosuch", "-redrive-all"},
		{"dead", "-queue", "nosuch", "-redrive", "1"},
		{"cancel", "-queue", "nosuch", "1"},
		{"cancel", "-queue", "nosuch", "-completed-all"},
		{"run-now", "-queue", "nosuch", "1"},
		{"partitions", "-queue", "nosuch"},
		{"limits", "-queue", "nosuch"},
		{"stats", "-queue", "nosuch"},
		{"stats", "-ns", "no/such"},
		{"stats", "-ns", "no/such", "-queue", "emails"},
	} {
		before := tree(t, dir)
		code, out, errs := docket(t, append(args, "-dir", dir)...)
		if code != 1 || !strings.Contains(errs, "no queue") || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q: want exit 1 and no queue", args, code, out, errs)
		}
		if tree(t, dir) != before {
			t.Errorf("%v changed the directory", args)
		}
	}
	code, out, errs := docket(t, "stats", "-dir", dir, "-queue", "emails")
	if code != 0 || !strings.Contains(out, "emails") {
		t.Errorf("stats -queue emails: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := docket(t, "pause", "-dir", dir, "-queue", "later"); code != 0 {
		t.Errorf("pause of a queue before its first task: exit %d, %q", code, errs)
	}
	if code, _, errs := docket(t, "inspect", "-dir", dir, "-queue", "later"); code != 0 {
		t.Errorf("inspect of a paused queue without tasks: exit %d, %q", code, errs)
	}
}

// TestEnqueueWithoutPayloadSaysSo: an enqueue without a payload (which the
// engine takes) says it enqueued an empty one; with a payload it does not.
func TestEnqueueWithoutPayloadSaysSo(t *testing.T) {
	dir := dataDir(t)
	code, out, errs := docket(t, "enqueue", "-dir", dir)
	if code != 0 || !strings.Contains(out, "enqueued on demo/local emails with an empty payload") {
		t.Errorf("enqueue without a payload: exit %d, %q %q", code, out, errs)
	}
	code, out, _ = docket(t, "enqueue", "-dir", dir, `{"a":1}`)
	if code != 0 || strings.Contains(out, "empty") {
		t.Errorf("enqueue with a payload: exit %d, %q", code, out)
	}
}

// TestMissingQueueNeedsRead: a caller who may cancel on a queue but not read
// it is not told the queue is missing: the cancel goes through.
func TestMissingQueueNeedsRead(t *testing.T) {
	db := openMem(t, engine.Options{Authorizer: engine.Policy{
		"ops": {{Project: demoNS.Project, Scope: demoNS.Scope, Perms: engine.PermAdmin}},
	}})
	res, err := db.Queue(demoNS, demoQueue).Enqueue(ctx, engine.Task{})
	if err != nil {
		t.Fatal(err)
	}
	ops := db.As(engine.Caller{ID: "ops"})
	code, out, errs, _ := remote(t, ops, "", "cancel", "-server", "http://a", fmt.Sprint(res.ID))
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Errorf("cancel without read: exit %d, %q %q", code, out, errs)
	}
	code, _, errs, _ = remote(t, ops, "", "inspect", "-server", "http://a")
	if code != 1 || !strings.Contains(errs, "permission") {
		t.Errorf("inspect without read: exit %d, %q: want the permission refusal", code, errs)
	}
}

// TestEnqueueBackoffBaseOverMax: a first retry delay over the longest is a
// usage error, before anything is opened.
func TestEnqueueBackoffBaseOverMax(t *testing.T) {
	dir := dataDir(t)
	before := tree(t, dir)
	code, _, errs := docket(t, "enqueue", "-dir", dir, "-backoff-base", "2m", "-backoff-max", "1m", "{}")
	if code != 2 || !strings.Contains(errs, "-backoff-base 2m0s is over -backoff-max 1m0s") {
		t.Errorf("exit %d, %q", code, errs)
	}
	if tree(t, dir) != before {
		t.Error("the refused enqueue changed the directory")
	}
}

// TestTokenRefusesCallerIDsTheEngineRefuses: docket token writes no line
// for a caller id every call would be refused for (over 255 bytes, a
// control character); 255 bytes is fine.
func TestTokenRefusesCallerIDsTheEngineRefuses(t *testing.T) {
	for _, id := range []string{strings.Repeat("a", 256), "a\u0085b"} {
		code, out, errs := docket(t, "token", id, "acme/prod:read")
		if code != 2 || out != "" || !strings.Contains(errs, "caller id") {
			t.Errorf("token for a %d-byte id: exit %d, %q %q", len(id), code, out, errs)
		}
	}
	if code, out, errs := docket(t, "token", strings.Repeat("a", 255), "acme/prod:read"); code != 0 || !strings.Contains(out, "sha256:") {
		t.Errorf("token for a 255-byte id: exit %d, %q", code, errs)
	}
	if code, out, _ := docket(t, "token", "-h"); code != 0 || !strings.Contains(out, "usage: docket token") {
		t.Errorf("token -h: exit %d, %q", code, out)
	}
}
