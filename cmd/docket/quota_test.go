package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// quotaDir makes a data directory with one task in demo/local.
func quotaDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	db, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Queue(demoNS, demoQueue).Enqueue(ctx, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// docket quota shows and sets a namespace's quota the same on a directory
// and on a live server; an enqueue past it fails naming the namespace,
// another namespace takes one, and bad flags change nothing.
func TestQuotaCommand(t *testing.T) {
	dir := quotaDir(t)
	srv := serveInProcess(t, "-dir", quotaDir(t))
	script := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"quota"}, 0, []string{"demo/local", "1 (no quota)"}},
		{[]string{"quota", "-tasks", "2", "-bytes", "1MiB"}, 0, []string{"quota of demo/local set", "1 of 2 (50%)", "of 1.0 MiB"}},
		{[]string{"quota", "-json"}, 0, []string{`"max_tasks": 2`, `"max_bytes": 1048576`, `"tasks": 1`, `"project": "demo"`}},
		{[]string{"enqueue", "{}"}, 0, nil},
		{[]string{"enqueue", "{}"}, 1, []string{"namespace demo/local holds 2 tasks of its quota of 2"}},
		{[]string{"enqueue", "-ns", "demo/other", "{}"}, 0, nil},
		{[]string{"quota", "-tasks", "-1"}, 2, []string{"-tasks wants a count"}},
		{[]string{"quota", "-bytes", "lots"}, 2, []string{"-bytes: want a size"}},
		{[]string{"quota", "-ns", "nope"}, 2, []string{"nope"}},
		{[]string{"quota", "-bytes", "off"}, 0, []string{"2 of 2 (100%)", "(no quota)"}},
		{[]string{"quota", "-tasks", "0"}, 0, []string{"2 (no quota)"}},
		{[]string{"enqueue", "{}"}, 0, nil},
	}
	for _, step := range script {
		var outs [2]string
		for i, at := range [][]string{{"-dir", dir}, {"-server", srv.base}} {
			code, out, errs := docket(t, append(step.args, at...)...)
			if code != step.code {
				t.Fatalf("%q %s: exit %d, want %d\n%s%s", step.args, at[0], code, step.code, out, errs)
			}
			for _, w := range step.want {
				if !strings.Contains(out+errs, w) {
					t.Fatalf("%q %s: want %q in\n%s%s", step.args, at[0], w, out, errs)
				}
			}
			outs[i] = out
		}
		if step.args[0] == "quota" && outs[0] != outs[1] {
			t.Errorf("%q differs:\n-dir:    %s\n-server: %s", step.args, outs[0], outs[1])
		}
	}
}

// A reader reads the quota but may not set it.
func TestQuotaNeedsAdmin(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	readTok, readLine, _ := server.NewToken("reader", "demo/local:read")
	if err := os.WriteFile(tokens, []byte(readLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := serveInProcess(t, "-dir", quotaDir(t), "-tokens", tokens)
	if code, out, errs := docket(t, "quota", "-server", srv.base, "-token", readTok); code != 0 || !strings.Contains(out, "1 (no quota)") {
		t.Fatalf("a reader's quota: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := docket(t, "quota", "-tasks", "5", "-server", srv.base, "-token", readTok)
	if code != 1 || !strings.Contains(errs, "permission denied") || !strings.Contains(errs, "admin") {
		t.Fatalf("a reader's quota change: exit %d\n%s%s", code, out, errs)
	}
}
