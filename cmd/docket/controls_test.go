package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
)

// TestControlCommands: pause, resume and limits on a data directory (the
// settings stay in it) and on a server's API, in text and JSON; limits
// changes only the limits it is given; stats shows the settings; bad
// limits are the engine's refusal and change nothing.
func TestControlCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	db0, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	db0.Close()
	live := openMem(t, engine.Options{})
	steps := []jsonStep{
		{[]string{"pause", "-json"}, `{"namespace":{"project":"demo","scope":"local"},"queue":"emails","paused":true}`},
		{[]string{"limits", "-json", "-max-in-flight", "3", "-rate", "10", "-per", "1s"},
			`{"namespace":{"project":"demo","scope":"local"},"queue":"emails","paused":true,"limits":{"max_in_flight":3,"rate":10,"per":"1s","burst":10}}`},
		{[]string{"limits", "-json", "-rate", "20"}, // the burst that was the rate's follows it
			`{"namespace":{"project":"demo","scope":"local"},"queue":"emails","paused":true,"limits":{"max_in_flight":3,"rate":20,"per":"1s","burst":20}}`},
		{[]string{"limits", "-json", "-burst", "5"},
			`{"namespace":{"project":"demo","scope":"local"},"queue":"emails","paused":true,"limits":{"max_in_flight":3,"rate":20,"per":"1s","burst":5}}`},
		{[]string{"resume", "-json"},
			`{"namespace":{"project":"demo","scope":"local"},"queue":"emails","paused":false,"limits":{"max_in_flight":3,"rate":20,"per":"1s","burst":5}}`},
		{[]string{"limits", "-json", "-rate", "0"},
			`{"namespace":{"project":"demo","scope":"local"},"queue":"emails","paused":false,"limits":{"max_in_flight":3,"rate":0,"burst":0}}`},
		{[]string{"limits", "-json"},
			`{"namespace":{"project":"demo","scope":"local"},"queue":"emails","paused":false,"limits":{"max_in_flight":3,"rate":0,"burst":0}}`},
		{[]string{"pause", "-json", "-queue", "other"}, `{"namespace":{"project":"demo","scope":"local"},"queue":"other","paused":true}`},
		{[]string{"enqueue", "-json", "-kind", "mail", "-unique", "1h", `{"to":"a","n":1}`}, `{"id":1,"deduplicated":false}`},
		{[]string{"enqueue", "-json", "-kind", "mail", "-unique", "1h", "-unique-states", "ready,scheduled,in-flight,dead", `{ "n": 1, "to": "a" }`},
			`{"id":1,"deduplicated":true}`},
	}
	jsonSteps(t, dir, live, steps)
	code, out, _ := docket(t, "stats", "-dir", dir)
	if code != 0 || !strings.Contains(out, "demo/local emails: at most 3 in flight\n") || !strings.Contains(out, "demo/local other: paused\n") {
		t.Fatalf("stats:\n%s", out)
	}
	code, out, _ = docket(t, "limits", "-dir", dir, "-queue", "other")
	if code != 0 || out != "queue demo/local other: paused, no limits\n" {
		t.Fatalf("limits of a paused queue without limits: %q", out)
	}
	code, out, _ = docket(t, "enqueue", "-dir", dir, "-kind", "mail", "-unique", "1h", `{"n":1,"to":"a"}`)
	if code != 0 || out != "task 1 has the same content: nothing enqueued\n" {
		t.Fatalf("a duplicate by content: %q", out)
	}
	// Refusals: the engine's (exit 1), the command line's (exit 2).
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"limits", "-rate", "5"}, 1, "per"},
		{[]string{"limits", "-max-in-flight", "-1"}, 1, "max in flight"},
		{[]string{"limits", "-clear", "-rate", "1"}, 2, "exclude"},
		{[]string{"enqueue", "-unique-states", "dead", "{}"}, 2, "-unique"},
		{[]string{"enqueue", "-unique", "1h", "-unique-states", "dead", "{}"}, 1, "unique states"},
		{[]string{"enqueue", "-unique", "1h", "-unique-states", "nope", "{}"}, 2, "unknown state"},
		{[]string{"pause", "extra"}, 2, "unexpected argument"},
	} {
		code, _, errs := docket(t, append(c.args, "-dir", dir)...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, %q; want exit %d naming %q", c.args, code, errs, c.code, c.msg)
		}
	}
	db, err := engine.OpenReadOnly(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := db.Queue(demoNS, demoQueue).Settings(ctx)
	if err != nil || s != (engine.QueueSettings{Limits: engine.Limits{MaxInFlight: 3}}) {
		t.Fatalf("settings kept in the directory: %+v %v", s, err)
	}
	if s, _ := db.Queue(demoNS, "other").Settings(ctx); !s.Paused {
		t.Fatal("the pause of a queue without tasks is not in the directory")
	}
}

