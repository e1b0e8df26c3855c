//go:build unix

package flock

import (
	"errors"
	"os"
	"syscall"
)

// Exclusive takes an exclusive, non-blocking lock on f. It reports ErrHeld
// when another process (or another open file in this one) holds it.
func Exclusive(f *os.File) error { return lock(f, syscall.LOCK_EX) }

// Shared takes a shared, non-blocking lock on f: readers may share it, an
// exclusive lock excludes them. It reports ErrHeld when an exclusive lock is
// held.
func Shared(f *os.File) error { return lock(f, syscall.LOCK_SH) }

func lock(f *os.File, how int) error {
	err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrHeld
	}
	return err
}
