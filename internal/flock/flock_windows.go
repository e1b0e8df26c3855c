//go:build windows

package flock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// Exclusive takes an exclusive, non-blocking lock on the first byte of f,
// then records this process's id after that byte (see Holder).
func Exclusive(f *os.File) error {
	if err := lock(f, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY); err != nil {
		return err
	}
	recordHolder(f)
	return nil
}

// Shared takes a shared, non-blocking lock on the first byte of f.
func Shared(f *os.File) error { return lock(f, windows.LOCKFILE_FAIL_IMMEDIATELY) }

// Unlock releases the lock f holds on its first byte.
func Unlock(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, new(windows.Overlapped))
}

func lock(f *os.File, flags uint32) error {
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return ErrHeld
	}
	return err
}

// alive reports whether a process pid exists.
func alive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return errors.Is(err, windows.ERROR_ACCESS_DENIED)
	}
	var code uint32
	err = windows.GetExitCodeProcess(h, &code)
	windows.CloseHandle(h)
	return err == nil && code == 259 // STILL_ACTIVE
}
