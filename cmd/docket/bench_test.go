package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestBenchFlagRefusals: flags that cannot go together, or a count out of
// range, are usage errors (exit 2) before anything runs.
func TestBenchFlagRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rounds", "0"}, "-rounds must be at least 1"},
		{[]string{"-targets", "-remote"}, "-targets runs in process"},
		{[]string{"-targets", "-server", "http://127.0.0.1:1"}, "-targets runs in process"},
		{[]string{"-max-memory", "lots"}, `want a size in bytes such as 268435456, 256MiB or 4GiB, or off; got "lots"`},
		{[]string{"-value-threshold", "1k"}, `invalid value "1k" for flag -value-threshold`},
	} {
		code, out, errs := docket(t, append([]string{"bench", "-fsync", "0", "-durability", "memory"}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("bench %v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errs, tc.want)
		}
	}
}

// TestBenchRunsBothWays: one invocation runs the pipelined enqueues and
// the wake-ups with parked claimers in process, and, with -remote, W7
// through the client too (W1P stays in process), reporting the remote
// targets.
func TestBenchRunsBothWays(t *testing.T) {
	code, out, errs := docket(t, "bench", "-fsync", "0", "-durability", "memory", "-workload", "W1P,W7", "-n", "40",
		"-parked", "2", "-inflight", "8", "-remote", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		Results []struct {
			System, Workload string
			Tasks            int64
			Parked           int
		}
		Targets []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	var runs []string
	for _, r := range got.Results {
		if r.Tasks != 40 || r.Workload == "W7" && r.Parked != 2 {
			t.Errorf("%s %s: %d tasks, %d parked", r.System, r.Workload, r.Tasks, r.Parked)
		}
		runs = append(runs, r.System+" "+r.Workload)
	}
	if s := strings.Join(runs, ", "); s != "docket W1P, docket W7, remote W7" {
		t.Fatalf("runs %s", s)
	}
	if len(got.Targets) == 0 {
		t.Fatal("no remote targets reported")
	}
}

// TestBenchRemoteFloor: -remote at SyncAlways measures what a bare
// net/http call adds to an fsync and sets it beside durable W2's rounds,
// in the text and in the JSON.
func TestBenchRemoteFloor(t *testing.T) {
	code, out, errs := docket(t, "bench", "-fsync", "20ms", "-durability", "always", "-workload", "W2", "-n", "64", "-remote")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"the floor of a durable call over HTTP/1.1", "bare net/http call that fsyncs", "W2 always, a producer's round", "W2 always at 80%: a round may add"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	code, out, errs = docket(t, "bench", "-fsync", "20ms", "-durability", "always", "-workload", "W1", "-n", "8", "-remote", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		Floor *struct {
			Calls int
			Added time.Duration `json:"added_ns"`
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if got.Floor == nil || got.Floor.Calls < 1 {
		t.Fatalf("no floor in the JSON: %s", out)
	}
	// Without SyncAlways there is no durable call to set it beside.
	code, out, errs = docket(t, "bench", "-fsync", "20ms", "-durability", "never", "-workload", "W1", "-n", "8", "-remote", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	got.Floor = nil
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if got.Floor != nil {
		t.Fatalf("a floor measured at SyncNever: %s", out)
	}
}
