package worker

import (
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

func TestPeriodicTickArithmetic(t *testing.T) {
	now := time.Date(2030, 6, 15, 10, 7, 31, 500, time.UTC)
	cases := []struct {
		spec       string
		prev, next time.Time
	}{
		{"*/5 * * * *", time.Date(2030, 6, 15, 10, 5, 0, 0, time.UTC), time.Date(2030, 6, 15, 10, 10, 0, 0, time.UTC)},
		{"@hourly", time.Date(2030, 6, 15, 10, 0, 0, 0, time.UTC), time.Date(2030, 6, 15, 11, 0, 0, 0, time.UTC)},
		{"0 0 1 1 *", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"0 9 * * 1", time.Date(2030, 6, 10, 9, 0, 0, 0, time.UTC), time.Date(2030, 6, 17, 9, 0, 0, 0, time.UTC)},
		// "@every" ticks are aligned on the epoch, not on the start time.
		{"@every 1h", time.Date(2030, 6, 15, 10, 0, 0, 0, time.UTC), time.Date(2030, 6, 15, 11, 0, 0, 0, time.UTC)},
		{"@every 7m", time.Unix(now.Unix()-now.Unix()%420, 0).UTC(), time.Unix(now.Unix()-now.Unix()%420+420, 0).UTC()},
		// 10:07 UTC is 12:07 in Paris in June; the 12:00 Paris tick is 10:00 UTC.
		{"CRON_TZ=Europe/Paris 0 12 * * *", time.Date(2030, 6, 15, 10, 0, 0, 0, time.UTC), time.Date(2030, 6, 16, 10, 0, 0, 0, time.UTC)},
	}
	db, err := engine.OpenInMemory(engine.Options{Clock: engine.NewManualClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := New(db, Options{})
	for _, tc := range cases {
		if err := w.Periodic(engine.NS("p", "s"), "q", tc.spec, engine.Task{IdempotencyKey: tc.spec}); err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		p := w.periodics[len(w.periodics)-1]
		prev, ok := p.prev(now)
		if !ok || !prev.Equal(tc.prev) {
			t.Errorf("%s: prev %v %v, want %v", tc.spec, prev, ok, tc.prev)
		}
		if next := p.next(now); !next.Equal(tc.next) {
			t.Errorf("%s: next %v, want %v", tc.spec, next, tc.next)
		}
		if prev, _ := p.prev(tc.prev); !prev.Equal(tc.prev) {
			t.Errorf("%s: a tick is not its own prev: %v", tc.spec, prev)
		}
	}
	// A schedule that never fires.
	if err := w.Periodic(engine.NS("p", "s"), "q", "0 0 30 2 *", engine.Task{}); err != nil {
		t.Fatal(err)
	}
	p := w.periodics[len(w.periodics)-1]
	if prev, ok := p.prev(now); ok {
		t.Errorf("Feb 30 ticked at %v", prev)
	}
	if next := p.next(now); !next.IsZero() {
		t.Errorf("Feb 30 next %v", next)
	}
}
