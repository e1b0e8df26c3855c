package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
)

// statsAPI is an API with the engine's counters, as a server's client is.
type statsAPI struct {
	engine.API
	st engine.Stats
}

func (statsAPI) Close() error { return nil }

func (s statsAPI) Stats(context.Context) (engine.Stats, error) { return s.st, nil }

// TestStatsShowsUnreadableValues: docket stats shows the reads of values
// the value log could not return, in text when there are any and always
// in JSON.
func TestStatsShowsUnreadableValues(t *testing.T) {
	db := openMem(t, engine.Options{})
	run := func(st engine.Stats, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		c := cli{stdout: &out, stderr: &errb, stdin: strings.NewReader(""),
			dial: func(context.Context, string, string) (engine.API, error) { return statsAPI{db, st}, nil }}
		if code := runCLI(ctx, c, append(args, "-server", "http://x")); code != 0 {
			t.Fatalf("%v: exit %d, %s", args, code, errb.String())
		}
		return out.String()
	}
	if out := run(engine.Stats{UnreadableValues: 3}, "stats"); !strings.Contains(out, "values that could not be read: 3") {
		t.Fatalf("stats with 3 unreadable values:\n%s", out)
	}
	if out := run(engine.Stats{}, "stats"); strings.Contains(out, "could not be read") {
		t.Fatalf("stats with none:\n%s", out)
	}
	got := decode[struct{ Engine statsJSON }](t, run(engine.Stats{UnreadableValues: 3}, "stats", "-json"))
	if got.Engine.Unreadable != 3 {
		t.Fatalf("stats -json: %+v", got.Engine)
	}
}
