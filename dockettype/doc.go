// Package dockettype holds the value types and sentinel errors of docket's
// engine: what a task is, a lease, what an enqueue returned, a task's
// view, queue limits, task events and permissions. It imports nothing of
// docket's, so that a package that only describes tasks (a client, a
// planner, a test) can name them without the engine. Package engine
// re-exports every name here; use either.
package dockettype

import "fmt"

// invalid returns an error wrapping ErrInvalid with the detail.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
