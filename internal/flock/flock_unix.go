//go:build unix

package flock

import (
	"errors"
	"os"
	"syscall"
)

// Exclusive takes an exclusive, non-blocking lock on f. It reports ErrHeld
// when another process (or another open file in this one) holds it.
// Once it has the lock it records this process's id in f (see Holder).
func Exclusive(f *os.File) error {
	if err := lock(f, syscall.LOCK_EX); err != nil {
		return err
	}
	recordHolder(f)
	return nil
}

// Shared takes a shared, non-blocking lock on f: readers may share it, an
// exclusive lock excludes them. It reports ErrHeld when an exclusive lock is
// held.
func Shared(f *os.File) error { return lock(f, syscall.LOCK_SH) }

// Unlock releases the lock f holds. Closing f releases it too, but only
// once no descriptor refers to f's open file any more: a child process
// forked meanwhile (by os/exec, until it runs its program) holds a copy
// of every descriptor, and with it the lock.
func Unlock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

func lock(f *os.File, how int) error {
	err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrHeld
	}
	return err
}

// alive reports whether a process pid exists (signal 0 checks without
// sending; EPERM is a process of another user).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
