// Package flock takes the advisory, non-blocking file locks that keep two
// processes from opening one directory: flock(2) on Unix, LockFileEx on
// Windows. Where neither exists (js, wasip1, plan9) locking succeeds and
// detects nothing.
package flock

import "errors"

// ErrHeld is what Exclusive and Shared report when another holder has the
// lock.
var ErrHeld = errors.New("lock held")
