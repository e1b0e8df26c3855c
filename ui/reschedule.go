package ui

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/docketdb/docket/engine"
)

// parseReschedule reads a task page's reschedule form: in, how long from
// now the task becomes due (0 for now; empty keeps its time), and priority
// (empty keeps it). Neither is bad input, as is anything unreadable.
func parseReschedule(v url.Values, now time.Time) (engine.Reschedule, error) {
	var r engine.Reschedule
	in, prio := strings.TrimSpace(v.Get("in")), strings.TrimSpace(v.Get("priority"))
	if in == "" && prio == "" {
		return r, badInput("nothing to change: give a due time (in), a priority, or both")
	}
	if in != "" {
		d, err := time.ParseDuration(in)
		switch {
		case err != nil:
			return r, badInput("due in: %q is not a duration (say 0, 10m or 2h)", in)
		case d < 0 || d > engine.MaxDuration:
			return r, badInput("due in: %v is outside 0..%v", d, engine.MaxDuration)
		}
		r.At = now.Add(d)
	}
	if prio != "" {
		p, err := strconv.Atoi(prio)
		if err != nil {
			return r, badInput("priority: %q is not a whole number", prio)
		}
		r.Priority = &p
	}
	return r, nil
}
