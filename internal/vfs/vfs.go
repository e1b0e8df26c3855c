// Package vfs is the file system under the log, the snapshots, the lock
// file and the stable store: the few operations they make, behind an
// interface, so that tests can run them on a strict memory file system that
// can crash (NewMem) or on one that fails chosen operations (errorfs).
// Default is the operating system's, a thin shell over package os.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// FS is what docket asks of a file system. Names are paths as package os
// takes them. Errors are *fs.PathError (or *os.LinkError for Rename)
// wrapping fs.ErrNotExist, fs.ErrExist and the like, as os reports them.
type FS interface {
	// OpenFile opens name with os flags (O_RDONLY, O_WRONLY, O_RDWR,
	// O_CREATE, O_EXCL, O_TRUNC, O_APPEND) and perm for a file it creates.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Open opens name for reading: a file, or a directory (to Sync it).
	Open(name string) (File, error)
	Remove(name string) error
	Rename(oldname, newname string) error
	Mkdir(name string, perm fs.FileMode) error
	MkdirAll(name string, perm fs.FileMode) error
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	// ReadDir lists a directory sorted by name, as os.ReadDir does.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Lock takes a non-blocking advisory lock on f, exclusive or shared,
	// held until f is closed; it reports flock.ErrHeld when another
	// holder excludes it.
	Lock(f File, exclusive bool) error
}

// File is an open file or directory of an FS.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Sync makes the file's data and metadata durable; on a directory,
	// its entries (creations, renames, removals).
	Sync() error
	// Datasync makes the file's data durable, and of its metadata only
	// what reading the data back needs (fdatasync where there is one).
	Datasync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Name() string
}

// Mapper is a File that can be mapped into memory, shared and writable:
// bytes copied into the mapping are in the file at once (in the operating
// system's page cache, as a write puts them), without a system call, and
// an fsync of the file makes them durable. Only the bytes the file holds
// may be touched: past its end the mapping faults. The operating system's
// files are Mappers on Linux; Unmap removes a mapping.
type Mapper interface {
	Map(length int) ([]byte, error)
}

// Default is the operating system's file system.
var Default FS = osFS{}

// Or returns fsys, or Default when fsys is nil: the zero value of an
// options struct means the operating system's.
func Or(fsys FS) FS {
	if fsys == nil {
		return Default
	}
	return fsys
}

// ReadFile reads the whole file name, as os.ReadFile does.
func ReadFile(fsys FS, name string) ([]byte, error) {
	if _, ok := fsys.(osFS); ok {
		return os.ReadFile(name)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int
	if st, err := f.Stat(); err == nil {
		size = int(st.Size())
	}
	data := make([]byte, 0, size+1)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}
