package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// scripted is an API whose queue listing moves on by a script each time it
// is read: 2 s of its clock, 40 enqueues, 10 completions, 1 retry and 1
// dead letter per read; its third read fails.
type scripted struct {
	engine.API
	clock *engine.ManualClock
	reads int
}

func (s *scripted) Clock() engine.Clock { return s.clock }

func (s *scripted) Queues(context.Context) ([]engine.QueueInfo, error) {
	s.reads++
	s.clock.Advance(2 * time.Second)
	if s.reads == 3 {
		return nil, errors.New("docket: connection refused")
	}
	n := uint64(s.reads)
	return []engine.QueueInfo{
		{Namespace: demoNS, Name: demoQueue, Counts: engine.Counts{Ready: 5, InFlight: 2, Dead: 1},
			OldestReady: s.clock.Now().Add(-90 * time.Second),
			Totals:      engine.Totals{Enqueued: 40 * n, Completed: 10 * n, Retried: n, DeadLettered: n}},
		{Namespace: engine.NS("acme", "prod"), Name: "idle", Counts: engine.Counts{Scheduled: 3}},
	}, nil
}

func (s *scripted) Close() error { return nil }

// frames cancels the command once it has written stopAt frames.
type frames struct {
	bytes.Buffer
	n, stopAt int
	cancel    func()
}

func (f *frames) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("docket top")) {
		if f.n++; f.n == f.stopAt {
			f.cancel()
		}
	}
	return f.Buffer.Write(p)
}

// TestTopLiveFrames: top redraws until interrupted; from the second frame
// on it shows rates from the difference of the queues' totals over the
// API's clock, the oldest ready task's age, and a failed read as a frame
// that says why, after which it carries on.
func TestTopLiveFrames(t *testing.T) {
	api := &scripted{clock: engine.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))}
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &frames{stopAt: 4, cancel: cancel}
	var errb bytes.Buffer
	c := cli{stdout: out, stderr: &errb, dial: func(context.Context, string, string) (engine.API, error) { return api, nil }}
	if code := runCLI(cctx, c, []string{"top", "-server", "http://h:7070", "-every", "10ms"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := strings.Split(strings.TrimSpace(out.String()), "docket top")[1:]
	if len(got) != 4 {
		t.Fatalf("%d frames:\n%s", len(got), out.String())
	}
	row := regexp.MustCompile(`(?m)^\s*demo/local\s+emails\s+5\s+0\s+2\s+1\s+0\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$`)
	first := row.FindStringSubmatch(got[0])
	if first == nil || first[1] != "-" || first[4] != "1m30s" {
		t.Fatalf("first frame: no rates yet, the oldest ready age:\n%s", got[0])
	}
	if !strings.Contains(got[0], "http://h:7070  03:04:07  2 queues: 5 ready, 3 scheduled, 2 in flight, 1 dead") {
		t.Fatalf("first frame's header:\n%s", got[0])
	}
	second := row.FindStringSubmatch(got[1])
	if second == nil || second[1] != "20" || second[2] != "5.0" || second[3] != "1.0" {
		t.Fatalf("second frame's rates (40, 10 and 2 over 2 s): %q\n%s", second, got[1])
	}
	if !regexp.MustCompile(`acme/prod\s+idle\s+0\s+3\s+0\s+0\s+0\s+0\s+0\s+0\s+-`).MatchString(got[1]) {
		t.Fatalf("an idle queue has rates of 0 and no oldest ready task:\n%s", got[1])
	}
	if !strings.Contains(got[2], "connection refused") || strings.Contains(got[2], "docket:") || strings.Contains(got[2], "emails") {
		t.Fatalf("a failed read's frame:\n%s", got[2])
	}
	// The failed read is not a sample: the next rates span both intervals.
	if fourth := row.FindStringSubmatch(got[3]); fourth == nil || fourth[1] != "20" {
		t.Fatalf("fourth frame (80 enqueues over 4 s): %q\n%s", fourth, got[3])
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Fatal("escape sequences written to something that is not a terminal")
	}
}

func TestTopFormats(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{-time.Second, "0s"}, {850 * time.Millisecond, "850ms"}, {12 * time.Second, "12s"}, {250 * time.Second, "4m10s"},
		{3*time.Hour + 5*time.Minute, "3h5m"}, {52 * time.Hour, "2d4h"}} {
		if got := age(tc.d); got != tc.want {
			t.Errorf("age(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := rate(10, 5, 1); got != "-" {
		t.Errorf("a counter that went back (a restart) has no rate: %q", got)
	}
	if got := rate(0, 1234, 2); got != "617" {
		t.Errorf("rate = %q", got)
	}
	var b bytes.Buffer
	renderTop(&b, "d", nil, &topSample{at: time.Now()}, nil)
	if !strings.Contains(b.String(), "no queue holds a task") {
		t.Errorf("an empty frame:\n%s", b.String())
	}
}
