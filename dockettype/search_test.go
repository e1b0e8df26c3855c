package dockettype

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFilterValidate: a filter that cannot select anything, or names what
// does not exist, is ErrInvalid; every other one is accepted.
func TestFilterValidate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range []Filter{
		{},
		{States: []State{Ready, Waiting}, Retrying: NotRetrying, Kind: "k", HeaderKey: "h", HeaderValue: "v"},
		{MinID: 5, MaxID: 5},
		{MinID: 5},
		{EnqueuedSince: now, EnqueuedBefore: now.Add(time.Microsecond)},
	} {
		if err := f.Validate(); err != nil {
			t.Errorf("%+v: %v", f, err)
		}
	}
	for _, f := range []Filter{
		{States: []State{0}},
		{States: []State{Waiting + 1}},
		{Retrying: NotRetrying + 1},
		{Kind: strings.Repeat("k", MaxNameBytes+1)},
		{Error: strings.Repeat("e", MaxFilterBytes+1)},
		{HeaderKey: "\xff"},
		{HeaderValue: "v"},
		{MinID: 6, MaxID: 5},
		{EnqueuedSince: now, EnqueuedBefore: now},
	} {
		if err := f.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", f, err)
		}
	}
}

func TestParseNames(t *testing.T) {
	for s, want := range map[string]BulkAction{"retry": BulkRetry, "run_now": BulkRunNow, "RUN-NOW": BulkRunNow, "delete": BulkDelete} {
		if a, err := ParseBulkAction(s); err != nil || a != want {
			t.Errorf("ParseBulkAction(%q) = %v, %v; want %v", s, a, err, want)
		}
	}
	if _, err := ParseBulkAction("purge"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseBulkAction(purge): %v, want ErrInvalid", err)
	}
	for _, p := range []DependencyPolicy{CancelOnFailure, WaitOnFailure, RunOnFailure} {
		if back, err := ParsePolicy(p.String()); err != nil || back != p {
			t.Errorf("ParsePolicy(%s) = %v, %v", p, back, err)
		}
	}
	if _, err := ParsePolicy("ignore"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParsePolicy(ignore): %v, want ErrInvalid", err)
	}
	if State(0).String() != "invalid" || InFlight.String() != "in-flight" {
		t.Errorf("state names: %s %s", State(0), InFlight)
	}
}
