package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
)

var (
	ctx   = context.Background()
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// docket runs the command line in-process and returns its exit status and
// output.
func docket(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// dataDir makes a docket directory with tasks in demo/local/emails, one of
// them dead.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data dir") // a space: printed commands must quote it
	db, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	q := db.Queue(demoNS, demoQueue)
	for range 3 {
		if _, err := q.Enqueue(ctx, engine.Task{MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := q.Claim(ctx, "w", 60e9, 1)
	if err != nil || len(ls) != 1 {
		t.Fatal(err)
	}
	if err := q.Fail(ctx, ls[0], engine.Failure{Err: "boom"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tree lists every file under dir with its size and content, to show a
// command changed nothing.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			b.WriteString("error " + err.Error())
			return nil
		}
		b.WriteString(p + "\n")
		if !info.IsDir() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}

func TestHelpAndUsage(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, errs := docket(t, args...)
		if code != 0 || !strings.Contains(out, "usage: docket <command>") || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	code, out, errs := docket(t)
	if code != 2 || out != "" || !strings.Contains(errs, "usage:") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, _, errs = docket(t, "frobnicate")
	if code != 2 || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, errs)
	}
	code, out, errs = docket(t, "verify", "-h")
	if code != 0 || !strings.Contains(out, "usage: docket verify [-dir] DIR") || errs != "" {
		t.Errorf("verify -h: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, _ = docket(t, "repair", "--help")
	if code != 0 || !strings.Contains(out, "usage: docket repair [-salvage] [-dir] DIR") || !strings.Contains(out, "-salvage") {
		t.Errorf("repair --help: exit %d, stdout %q", code, out)
	}
	code, _, errs = docket(t, "stats", "-nosuchflag")
	if code != 2 || !strings.Contains(errs, "usage: docket stats") {
		t.Errorf("bad flag: exit %d, stderr %q", code, errs)
	}
	code, _, errs = docket(t, "verify")
	if code != 2 || !strings.Contains(errs, "DIR") {
		t.Errorf("verify without DIR: exit %d, stderr %q", code, errs)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := docket(t, "version")
	if code != 0 || !regexp.MustCompile(`^docket \S+.* go1\.\d+`).MatchString(out) {
		t.Fatalf("version: exit %d, %q", code, out)
	}
}

// TestErrorsHaveOnePrefix: an engine error (whose text starts with
// "docket: ") is printed with the prefix once.
func TestErrorsHaveOnePrefix(t *testing.T) {
	dir := dataDir(t)
	db, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	code, _, errs := docket(t, "stats", "-dir", dir)
	if code != 1 || strings.Count(errs, "docket:") != 1 || !strings.Contains(errs, "locked") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// TestReadOnlyCommandsChangeNothing: stats, inspect, dead (listing) and
// verify leave a docket directory byte for byte as it was, and refuse a
// directory that is not one without creating anything in it.
func TestReadOnlyCommandsChangeNothing(t *testing.T) {
	dir := dataDir(t)
	before := tree(t, dir)
	for _, args := range [][]string{
		{"stats", "-dir", dir},
		{"stats", "-dir", dir, "-json"},
		{"inspect", "-dir", dir, "-state", "ready"},
		{"get", "-dir", dir, "1"},
		{"dead", "-dir", dir},
		{"dead", "-dir", dir, "-by-error"},
		{"kv", "scan", "-dir", dir},
		{"top", "-dir", dir, "-once"},
		{"verify", dir},
	} {
		code, out, errs := docket(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
		}
		if after := tree(t, dir); after != before {
			t.Fatalf("%v changed the directory", args)
		}
		switch args[0] {
		case "stats":
			if !strings.Contains(out, "3 tasks held") && !strings.Contains(out, `"tasks": 3`) {
				t.Fatalf("stats: %s", out)
			}
			if !strings.Contains(out, "memory: ") && !strings.Contains(out, `"memory_bytes": `) {
				t.Fatalf("stats shows no memory in use: %s", out)
			}
		case "dead":
			if !strings.Contains(out, "boom") {
				t.Fatalf("dead: %s", out)
			}
		case "verify":
			if !strings.Contains(out, "OK") {
				t.Fatalf("verify: %s", out)
			}
		case "top":
			if !regexp.MustCompile(`(?m)^\s*demo/local\s+emails\s+2\s+0\s+0\s+1\s+0\s+-\s+-\s+-\s+\S+$`).MatchString(out) {
				t.Fatalf("top -once:\n%s", out)
			}
		}
	}

	mod := t.TempDir()
	os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/x\n"), 0o644)
	before = tree(t, mod)
	for _, args := range [][]string{
		{"stats", "-dir", mod},
		{"inspect", "-dir", mod},
		{"get", "-dir", mod, "1"},
		{"kv", "get", "-dir", mod, "k"},
		{"top", "-dir", mod, "-once"},
		{"dead", "-dir", mod},
		{"dead", "-dir", mod, "-redrive-all"},
		{"verify", mod},
		{"repair", mod},
		{"repair", "-salvage", mod},
	} {
		code, _, errs := docket(t, args...)
		if code != 1 || !strings.Contains(errs, "not a docket data directory") || strings.Count(errs, "docket:") != 1 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
		}
		if tree(t, mod) != before {
			t.Fatalf("%v changed a directory that is not docket's", args)
		}
	}
	missing := filepath.Join(mod, "none")
	code, _, errs := docket(t, "verify", missing)
	if code != 1 || !strings.Contains(errs, "no such file") || strings.Contains(errs, "corrupt") {
		t.Fatalf("verify of a missing path: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatal("verify created the path")
	}
}

// TestVerifyAndSalvage: verify exits 1 on damage Open refuses and points at
// salvage; repair refuses it; repair -salvage reports the loss, after which
// verify says OK.
func TestVerifyAndSalvage(t *testing.T) {
	dir := dataDir(t)
	// Without the snapshot the whole log is needed, so damage in its first
	// record is real.
	snaps, _ := filepath.Glob(filepath.Join(dir, "snap", "*.snap"))
	for _, s := range snaps {
		os.Remove(s)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "0*"))
	var seg string
	for _, s := range segs {
		if !strings.Contains(filepath.Base(s), ".") {
			seg = s
		}
	}
	data, _ := os.ReadFile(seg)
	data[20] ^= 0x01 // inside the first record's data: records after it exist
	os.WriteFile(seg, data, 0o644)
	code, out, _ := docket(t, "verify", dir)
	if code != 1 || !strings.Contains(out, "DAMAGED") || !strings.Contains(out, "repair -salvage '"+dir+"'") {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	code, _, errs := docket(t, "repair", dir)
	if code != 1 || !strings.Contains(errs, "corrupt") || !strings.Contains(errs, "-salvage") {
		t.Fatalf("repair: exit %d, %q", code, errs)
	}
	code, out, errs = docket(t, "repair", "-salvage", dir)
	if code != 0 || !strings.Contains(out, "LOST: batches 1..5 (5 batches") || !strings.Contains(out, "kept aside") {
		t.Fatalf("salvage: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, _ = docket(t, "verify", dir); code != 0 {
		t.Fatalf("verify after salvage: exit %d\n%s", code, out)
	}
}

// TestVerifyAndSalvageValues: verify exits 1 when a value the state keeps
// in the value log does not read back, naming its task, file and offset;
// repair refuses; repair -salvage drops that task alone, after which verify
// says OK and every other payload reads back as it was.
func TestVerifyAndSalvageValues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data dir")
	db, err := engine.Open(dir, engine.Options{Logger: quiet, ValueThreshold: 64})
	if err != nil {
		t.Fatal(err)
	}
	q := db.Queue(demoNS, demoQueue)
	payload := func(i int) []byte { return []byte(fmt.Sprintf(`"%d-%s"`, i, strings.Repeat("v", 100))) }
	var ids []uint64
	for i := range 4 {
		enq, err := q.Enqueue(ctx, engine.Task{Payload: payload(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, enq.ID)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "vlog", "*.vlog"))
	if len(files) != 1 {
		t.Fatalf("value log files: %v", files)
	}
	data, _ := os.ReadFile(files[0])
	rec := 22 + len(payload(0)) // a header and the payload: the second record
	data[rec+30] ^= 0x04
	os.WriteFile(files[0], data, 0o644)

	code, out, _ := docket(t, "verify", dir)
	want := fmt.Sprintf("LOST the payload of task %d (%s/%s) in %s offset %d", ids[1], demoNS, demoQueue, filepath.Base(files[0]), rec)
	if code != 1 || !strings.Contains(out, "DAMAGED: 1 tasks") || !strings.Contains(out, want) || !strings.Contains(out, "repair -salvage") {
		t.Fatalf("verify: exit %d, want %q in\n%s", code, want, out)
	}
	code, _, errs := docket(t, "repair", dir)
	if code != 1 || !strings.Contains(errs, fmt.Sprintf("task %d", ids[1])) || !strings.Contains(errs, "-salvage") {
		t.Fatalf("repair: exit %d, %q", code, errs)
	}
	code, out, errs = docket(t, "repair", "-salvage", dir)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("DROPPED task %d", ids[1])) {
		t.Fatalf("salvage: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, _ = docket(t, "verify", dir); code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("verify after salvage: exit %d\n%s", code, out)
	}
	db, err = engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q = db.Queue(demoNS, demoQueue)
	for i, id := range ids {
		info, err := q.Get(ctx, id)
		if i == 1 {
			if !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("the dropped task: %v", err)
			}
			continue
		}
		if err != nil || string(info.Payload) != string(payload(i)) {
			t.Fatalf("task %d after salvage: %v %q", id, err, info.Payload)
		}
	}
}
