package lograte

import (
	"testing"
	"time"
)

func TestSampler(t *testing.T) {
	var s Sampler
	t0 := time.Unix(1000, 0)
	if held, ok := s.Allow(t0, time.Second); !ok || held != 0 {
		t.Fatalf("first event: %d, %v", held, ok)
	}
	for i := range 5 {
		if _, ok := s.Allow(t0.Add(time.Duration(i)*100*time.Millisecond), time.Second); ok {
			t.Fatalf("event %d within the interval passed", i)
		}
	}
	if held, ok := s.Allow(t0.Add(time.Second), time.Second); !ok || held != 5 {
		t.Fatalf("the event an interval later: %d held, %v; want 5, true", held, ok)
	}
	if held, ok := s.Allow(t0.Add(3*time.Second), time.Second); !ok || held != 0 {
		t.Fatalf("a later event: %d held, %v", held, ok)
	}
}
