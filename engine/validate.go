package engine

import (
	"fmt"
	"time"

	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// The index keeps the attempt history: its bound is this one (a
// difference in either direction overflows the unsigned constant).
const _ = uint(MaxAttemptErrors-index.MaxAttemptErrors) + uint(index.MaxAttemptErrors-MaxAttemptErrors)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// The argument checks are package validate's.

func checkNS(ns Namespace) error                      { return validate.NS(ns) }
func checkJSON(field string, b []byte, max int) error { return validate.JSON(field, b, max) }
func checkDuration(field string, d time.Duration, allowZero bool) error {
	return validate.Duration(field, d, allowZero)
}

// checkTask validates t and makes its spec, with a copy of its payload
// unless borrow is set (see core.borrows).
func checkTask(t *Task, maxPayload int, borrow bool) (spec, error) {
	return validate.Task(t, maxPayload, borrow)
}

// checkOps validates ops of the user's key space and returns the
// permissions they need.
func checkOps(ops []Op, maxPayload int, out []vop) ([]vop, Perm, int, error) {
	return userSpace.Ops(ops, maxPayload, out)
}

// checkSiblings checks that every task a call enqueues (specs, then the
// Enqueue ops of ops) depends only on siblings that come before it.
func checkSiblings(specs []spec, ops []vop) error { return validate.Siblings(specs, ops) }

// The key spaces a handle reaches (see validate.KeySpace).
const (
	userSpace   = validate.UserSpace
	systemSpace = validate.SystemSpace
)

// clone copies b (nil for an empty b).
func clone(b []byte) []byte { return validate.Clone(b) }
