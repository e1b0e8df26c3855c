//go:build windows

package flock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// Exclusive takes an exclusive, non-blocking lock on the first byte of f.
func Exclusive(f *os.File) error {
	return lock(f, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY)
}

// Shared takes a shared, non-blocking lock on the first byte of f.
func Shared(f *os.File) error { return lock(f, windows.LOCKFILE_FAIL_IMMEDIATELY) }

func lock(f *os.File, flags uint32) error {
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return ErrHeld
	}
	return err
}
