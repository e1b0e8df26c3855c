package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// kept is an API handed to a command as a server's would be: closing it,
// as every command does when it finishes, leaves the DB open for the test.
type kept struct{ engine.API }

func (kept) Close() error { return nil }

// dialed records what a command asked the dialer for.
type dialed struct{ url, token string }

// remote runs the command line in-process with -server reaching api
// instead of the network, and returns the exit status, the output and what
// was dialed.
func remote(t *testing.T, api engine.API, stdin string, args ...string) (int, string, string, *dialed) {
	t.Helper()
	var out, errb bytes.Buffer
	var d *dialed
	c := cli{stdout: &out, stderr: &errb, stdin: strings.NewReader(stdin),
		dial: func(ctx context.Context, url, token string) (engine.API, error) {
			d = &dialed{url, token}
			return kept{api}, nil
		}}
	code := runCLI(ctx, c, args)
	return code, out.String(), errb.String(), d
}

// docketIn is docket with stdin.
func docketIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	c := cli{stdout: &out, stderr: &errb, stdin: strings.NewReader(stdin), dial: dialServer}
	return runCLI(ctx, c, args), out.String(), errb.String()
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

func openMem(t *testing.T, opts engine.Options) *engine.DB {
	t.Helper()
	opts.Logger = quiet
	db, err := engine.OpenInMemory(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestServerFlagsReachTheDialer: -server and -token (or $DOCKET_TOKEN) are
// what the command dials with, and the command then works on the API it
// got: the same output as on the DB itself.
func TestServerFlagsReachTheDialer(t *testing.T) {
	db := openMem(t, engine.Options{})
	if _, err := db.Queue(demoNS, demoQueue).Enqueue(ctx, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKET_TOKEN", "from-env")
	code, out, errs, d := remote(t, db, "", "stats", "-server", "http://a:7070,http://b:7070")
	if code != 0 || d == nil || d.url != "http://a:7070,http://b:7070" || d.token != "from-env" {
		t.Fatalf("exit %d, dialed %+v, stderr %q", code, d, errs)
	}
	if !regexp.MustCompile(`demo/local\s+emails\s+1\s+0\s+0\s+0\s+0`).MatchString(out) {
		t.Fatalf("stats through the server:\n%s", out)
	}
	_, _, _, d = remote(t, db, "", "stats", "-server", "http://a:7070", "-token", "from-flag")
	if d.token != "from-flag" {
		t.Fatalf("-token did not win over $DOCKET_TOKEN: %+v", d)
	}
}

// TestCommandsOnDirectoryAndServer runs one script of commands on a data
// directory and on a server's API (a DB behind the dialer) and checks that
// both print the same JSON: the commands are written once, over
// engine.API.
func TestCommandsOnDirectoryAndServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	db0, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	db0.Close()
	live := openMem(t, engine.Options{})
	script := []struct {
		stdin string
		args  []string
	}{
		{"", []string{"enqueue", "-json", "-kind", "send", "-priority", "3", "-max-attempts", "1", "-key", "k1", "-header", "tenant=7", `{"to":"a@b"}`}},
		{"", []string{"enqueue", "-json", "-key", "k1", `{"to":"other"}`}},
		{`{"n": 2}` + "\n", []string{"enqueue", "-json", "-delay", "1h", "-"}},
		{"", []string{"get", "-json", "1"}},
		{"", []string{"get", "2", "-json"}}, // flags after the id
		{"", []string{"inspect", "-json", "-state", "scheduled"}},
		{"", []string{"run-now", "-json", "2"}},
		{"", []string{"inspect", "-json", "-state", "ready"}},
		{"", []string{"cancel", "-json", "2"}},
		{"", []string{"kv", "set", "-json", "user/1", "hello"}},
		{"\x00\xff", []string{"kv", "set", "-json", "user/2", "-"}},
		{"", []string{"kv", "get", "-json", "user/2"}},
		{"", []string{"kv", "scan", "-json", "-prefix", "user/"}},
		{"", []string{"kv", "delete", "-json", "user/1"}},
		{"", []string{"stats", "-json"}},
	}
	var onDir, onServer []string
	for _, step := range script {
		code, out, errs := docketIn(t, step.stdin, append(step.args, "-dir", dir)...)
		if code != 0 {
			t.Fatalf("%v on the directory: exit %d, %s", step.args, code, errs)
		}
		onDir = append(onDir, out)
		code, out, errs, _ = remote(t, live, step.stdin, append(step.args, "-server", "http://x")...)
		if code != 0 {
			t.Fatalf("%v on the server: exit %d, %s", step.args, code, errs)
		}
		onServer = append(onServer, out)
	}
	// Times differ between the two; everything else must not.
	times := regexp.MustCompile(`"(created_at|updated_at|not_before|at)": "[^"]*"`)
	for i := range script {
		a, b := times.ReplaceAllString(onDir[i], "T"), times.ReplaceAllString(onServer[i], "T")
		// Only the directory's stats carry engine counters (the server
		// here is an API without them); compare the queues.
		if script[i].args[0] == "stats" {
			qa := decode[struct{ Queues []queueJSON }](t, onDir[i])
			qb := decode[struct{ Queues []queueJSON }](t, onServer[i])
			for _, qs := range [][]queueJSON{qa.Queues, qb.Queues} {
				for j := range qs {
					if qs[j].OldestReady == nil && qs[j].Counts.Ready > 0 {
						t.Errorf("stats: queue %s has ready tasks and no oldest-ready time", qs[j].Queue)
					}
					qs[j].OldestReady = nil // the two DBs run on their own clocks
				}
			}
			ja, _ := json.Marshal(qa)
			jb, _ := json.Marshal(qb)
			a, b = string(ja), string(jb)
		}
		if a != b {
			t.Errorf("%v differs:\ndirectory: %s\nserver:    %s", script[i].args, a, b)
		}
	}

	compact := func(raw json.RawMessage) string {
		var b bytes.Buffer
		json.Compact(&b, raw)
		return b.String()
	}
	first := decode[taskJSON](t, onDir[3])
	if first.Kind != "send" || first.Priority != 3 || first.MaxAttempts != 1 || first.IdempotencyKey != "k1" ||
		first.Headers["tenant"] != "7" || compact(first.Payload) != `{"to":"a@b"}` || first.State != "ready" {
		t.Fatalf("get 1: %+v", first)
	}
	if dup := decode[map[string]any](t, onDir[1]); dup["deduplicated"] != true || dup["id"] != float64(1) {
		t.Fatalf("second enqueue with the key: %s", onDir[1])
	}
	second := decode[taskJSON](t, onDir[4])
	if second.State != "scheduled" || compact(second.Payload) != `{"n":2}` || second.NotBefore == nil {
		t.Fatalf("get 2 (delayed, from stdin): %+v", second)
	}
	if ready := decode[pageJSON](t, onDir[7]); len(ready.Tasks) != 2 {
		t.Fatalf("after run-now both tasks are ready: %s", onDir[7])
	}
	if e := decode[entryJSON](t, onDir[11]); e.Value != nil || !bytes.Equal(e.ValueBase64, []byte("\x00\xff")) {
		t.Fatalf("a binary value: %s", onDir[11])
	}
	if scan := decode[struct{ Entries []entryJSON }](t, onDir[12]); len(scan.Entries) != 2 || *scan.Entries[0].Value != "hello" {
		t.Fatalf("scan: %s", onDir[12])
	}
	st := decode[struct {
		Queues []queueJSON
		Engine *statsJSON
	}](t, onDir[14])
	if len(st.Queues) != 1 || st.Queues[0].Counts.Ready != 1 || st.Engine == nil || st.Engine.Tasks != 1 {
		t.Fatalf("stats: %s", onDir[14])
	}
}

// TestEnqueueRefusalChangesNothing: a payload that is not JSON is refused
// by the engine with its reason, and nothing is enqueued.
func TestEnqueueRefusalChangesNothing(t *testing.T) {
	dir := dataDir(t)
	code, out, errs := docket(t, "enqueue", "-dir", dir, "{not json")
	if code != 1 || out != "" || !strings.Contains(errs, "invalid") || !strings.Contains(errs, "JSON") || strings.Count(errs, "docket:") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	db, err := engine.OpenReadOnly(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := db.Stats().Tasks; n != 3 {
		t.Fatalf("%d tasks after a refused enqueue, want 3", n)
	}
}

// TestTaskActionsReportEachTask: cancel and run-now act on every id given,
// say what happened to each, and exit 1 if any failed.
func TestTaskActionsReportEachTask(t *testing.T) {
	db := openMem(t, engine.Options{})
	q := db.Queue(demoNS, demoQueue)
	var ids []uint64
	for _, d := range []time.Duration{time.Hour, time.Hour, 0} {
		r, err := q.Enqueue(ctx, engine.Task{Delay: d})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	code, out, errs, _ := remote(t, db, "", "run-now", "-server", "s", "1,2", "99")
	if code != 1 || out != "task 1 is due now\ntask 2 is due now\n" || strings.Count(errs, "docket: task 99:") != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("run-now: exit %d\n%s\n%s", code, out, errs)
	}
	if n, _ := q.Counts(ctx); n.Ready != 3 || n.Scheduled != 0 {
		t.Fatalf("after run-now: %+v", n)
	}
	code, out, errs, _ = remote(t, db, "", "cancel", "-server", "s", "-json", "3", "77", "1")
	res := decode[outcome](t, out)
	if code != 1 || len(res.Done) != 2 || res.Done[0] != 3 || res.Done[1] != 1 || len(res.Failed) != 1 || res.Failed[0].ID != 77 || errs != "" {
		t.Fatalf("cancel: exit %d\n%s\n%s", code, out, errs)
	}
	if n, _ := q.Counts(ctx); n.Ready != 1 {
		t.Fatalf("after cancel: %+v", n)
	}
	code, _, errs, _ = remote(t, db, "", "get", "-server", "s", "1")
	if code != 1 || !strings.Contains(errs, "task 1:") || !strings.Contains(errs, "not found") || strings.Count(errs, "docket:") != 1 {
		t.Fatalf("get of a cancelled task: exit %d, %q", code, errs)
	}
	code, out, _, _ = remote(t, db, "", "get", "-server", "s", "2")
	for _, want := range []string{"task 2 in demo/local emails: ready", "attempts", "0 of 5", "backoff"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("get 2 does not show %q:\n%s", want, out)
		}
	}
}

// TestDeadLetterCommands: listing with paging, grouping by error, redrive
// of selected tasks and of all.
func TestDeadLetterCommands(t *testing.T) {
	db := openMem(t, engine.Options{})
	q := db.Queue(demoNS, demoQueue)
	for i := range 5 {
		if _, err := q.Enqueue(ctx, engine.Task{MaxAttempts: 1, Payload: []byte(`{"i":` + string(rune('0'+i)) + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := q.Claim(ctx, "w", time.Minute, 5)
	if err != nil || len(ls) != 5 {
		t.Fatal(err)
	}
	for i, l := range ls {
		msg := "smtp 451"
		if i == 4 {
			msg = "bad address\nline two"
		}
		if err := q.Fail(ctx, l, engine.Failure{Err: msg}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _, _ := remote(t, db, "", "dead", "-server", "s", "-limit", "2")
	if code != 0 || strings.Count(out, "smtp 451") != 2 || !strings.Contains(out, "more: -cursor ") {
		t.Fatalf("dead -limit 2: exit %d\n%s", code, out)
	}
	code, out, _, _ = remote(t, db, "", "dead", "-server", "s", "-by-error")
	if code != 0 || !regexp.MustCompile(`(?m)^4\s+smtp 451\s+1,2,3,4$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^1\s+bad address\\nline two\s+5$`).MatchString(out) {
		t.Fatalf("dead -by-error:\n%s", out)
	}
	code, out, _, _ = remote(t, db, "", "dead", "-server", "s", "-by-error", "-json", "-scan", "3")
	groups := decode[struct {
		Groups []errorGroup
		Read   int
		More   bool
	}](t, out)
	if code != 0 || groups.Read != 3 || !groups.More || len(groups.Groups) != 1 || groups.Groups[0].Count != 3 {
		t.Fatalf("dead -by-error -scan 3: %s", out)
	}
	code, out, errs, _ := remote(t, db, "", "dead", "-server", "s", "-redrive", "2,5")
	if code != 0 || out != "task 2 redriven\ntask 5 redriven\n" {
		t.Fatalf("dead -redrive 2,5: exit %d\n%s%s", code, out, errs)
	}
	code, out, _, _ = remote(t, db, "", "dead", "-server", "s", "-redrive-all", "-json")
	if code != 0 || decode[map[string]int](t, out)["redriven"] != 3 {
		t.Fatalf("dead -redrive-all: %s", out)
	}
	if n, _ := q.Counts(ctx); n.Ready != 5 || n.Dead != 0 {
		t.Fatalf("after redrives: %+v", n)
	}
	code, _, errs, _ = remote(t, db, "", "dead", "-server", "s", "-redrive", "2")
	if code != 1 || !strings.Contains(errs, "task 2:") {
		t.Fatalf("redrive of a task that is not dead: exit %d, %q", code, errs)
	}
}

// TestCancelCompletedAll deletes every retained completion of a queue, a
// page at a time, and nothing else.
func TestCancelCompletedAll(t *testing.T) {
	db := openMem(t, engine.Options{RetainCompleted: time.Hour})
	q := db.Queue(demoNS, demoQueue)
	const n = 1203 // more than one page
	tasks := make([]engine.Task, n+1)
	if _, err := q.EnqueueBatch(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	ls, err := q.Claim(ctx, "w", time.Minute, n)
	if err != nil {
		t.Fatal(err)
	}
	if errs, err := q.CompleteBatch(ctx, ls); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	code, out, errs, _ := remote(t, db, "", "cancel", "-server", "s", "-completed-all")
	if code != 0 || out != "1203 completed tasks deleted\n" {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if c, _ := q.Counts(ctx); c.Completed != 0 || c.Ready != 1 {
		t.Fatalf("after: %+v", c)
	}
}

// TestKVCommands: conditional writes refuse with ErrConflict and change
// nothing; scan pages say where the next page starts.
func TestKVCommands(t *testing.T) {
	db := openMem(t, engine.Options{})
	kv := db.KV(demoNS)
	for _, k := range []string{"a/1", "a/2", "a/3", "b/1"} {
		if _, err := kv.Commit(ctx, engine.Set(k, []byte("v-"+k))); err != nil {
			t.Fatal(err)
		}
	}
	e, _ := kv.Get(ctx, "a/1")
	code, out, _, _ := remote(t, db, "", "kv", "get", "-server", "s", "a/1")
	if code != 0 || out != "v-a/1\n" {
		t.Fatalf("kv get: %d %q", code, out)
	}
	code, out, _, _ = remote(t, db, "", "kv", "scan", "-server", "s", "-prefix", "a/", "-limit", "2")
	if code != 0 || !strings.Contains(out, "a/2") || strings.Contains(out, "a/3\t") || !strings.HasSuffix(out, "more: -start a/3\n") {
		t.Fatalf("kv scan -limit 2:\n%s", out)
	}
	code, out, _, _ = remote(t, db, "", "kv", "scan", "-server", "s", "-start", "a/3", "-end", "b/2")
	if code != 0 || !strings.Contains(out, "a/3") || !strings.Contains(out, "b/1") || strings.Contains(out, "a/2") || strings.Contains(out, "more") {
		t.Fatalf("kv scan -start a/3 -end b/2:\n%s", out)
	}
	for _, args := range [][]string{
		{"kv", "set", "a/1", "x", "-if-absent"},
		{"kv", "set", "a/1", "x", "-if-version", "999999"},
		{"kv", "delete", "a/1", "-if-version", "999999"},
	} {
		code, _, errs, _ := remote(t, db, "", append(args, "-server", "s")...)
		if code != 1 || !strings.Contains(errs, "conflict") || !strings.Contains(errs, `key "a/1"`) {
			t.Fatalf("%v: exit %d, %q", args, code, errs)
		}
	}
	if now, _ := kv.Get(ctx, "a/1"); now.Version != e.Version {
		t.Fatal("a refused conditional write changed the key")
	}
	code, out, _, _ = remote(t, db, "", "kv", "set", "-server", "s", "-if-version", itoa(e.Version), "a/1", "new")
	if code != 0 || !strings.HasPrefix(out, `key "a/1" set (version `) {
		t.Fatalf("kv set -if-version: %d %q", code, out)
	}
	code, _, _, _ = remote(t, db, "", "kv", "delete", "-server", "s", "a/1")
	if _, err := kv.Get(ctx, "a/1"); code != 0 || err == nil {
		t.Fatalf("kv delete: exit %d, the key: %v", code, err)
	}
	code, _, errs, _ := remote(t, db, "", "kv", "get", "-server", "s", "a/1")
	if code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("kv get of a deleted key: %d %q", code, errs)
	}
	code, out, _, _ = remote(t, db, "", "kv", "-h")
	if code != 0 || !strings.Contains(out, "subcommands:") || !strings.Contains(out, "delete") {
		t.Fatalf("kv -h: %d\n%s", code, out)
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// TestFlagErrors: every mistake on the command line exits 2 with one
// "docket:" line (or the flag package's own message and the usage), and
// touches nothing.
func TestFlagErrors(t *testing.T) {
	dir := dataDir(t)
	before := tree(t, dir)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stats", "-server", "http://x", "-dir", dir}, "-dir and -server exclude each other"},
		{[]string{"stats", "-token", "t", "-dir", dir}, "-token is for -server"},
		{[]string{"stats", "-dir", dir, "extra"}, `unexpected argument "extra"`},
		{[]string{"inspect", "-dir", dir, "-ns", "nope"}, "want PROJECT/SCOPE"},
		{[]string{"inspect", "-dir", dir, "-state", "bogus"}, `unknown state "bogus"`},
		{[]string{"inspect", "-dir", dir, "-limit", "many"}, "invalid value"},
		{[]string{"get", "-dir", dir}, "missing argument"},
		{[]string{"get", "-dir", dir, "abc"}, `task id "abc"`},
		{[]string{"get", "-dir", dir, "1", "2"}, "too many arguments"},
		{[]string{"get", "-dir", dir, "1,2"}, "one task id"},
		{[]string{"cancel", "-dir", dir}, "give task ids (with or without -completed) or -completed-all"},
		{[]string{"cancel", "-dir", dir, "-completed-all", "5"}, "give task ids"},
		{[]string{"cancel", "-dir", dir, "-completed"}, "give task ids"},
		{[]string{"cancel", "-dir", dir, "-completed", "-completed-all"}, "give task ids"},
		{[]string{"cancel", "-dir", dir, "-completed", "-completed-all", "5"}, "give task ids"},
		{[]string{"cancel", "-dir", dir, "0"}, `task id "0"`},
		{[]string{"run-now", "-dir", dir}, "missing argument"},
		{[]string{"dead", "-dir", dir, "-redrive", "1", "-redrive-all"}, "exclude each other"},
		{[]string{"dead", "-dir", dir, "-redrive", "x"}, `task id "x"`},
		{[]string{"dead", "-dir", dir, "-redrive", ""}, `task id ""`},
		{[]string{"dead", "-dir", dir, "-redrive-error", "boom", "-delete-error", "boom"}, "exclude each other"},
		{[]string{"dead", "-dir", dir, "-by-error", "-redrive-error", "boom"}, "exclude each other"},
		{[]string{"dead", "-dir", dir, "-redrive-all", "-delete-error", "boom"}, "exclude each other"},
		{[]string{"dead", "-dir", dir, "-redrive-error", ""}, "-redrive-error needs the error text"},
		{[]string{"dead", "-dir", dir, "-delete-error", ""}, "-delete-error needs the error text"},
		{[]string{"dead", "-dir", dir, "-delete-error", "boom", "-scan", "0"}, "-scan"},
		{[]string{"dead", "-dir", dir, "-by-error", "-scan", "0"}, "-scan"},
		{[]string{"enqueue", "-dir", dir, "-at", "yesterday"}, "-at"},
		{[]string{"enqueue", "-dir", dir, "-at", "2030-01-01T00:00:00Z", "-delay", "1s"}, "-at and -delay"},
		{[]string{"enqueue", "-dir", dir, "-header", "novalue"}, "NAME=VALUE"},
		{[]string{"enqueue", "-dir", dir, "{}", "{}"}, "too many arguments"},
		{[]string{"enqueue", "-dir", dir, "-after", "1,x"}, `task id "x"`},
		{[]string{"enqueue", "-dir", dir, "-after", "1", "-on-failure", "shrug"}, "want cancel, wait or run"},
		{[]string{"kv", "-dir", dir}, "unknown subcommand"},
		{[]string{"kv"}, "want a subcommand"},
		{[]string{"kv", "get", "-dir", dir}, "missing argument"},
		{[]string{"kv", "set", "-dir", dir, "k"}, "missing argument"},
		{[]string{"kv", "set", "-dir", dir, "k", "v", "-if-version", "3", "-if-absent"}, "exclude each other"},
		{[]string{"kv", "scan", "-dir", dir, "-limit", "0"}, "-limit"},
		{[]string{"top", "-dir", dir, "-json"}, "stats -json"},
		{[]string{"top", "-dir", dir, "-every", "1ns"}, "-every"},
		{[]string{"token", "ops"}, "at least one grant"},
		{[]string{"token", "ops", "nonsense"}, "PROJECT/SCOPE:PERMS"},
		{[]string{"token", "bad id", "a/b:read"}, "caller id"},
	} {
		code, out, errs := docket(t, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tc.args, code, out, errs, tc.want)
		}
		if n := strings.Count(errs, "docket:"); n > 1 {
			t.Errorf("%v: %d docket: prefixes in %q", tc.args, n, errs)
		}
	}
	if tree(t, dir) != before {
		t.Fatal("a refused command line changed the directory")
	}
}

// TestHelpOfEveryCommand: each command's -h goes to stdout, exits 0, and
// names its flags.
func TestHelpOfEveryCommand(t *testing.T) {
	want := map[string][]string{
		"stats":      {"-dir", "-server", "-token", "-json"},
		"top":        {"-once", "-every", "-server"},
		"inspect":    {"-state", "-limit", "-cursor", "-ns", "-queue"},
		"get":        {"-json", "ID"},
		"dead":       {"-redrive", "-redrive-all", "-by-error", "-redrive-error TEXT", "-delete-error TEXT", "-scan", "exactly"},
		"enqueue":    {"-kind", "-delay", "-at", "-priority", "-max-attempts", "-key", "-header", "-unique", "-unique-states", "PAYLOAD | -"},
		"cancel":     {"-completed-all", "-completed", "ID..."},
		"run-now":    {"ID..."},
		"reschedule": {"-at TIME", "-priority N", "RFC 3339", "how long from now", "ID..."},
		"token":      {"CALLER GRANT", "docket token billing"},
		"pause":      {"-dir", "-server", "-queue", "docket resume"},
		"resume":     {"-queue", "-json"},
		"limits":     {"-max-in-flight", "-rate", "-per", "-burst", "-clear"},
	}
	for name, flags := range want {
		code, out, errs := docket(t, name, "-h")
		if code != 0 || errs != "" {
			t.Errorf("%s -h: exit %d, stderr %q", name, code, errs)
		}
		for _, f := range flags {
			if !strings.Contains(out, f) {
				t.Errorf("%s -h does not show %q:\n%s", name, f, out)
			}
		}
	}
	for _, sub := range []string{"get", "scan", "set", "delete"} {
		code, out, _ := docket(t, "kv", sub, "-h")
		if code != 0 || !strings.Contains(out, "usage: docket kv "+sub) || !strings.Contains(out, "-server") {
			t.Errorf("kv %s -h: exit %d\n%s", sub, code, out)
		}
	}
	code, out, _ := docket(t, "help")
	for _, c := range commands {
		if code != 0 || !strings.Contains(out, "  "+c.name+" ") {
			t.Errorf("help does not list %s:\n%s", c.name, out)
		}
	}
}

// TestWriteCommandsNeedADocketDirectory: a command that changes something
// refuses a directory that is not docket's (or is missing) instead of
// creating one.
func TestWriteCommandsNeedADocketDirectory(t *testing.T) {
	mod := t.TempDir()
	os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/x\n"), 0o644)
	before := tree(t, mod)
	missing := filepath.Join(mod, "none")
	for _, d := range []string{mod, missing} {
		for _, args := range [][]string{
			{"enqueue", "{}"},
			{"cancel", "1"},
			{"run-now", "1"},
			{"dead", "-redrive", "1"},
			{"dead", "-redrive-error", "boom"},
			{"dead", "-delete-error", "boom"},
			{"cancel", "-completed", "1"},
			{"kv", "set", "k", "v"},
			{"kv", "delete", "k"},
			{"pause"},
			{"resume"},
			{"limits", "-rate", "1", "-per", "1s"},
			{"bulk", "-action", "cancel", "-yes"},
			{"bulk", "-action", "retry"},
			{"search", "-count"},
		} {
			code, _, errs := docket(t, append(args, "-dir", d)...)
			if code != 1 || strings.Count(errs, "docket:") != 1 {
				t.Errorf("%v on %s: exit %d, %q", args, d, code, errs)
			}
		}
	}
	if tree(t, mod) != before {
		t.Fatal("a write command changed a directory that is not docket's")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatal("a write command created a data directory")
	}
}