// TestPartitionCommands: enqueue -partition, limits
// -partition-max-in-flight and partitions, on a data directory and on a
// server's API alike; get shows a task's partition.
func TestPartitionCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	db0, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	db0.Close()
	live := openMem(t, engine.Options{})
	steps := []jsonStep{
		{[]string{"enqueue", "-json", "-queue", "r", "-partition", "tenant-1", `{}`}, `{"id":1,"deduplicated":false}`},
		{[]string{"enqueue", "-json", "-queue", "r", "-partition", "tenant-1", `{}`}, `{"id":2,"deduplicated":false}`},
		{[]string{"enqueue", "-json", "-queue", "r", `{}`}, `{"id":3,"deduplicated":false}`},
		{[]string{"limits", "-json", "-queue", "r", "-partition-max-in-flight", "2"},
			`{"namespace":{"project":"demo","scope":"local"},"queue":"r","paused":false,"limits":{"max_in_flight":0,"rate":0,"burst":0,"partition_max_in_flight":2}}`},
		{[]string{"limits", "-json", "-queue", "r", "-partition-rate", "5", "-partition-per", "1m"},
			`{"namespace":{"project":"demo","scope":"local"},"queue":"r","paused":false,"limits":{"max_in_flight":0,"rate":0,"burst":0,"partition_max_in_flight":2,"partition_rate":5,"partition_per":"1m0s","partition_burst":5}}`},
		{[]string{"limits", "-json", "-queue", "r", "-partition-rate", "3"},
			`{"namespace":{"project":"demo","scope":"local"},"queue":"r","paused":false,"limits":{"max_in_flight":0,"rate":0,"burst":0,"partition_max_in_flight":2,"partition_rate":3,"partition_per":"1m0s","partition_burst":3}}`},
		{[]string{"limits", "-queue", "r", "-partition-burst", "6"}, `queuedemo/localr:running,atmost2inflightperpartition;3per1m0sperpartition,burstsof6`},
		{[]string{"limits", "-json", "-queue", "r", "-partition-rate", "0"},
			`{"namespace":{"project":"demo","scope":"local"},"queue":"r","paused":false,"limits":{"max_in_flight":0,"rate":0,"burst":0,"partition_max_in_flight":2}}`},
		{[]string{"partitions", "-json", "-queue", "r", "-limit", "1"},
			`{"partitions":[{"key":"","counts":{"ready":1,"scheduled":0,"in_flight":0,"dead":0,"completed":0,"waiting":0}}],"next":"@"}`},
		{[]string{"partitions", "-json", "-queue", "r"},
			`{"partitions":[{"key":"","counts":{"ready":1,"scheduled":0,"in_flight":0,"dead":0,"completed":0,"waiting":0}},{"key":"tenant-1","counts":{"ready":2,"scheduled":0,"in_flight":0,"dead":0,"completed":0,"waiting":0}}]}`},
		{[]string{"partitions", "-json", "-queue", "r", "-cursor", "@"},
			`{"partitions":[{"key":"tenant-1","counts":{"ready":2,"scheduled":0,"in_flight":0,"dead":0,"completed":0,"waiting":0}}]}`},
	}
	jsonSteps(t, dir, live, steps)
	code, out, _ := docket(t, "get", "-dir", dir, "-queue", "r", "1")
	if code != 0 || !strings.Contains(out, "partition") || !strings.Contains(out, "tenant-1") {
		t.Fatalf("get: exit %d\n%s", code, out)
	}
	code, out, _ = docket(t, "partitions", "-dir", dir, "-queue", "r", "-limit", "1")
	if code != 0 || !strings.Contains(out, `""`) || !strings.Contains(out, `more: -cursor "@"`) {
		t.Fatalf("partitions: exit %d\n%s", code, out)
	}
	code, _, errs := docket(t, "enqueue", "-dir", dir, "-queue", "r", "-partition", "a\x00b", `{}`)
	if code == 0 || !strings.Contains(errs, "partition") {
		t.Fatalf("a bad partition: exit %d %s", code, errs)
	}
	code, _, errs = docket(t, "limits", "-dir", dir, "-queue", "r", "-partition-max-in-flight", "-1")
	if code == 0 || !strings.Contains(errs, "partition max in flight") {
		t.Fatalf("a bad partition bound: exit %d %s", code, errs)
	}
	code, _, errs = docket(t, "limits", "-dir", dir, "-queue", "r", "-partition-rate", "5")
	if code == 0 || !strings.Contains(errs, "partition rate per") {
		t.Fatalf("a partition rate without a per: exit %d %s", code, errs)
	}
}

// jsonStep is a command and the JSON it prints, compacted.
type jsonStep struct {
	args []string
	want string
}

// jsonSteps runs each step in turn both on the directory dir and against
// a server of live, and fails unless each prints what it wants.
func jsonSteps(t *testing.T, dir string, live *engine.DB, steps []jsonStep) {
	t.Helper()
	compact := regexp.MustCompile(`\s+`)
	for _, st := range steps {
		for _, where := range []string{"dir", "server"} {
			var code int
			var out, errs string
			if where == "dir" {
				code, out, errs = docket(t, append(st.args, "-dir", dir)...)
			} else {
				code, out, errs, _ = remote(t, live, "", append(st.args, "-server", "http://x")...)
			}
			if got := compact.ReplaceAllString(out, ""); code != 0 || got != st.want {
				t.Fatalf("%v on the %s: exit %d, %s\n%s\nwant %s", st.args, where, code, errs, got, st.want)
			}
		}
	}
}
