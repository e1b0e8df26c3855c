package vfs

import (
	"errors"
	"io/fs"
	"os"
	"sync/atomic"

	"github.com/docketdb/docket/internal/flock"
)

// osFS is package os.
type osFS struct{}

// osFile is an *os.File with Datasync, which releases its lock, if it
// took one, before it closes.
type osFile struct {
	*os.File
	locked atomic.Bool
}

func (f *osFile) Datasync() error { return datasync(f.File) }

// Close releases the file's lock, then closes it. Closing alone would leave
// the lock held while a child process forked meanwhile (os/exec, anywhere in
// the process) still has a copy of the descriptor: an Open right after
// Close, here or in another process, would find the directory locked.
func (f *osFile) Close() error {
	var uerr error
	if f.locked.Swap(false) {
		uerr = flock.Unlock(f.File)
	}
	return errors.Join(f.File.Close(), uerr)
}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{File: f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return &osFile{File: f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) Mkdir(name string, perm fs.FileMode) error    { return os.Mkdir(name, perm) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }
func (osFS) Lstat(name string) (fs.FileInfo, error)       { return os.Lstat(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }

func (osFS) Lock(f File, exclusive bool) error {
	of, ok := f.(*osFile)
	if !ok {
		return &fs.PathError{Op: "lock", Path: f.Name(), Err: fs.ErrInvalid}
	}
	lock := flock.Shared
	if exclusive {
		lock = flock.Exclusive
	}
	if err := lock(of.File); err != nil {
		return err
	}
	of.locked.Store(true)
	return nil
}

// OSFile returns the *os.File under f, if f is a file of Default.
func OSFile(f File) (*os.File, bool) {
	of, ok := f.(*osFile)
	if !ok {
		return nil, false
	}
	return of.File, true
}
