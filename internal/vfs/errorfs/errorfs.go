// Package errorfs wraps a vfs.FS to fail chosen operations: the Nth write,
// the first sync of a file under some directory, every rename. A test
// passes an Injector, asked before each operation; the error it returns is
// returned instead of doing the operation. An Injector may also block, to
// park the caller at that moment.
package errorfs

import (
	"errors"
	"io/fs"
	"os"
	"sync"

	"github.com/docketdb/docket/internal/vfs"
)

// ErrInjected is the error the injectors of this package return.
var ErrInjected = errors.New("injected I/O error")

// OpKind is a kind of operation.
type OpKind int

const (
	OpOpen     OpKind = iota // OpenFile or Open of an existing file
	OpCreate                 // OpenFile with O_CREATE
	OpRead                   // Read, ReadAt
	OpWrite                  // Write, WriteAt
	OpSync                   // Sync, Datasync of a file
	OpDirSync                // Sync of a directory
	OpTruncate               // Truncate
	OpClose                  // Close
	OpRename                 // Rename
	OpRemove                 // Remove
	OpMkdir                  // Mkdir, MkdirAll
	OpStat                   // Stat, Lstat, ReadDir, File.Stat
	OpLock                   // Lock
	numKinds
)

var kindNames = [numKinds]string{"open", "create", "read", "write", "sync", "dirsync", "truncate", "close", "rename", "remove", "mkdir", "stat", "lock"}

func (k OpKind) String() string {
	if k < 0 || k >= numKinds {
		return "unknown"
	}
	return kindNames[k]
}

// Op is an operation about to run: its kind and the path it acts on (for
// a rename, the old name, with the new one in To).
type Op struct {
	Kind OpKind
	Path string
	To   string
}

// Injector decides, before each operation, whether it fails.
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc is an Injector as a function.
type InjectorFunc func(op Op) error

func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// OnIndex fails the nth operation (counting from 1) that match accepts,
// once, with ErrInjected; Count reports how many matched so far. A run
// with an OnIndex that never fires counts the points a sweep can fail.
type OnIndex struct {
	match func(Op) bool
	n     int
	mu    sync.Mutex
	seen  int
	hit   *Op
}

// NewOnIndex returns an OnIndex failing the nth match; n 0 fails nothing.
func NewOnIndex(n int, match func(Op) bool) *OnIndex {
	return &OnIndex{match: match, n: n}
}

func (o *OnIndex) MaybeError(op Op) error {
	if !o.match(op) {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen++
	if o.seen == o.n {
		o.hit = &op
		return &fs.PathError{Op: "injected " + op.Kind.String(), Path: op.Path, Err: ErrInjected}
	}
	return nil
}

// Count is how many operations matched so far.
func (o *OnIndex) Count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen
}

// Hit returns the operation that was failed, if one was.
func (o *OnIndex) Hit() (Op, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hit == nil {
		return Op{}, false
	}
	return *o.hit, true
}

// Kinds returns a match for the operations of the given kinds.
func Kinds(kinds ...OpKind) func(Op) bool {
	var set [numKinds]bool
	for _, k := range kinds {
		set[k] = true
	}
	return func(op Op) bool { return set[op.Kind] }
}

// Wrap returns fsys with inj asked before each operation.
func Wrap(fsys vfs.FS, inj Injector) vfs.FS { return &FS{fs: fsys, inj: inj} }

// FS is a vfs.FS whose operations an Injector may fail.
type FS struct {
	fs  vfs.FS
	inj Injector
}

func (e *FS) maybe(kind OpKind, path string) error {
	return e.inj.MaybeError(Op{Kind: kind, Path: path})
}

func (e *FS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	kind := OpOpen
	if flag&os.O_CREATE != 0 {
		kind = OpCreate
	}
	if err := e.maybe(kind, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return e.wrap(f), nil
}

func (e *FS) Open(name string) (vfs.File, error) {
	if err := e.maybe(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return e.wrap(f), nil
}

func (e *FS) wrap(f vfs.File) vfs.File {
	dir := false
	if st, err := f.Stat(); err == nil {
		dir = st.IsDir()
	}
	return &file{File: f, e: e, dir: dir}
}

func (e *FS) Remove(name string) error {
	if err := e.maybe(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *FS) Rename(oldname, newname string) error {
	if err := e.inj.MaybeError(Op{Kind: OpRename, Path: oldname, To: newname}); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e *FS) Mkdir(name string, perm fs.FileMode) error {
	if err := e.maybe(OpMkdir, name); err != nil {
		return err
	}
	return e.fs.Mkdir(name, perm)
}

func (e *FS) MkdirAll(name string, perm fs.FileMode) error {
	if err := e.maybe(OpMkdir, name); err != nil {
		return err
	}
	return e.fs.MkdirAll(name, perm)
}

func (e *FS) Stat(name string) (fs.FileInfo, error) {
	if err := e.maybe(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

func (e *FS) Lstat(name string) (fs.FileInfo, error) {
	if err := e.maybe(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Lstat(name)
}

func (e *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := e.maybe(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.ReadDir(name)
}

func (e *FS) Lock(f vfs.File, exclusive bool) error {
	if err := e.maybe(OpLock, f.Name()); err != nil {
		return err
	}
	if w, ok := f.(*file); ok {
		f = w.File
	}
	return e.fs.Lock(f, exclusive)
}

// file is a vfs.File of an FS.
type file struct {
	vfs.File
	e   *FS
	dir bool
}

func (f *file) Read(p []byte) (int, error) {
	if err := f.e.maybe(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.e.maybe(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	if err := f.e.maybe(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if err := f.e.maybe(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *file) Sync() error {
	kind := OpSync
	if f.dir {
		kind = OpDirSync
	}
	if err := f.e.maybe(kind, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *file) Datasync() error {
	if err := f.e.maybe(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Datasync()
}

func (f *file) Truncate(size int64) error {
	if err := f.e.maybe(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *file) Stat() (fs.FileInfo, error) {
	if err := f.e.maybe(OpStat, f.Name()); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

func (f *file) Close() error {
	if err := f.e.maybe(OpClose, f.Name()); err != nil {
		f.File.Close() // a failed close still releases the file
		return err
	}
	return f.File.Close()
}
