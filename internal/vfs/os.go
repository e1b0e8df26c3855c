package vfs

import (
	"io/fs"
	"os"

	"github.com/docketdb/docket/internal/flock"
)

// osFS is package os.
type osFS struct{}

// osFile is an *os.File with Datasync.
type osFile struct{ *os.File }

func (f osFile) Datasync() error { return datasync(f.File) }

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) Mkdir(name string, perm fs.FileMode) error    { return os.Mkdir(name, perm) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }
func (osFS) Lstat(name string) (fs.FileInfo, error)       { return os.Lstat(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }

func (osFS) Lock(f File, exclusive bool) error {
	of, ok := f.(osFile)
	if !ok {
		return &fs.PathError{Op: "lock", Path: f.Name(), Err: fs.ErrInvalid}
	}
	if exclusive {
		return flock.Exclusive(of.File)
	}
	return flock.Shared(of.File)
}

// OSFile returns the *os.File under f, if f is a file of Default.
func OSFile(f File) (*os.File, bool) {
	of, ok := f.(osFile)
	return of.File, ok
}
