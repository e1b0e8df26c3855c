package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/cluster/clustertest"
	"github.com/docketdb/docket/engine"
)

// nodeDir runs a one-node cluster, enqueues 5 tasks on acme/prod a (one of
// them claimed) and stops it, and returns the node's directory.
func nodeDir(t *testing.T) string {
	t.Helper()
	m := clustertest.NewMesh(t, clustertest.MeshOptions{Nodes: 1})
	l, err := m.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	q := l.API().Queue(engine.NS("acme", "prod"), "a")
	for range 5 {
		if _, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`{"x":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Claim(ctx, "w", time.Hour, 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(0); err != nil {
		t.Fatal(err)
	}
	return m.Nodes[0].Dir
}

// TestNodeDirectoryOffline: verify, stats and inspect read a cluster
// node's directory (which they refused as "not a docket data directory"),
// the changing commands refuse it and leave it as it was, and a flipped bit
// in its raft log makes verify exit 1 naming the file and offset.
func TestNodeDirectoryOffline(t *testing.T) {
	dir := nodeDir(t)
	before := tree(t, dir)
	for _, args := range [][]string{{"verify", "-dir", dir}, {"verify", dir}} {
		code, out, errs := docket(t, args...)
		if code != 0 || !strings.Contains(out, "OK: the node would start") || !strings.Contains(out, "5 tasks in 1 queues") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	code, out, errs := docket(t, "stats", "-dir", dir)
	if code != 0 || !regexp.MustCompile(`acme/prod\s+a\s+4\s+0\s+1\s`).MatchString(out) || !strings.Contains(out, "read offline: the state as of raft index") {
		t.Errorf("stats: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = docket(t, "inspect", "-dir", dir, "-ns", "acme/prod", "-queue", "a", "-json")
	if code != 0 || strings.Count(out, `"id"`) != 4 {
		t.Errorf("inspect: exit %d\n%s%s", code, out, errs)
	}
	for _, args := range [][]string{
		{"enqueue", "-dir", dir, "-ns", "acme/prod", "-queue", "a", `{}`},
		{"repair", "-dir", dir},
		{"repair", "-salvage", dir},
	} {
		code, _, errs := docket(t, args...)
		if code != 1 || !strings.Contains(errs, "cluster node's directory") {
			t.Errorf("%v: exit %d, %q: want a refusal", args, code, errs)
		}
	}
	if after := tree(t, dir); after != before {
		t.Errorf("the commands changed the node's directory:\n%s\n---\n%s", before, after)
	}

	segs, err := filepath.Glob(filepath.Join(dir, "raft", "log", "0*"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments %v %v", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[40] ^= 1
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = docket(t, "verify", "-dir", dir)
	if code != 1 || !strings.Contains(out, "DAMAGED") || !strings.Contains(out, filepath.Base(segs[0])) || !strings.Contains(out, "at offset") {
		t.Errorf("verify of a flipped bit: exit %d\n%s", code, out)
	}
	if code, _, errs := docket(t, "stats", "-dir", dir); code != 1 || !strings.Contains(errs, "corrupt") {
		t.Errorf("stats of a damaged node directory: exit %d, %q", code, errs)
	}
}

// TestVerifyRepairDirFlag: verify and repair take -dir as every other
// command does, and the argument as before; both at once, or neither, is a
// usage error.
func TestVerifyRepairDirFlag(t *testing.T) {
	dir := dataDir(t)
	for _, args := range [][]string{{"verify", "-dir", dir}, {"verify", dir}, {"repair", "-dir", dir}, {"repair", dir}, {"repair", "-salvage", "-dir", dir}} {
		if code, out, errs := docket(t, args...); code != 0 {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	for _, args := range [][]string{{"verify"}, {"verify", "-dir", dir, dir}, {"repair", dir, dir}, {"repair"}} {
		if code, _, errs := docket(t, args...); code != 2 || !strings.Contains(errs, "usage") {
			t.Errorf("%v: exit %d, %q: want a usage error", args, code, errs)
		}
	}
}

// TestLockedDirectorySaysWho: a command refused a directory another process
// has open names that process and the ways around it.
func TestLockedDirectorySaysWho(t *testing.T) {
	dir := dataDir(t)
	db, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, args := range [][]string{{"stats", "-dir", dir}, {"enqueue", "-dir", dir, "{}"}, {"repair", dir}} {
		code, _, errs := docket(t, args...)
		if code != 1 || !strings.Contains(errs, "directory locked") || !strings.Contains(errs, fmt.Sprintf("process %d has it open", os.Getpid())) ||
			!strings.Contains(errs, "-server URL") || !strings.Contains(errs, "server.New(db, server.Options{}).Mux()") {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}
