package engine

import (
	"testing"
	"time"
)

// TestManualTimers: a timer fires once the clock reaches it, at the
// clock's time; Stop reports whether it stopped a pending timer; pending
// follows firing and stopping, and no fired or stopped timer stays listed.
func TestManualTimers(t *testing.T) {
	t.Parallel()
	c := NewManualClock(time.Unix(1000, 0))
	a := c.NewTimer(2 * time.Second).(*manualTimer)
	b := c.NewTimer(time.Second).(*manualTimer)
	d := c.NewTimer(3 * time.Second).(*manualTimer)
	now := c.NewTimer(0).(*manualTimer)
	if now.pending() || len(now.C()) != 1 {
		t.Fatal("a timer of 0 is not fired at once")
	}
	if !a.pending() || !b.pending() || !d.pending() {
		t.Fatal("new timers not pending")
	}
	c.Advance(time.Second)
	if b.pending() || len(b.C()) != 1 || !a.pending() || len(a.C()) != 0 {
		t.Fatal("after 1 s, b fired and a did not")
	}
	if b.Stop() {
		t.Fatal("Stop of a fired timer reported stopping it")
	}
	if !d.Stop() || d.pending() || d.Stop() {
		t.Fatal("Stop of a pending timer, then again")
	}
	c.Advance(5 * time.Second)
	if a.pending() || len(a.C()) != 1 || len(d.C()) != 0 {
		t.Fatal("after 6 s, a fired and the stopped d did not")
	}
	if got := <-a.C(); !got.Equal(time.Unix(1006, 0)) {
		t.Fatalf("a fired at %v", got)
	}
	c.mu.Lock()
	n := len(c.timers)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d timers left listed", n)
	}
}
