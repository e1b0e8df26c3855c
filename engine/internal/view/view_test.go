package view

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// TestParseCursor: a List cursor is "key:id"; the empty one starts at the
// highest priority; anything else is ErrInvalid.
func TestParseCursor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in  string
		key int64
		id  uint64
		ok  bool
	}{
		{"", math.MaxInt64, 0, true},
		{"5:12", 5, 12, true},
		{"-3:1", -3, 1, true},
		{"5", 0, 0, false},
		{"5:", 0, 0, false},
		{"x:1", 0, 0, false},
		{"1:-1", 0, 0, false},
	} {
		k, id, err := ParseCursor(c.in)
		if c.ok != (err == nil) || c.ok && (k != c.key || id != c.id) {
			t.Errorf("ParseCursor(%q) = %d, %d, %v", c.in, k, id, err)
		}
		if err != nil && !errors.Is(err, dockettype.ErrInvalid) {
			t.Errorf("ParseCursor(%q): %v is not ErrInvalid", c.in, err)
		}
	}
}

// TestSearchFrom: a page of Search starts after its cursor, within the
// filter's ids, upwards or (newest first) downwards.
func TestSearchFrom(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cursor string
		newest bool
		lo, hi uint64
		want   uint64
		ok     bool
	}{
		{"", false, 1, 100, 1, true},
		{"", true, 1, 100, 100, true},
		{"10", false, 1, 100, 11, true},
		{"10", true, 1, 100, 9, true},
		{"10", false, 20, 100, 20, true},
		{"50", true, 1, 30, 30, true},
		{"0", false, 1, 100, 0, false},
		{"18446744073709551615", false, 1, 100, 0, false},
		{"ten", false, 1, 100, 0, false},
	} {
		got, err := SearchFrom(c.cursor, c.newest, c.lo, c.hi)
		if c.ok != (err == nil) || c.ok && got != c.want {
			t.Errorf("SearchFrom(%q, %v, %d, %d) = %d, %v, want %d", c.cursor, c.newest, c.lo, c.hi, got, err, c.want)
		}
	}
}

// TestCount: each committed event counts in its counter, and the others
// in none.
func TestCount(t *testing.T) {
	t.Parallel()
	var s dockettype.Stats
	var evs []dockettype.TaskEvent
	for _, k := range []dockettype.EventKind{dockettype.EvEnqueued, dockettype.EvEnqueued, dockettype.EvClaimed,
		dockettype.EvCompleted, dockettype.EvRetried, dockettype.EvDead, dockettype.EvReclaimed, dockettype.EvLeaseLost,
		dockettype.EvDenied} {
		evs = append(evs, dockettype.TaskEvent{Kind: k})
	}
	Count(&s, evs)
	want := dockettype.Stats{Enqueued: 2, Claimed: 1, Completed: 1, Retried: 1, DeadLettered: 1, Reclaimed: 1, LeaseLost: 1}
	if s != want {
		t.Fatalf("counted %+v, want %+v", s, want)
	}
}

// TestTimeAndSettings: stored micros read back in UTC (zero for 0), and a
// queue's record as the settings a caller sees.
func TestTimeAndSettings(t *testing.T) {
	t.Parallel()
	if !TimeOf(0).IsZero() || TimeOf(1_500_000).Location() != time.UTC || !TimeOf(1_500_000).Equal(time.Unix(1, 500_000_000)) {
		t.Fatal("TimeOf")
	}
	got := Settings(index.QueueConf{Paused: true, MaxInFlight: 3, Rate: 10, Per: 2_000_000, Burst: 4, PartRate: 1, PartPer: 1000})
	want := dockettype.QueueSettings{Paused: true, Limits: dockettype.Limits{MaxInFlight: 3, Rate: 10, Per: 2 * time.Second, Burst: 4,
		PartitionRate: 1, PartitionPer: time.Millisecond}}
	if got != want {
		t.Fatalf("Settings = %+v, want %+v", got, want)
	}
}
