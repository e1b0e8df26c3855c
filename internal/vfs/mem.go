package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docketdb/docket/internal/flock"
)

// MemFS is a strict file system in memory: it keeps, beside what a file
// holds, what was durable at its last Sync, and beside a directory's
// entries, those durable at the directory's last Sync. CrashClone returns
// the file system a power loss would leave (every unsynced write lost,
// every creation, rename or removal not yet synced in its directory
// undone); Clone the one a killed process leaves (everything written is
// there). It is safe for concurrent use.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
}

// memNode is a file or a directory.
type memNode struct {
	dir  bool
	mode fs.FileMode
	mod  time.Time
	data []byte // a file's content
	// synced is the content at the last Sync, nil before the first one,
	// in an array of its own.
	synced []byte
	// dirty is the span of data's bytes written since the last Sync
	// (empty when lo >= hi): the bytes that may differ from synced below
	// the shorter's length. Sync copies only these, and what data holds
	// past synced, so that a Sync after an append (a log's commit, over
	// the zeros the log wrote ahead) costs the bytes written, not the
	// file.
	dirtyLo, dirtyHi int64
	// children are a directory's entries, durable those at its last Sync.
	children, durable map[string]*memNode
	// locks held on the file: -1 exclusive, n > 0 shared holders.
	locks int
}

// NewMem returns an empty MemFS whose root directory is durable.
func NewMem() *MemFS {
	root := newDir(0o755)
	return &MemFS{root: root}
}

func newDir(perm fs.FileMode) *memNode {
	return &memNode{dir: true, mode: fs.ModeDir | perm.Perm(), children: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// split returns the elements of name's path, cleaned; the root has none.
func split(name string) []string {
	p := filepath.ToSlash(filepath.Clean(name))
	p = strings.Trim(p, "/")
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// walk returns the directory holding name's last element, and that
// element ("" for the root).
func (m *MemFS) walk(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", nil
	}
	d := m.root
	for _, p := range parts[:len(parts)-1] {
		c, ok := d.children[p]
		if !ok {
			return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		if !c.dir {
			return nil, "", &fs.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
		}
		d = c
	}
	return d, parts[len(parts)-1], nil
}

// lookup returns the node at name.
func (m *MemFS) lookup(op, name string) (*memNode, error) {
	d, base, err := m.walk(op, name)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return m.root, nil
	}
	n, ok := d.children[base]
	if !ok {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.walk("open", name)
	if err != nil {
		return nil, err
	}
	var n *memNode
	if d == nil {
		n = m.root
	} else {
		n = d.children[base]
	}
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case n == nil:
		n = &memNode{mode: perm.Perm(), mod: time.Now()}
		d.children[base] = n
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	if n.dir && acc != os.O_RDONLY {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	if flag&os.O_TRUNC != 0 && acc != os.O_RDONLY {
		n.data = n.data[:0]
		n.mod = time.Now()
	}
	return &memFile{fs: m, n: n, name: name, read: acc != os.O_WRONLY, write: acc != os.O_RDONLY, append: flag&os.O_APPEND != 0}, nil
}

func (m *MemFS) Open(name string) (File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.walk("remove", name)
	if err != nil {
		return err
	}
	if d == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrInvalid}
	}
	n, ok := d.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	delete(d.children, base)
	return nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob, err := m.walk("rename", oldname)
	if err == nil && od == nil {
		err = fs.ErrInvalid
	}
	var n *memNode
	if err == nil {
		if n = od.children[ob]; n == nil {
			err = fs.ErrNotExist
		}
	}
	nd, nb, err2 := m.walk("rename", newname)
	if err == nil && err2 != nil {
		err = fs.ErrNotExist
	}
	if err == nil && nd == nil {
		err = fs.ErrInvalid
	}
	if err == nil {
		if t := nd.children[nb]; t != nil && t.dir != n.dir {
			err = syscall.EISDIR
		}
	}
	if err != nil {
		if pe, ok := err.(*fs.PathError); ok {
			err = pe.Err
		}
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	delete(od.children, ob)
	nd.children[nb] = n
	return nil
}

// RemoveAll removes name and everything under it, as os.RemoveAll does;
// a missing name is not an error.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.walk("removeall", name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if d == nil {
		return &fs.PathError{Op: "removeall", Path: name, Err: fs.ErrInvalid}
	}
	delete(d.children, base)
	return nil
}

func (m *MemFS) Mkdir(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.walk("mkdir", name)
	if err != nil {
		return err
	}
	if d == nil || d.children[base] != nil {
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrExist}
	}
	d.children[base] = newDir(perm)
	return nil
}

func (m *MemFS) MkdirAll(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.root
	for _, p := range split(name) {
		c, ok := d.children[p]
		if !ok {
			c = newDir(perm)
			d.children[p] = c
		} else if !c.dir {
			return &fs.PathError{Op: "mkdir", Path: name, Err: syscall.ENOTDIR}
		}
		d = c
	}
	return nil
}

func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(filepath.Base(name)), nil
}

func (m *MemFS) Lstat(name string) (fs.FileInfo, error) { return m.Stat(name) }

func (m *MemFS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("readdirent", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdirent", Path: name, Err: syscall.ENOTDIR}
	}
	var out []fs.DirEntry
	for _, k := range slices.Sorted(maps.Keys(n.children)) {
		out = append(out, fs.FileInfoToDirEntry(n.children[k].info(k)))
	}
	return out, nil
}

func (m *MemFS) Lock(f File, exclusive bool) error {
	mf, ok := f.(*memFile)
	if !ok || mf.fs != m {
		return &fs.PathError{Op: "lock", Path: f.Name(), Err: fs.ErrInvalid}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if mf.locked != 0 {
		return nil
	}
	n := mf.n
	switch {
	case n.locks < 0 || exclusive && n.locks > 0:
		return flock.ErrHeld
	case exclusive:
		n.locks, mf.locked = -1, -1
	default:
		n.locks++
		mf.locked = 1
	}
	return nil
}

// Clone returns a copy of m as a killed process leaves it: everything
// written is there, and what is durable stays durable.
func (m *MemFS) Clone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]*memNode{}
	return &MemFS{root: m.root.clone(seen, false)}
}

// CrashClone returns a copy of m as a power loss leaves it: each file
// holds what it held at its last Sync (nothing before the first), and each
// directory the entries it had at its last Sync. m is not changed.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]*memNode{}
	return &MemFS{root: m.root.clone(seen, true)}
}

// clone copies n, with only its durable state when crash is set. A node
// reachable under two names (renamed since the last directory Sync) is
// copied once.
func (n *memNode) clone(seen map[*memNode]*memNode, crash bool) *memNode {
	if c, ok := seen[n]; ok {
		return c
	}
	c := &memNode{dir: n.dir, mode: n.mode, mod: n.mod, synced: bytes.Clone(n.synced)}
	seen[n] = c
	if !n.dir {
		c.data = bytes.Clone(n.data)
		c.dirtyLo, c.dirtyHi = n.dirtyLo, n.dirtyHi
		if crash {
			c.data = bytes.Clone(n.synced)
			c.dirtyLo, c.dirtyHi = 0, 0
		}
		return c
	}
	c.children, c.durable = map[string]*memNode{}, map[string]*memNode{}
	for k, v := range n.durable {
		c.durable[k] = v.clone(seen, crash)
	}
	if crash {
		c.children = maps.Clone(c.durable)
		return c
	}
	for k, v := range n.children {
		c.children[k] = v.clone(seen, crash)
	}
	return c
}

// Files returns the content of every file under dir, by path relative to
// it with slashes, as it is now.
func (m *MemFS) Files(dir string) map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	n, err := m.lookup("walk", dir)
	if err != nil || !n.dir {
		return out
	}
	var walk func(n *memNode, prefix string)
	walk = func(n *memNode, prefix string) {
		for k, c := range n.children {
			if c.dir {
				walk(c, prefix+k+"/")
			} else {
				out[prefix+k] = bytes.Clone(c.data)
			}
		}
	}
	walk(n, "")
	return out
}

func (n *memNode) info(name string) fs.FileInfo {
	return &memInfo{name: name, size: int64(len(n.data)), mode: n.mode, mod: n.mod}
}

type memInfo struct {
	name string
	size int64
	mode fs.FileMode
	mod  time.Time
}

func (i *memInfo) Name() string       { return i.name }
func (i *memInfo) Size() int64        { return i.size }
func (i *memInfo) Mode() fs.FileMode  { return i.mode }
func (i *memInfo) ModTime() time.Time { return i.mod }
func (i *memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *memInfo) Sys() any           { return nil }

// memFile is an open file of a MemFS.
type memFile struct {
	fs                  *MemFS
	n                   *memNode
	name                string
	pos                 int64
	read, write, append bool
	closed              bool
	locked              int // the lock this handle holds (see memNode.locks)
}

func (f *memFile) check(op string, write bool) error {
	switch {
	case f.closed:
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	case f.n.dir && (write || op == "read"):
		return &fs.PathError{Op: op, Path: f.name, Err: syscall.EISDIR}
	case write && !f.write, !write && !f.read:
		return &fs.PathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if f.pos >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[f.pos:])
	f.pos += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "readat", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.append {
		f.pos = int64(len(f.n.data))
	}
	f.n.writeAt(p, f.pos)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 || f.append {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.writeAt(p, off)
	return len(p), nil
}

func (n *memNode) writeAt(p []byte, off int64) {
	end := off + int64(len(p))
	n.dirty(min(off, int64(len(n.data))), end)
	if size := int64(len(n.data)); end > size {
		n.grow(end)
	}
	copy(n.data[off:], p)
	n.mod = time.Now()
}

// grow makes data size bytes long, the new ones zeros. Its array at
// least doubles when it must grow: a log writing its zeros ahead in
// pieces, then its records, would otherwise copy the file at every piece
// (append grows a large slice by a quarter). Past data's length its array
// may hold what a truncation cut: cleared.
func (n *memNode) grow(size int64) {
	old := int64(len(n.data))
	if size > int64(cap(n.data)) {
		data := make([]byte, size, max(size, 2*int64(cap(n.data))))
		copy(data, n.data)
		n.data = data
		return
	}
	n.data = n.data[:size]
	clear(n.data[old:])
}

// dirty adds data's bytes lo to hi to those written since the last Sync.
func (n *memNode) dirty(lo, hi int64) {
	if lo >= hi {
		return
	}
	if n.dirtyLo >= n.dirtyHi {
		n.dirtyLo, n.dirtyHi = lo, hi
		return
	}
	n.dirtyLo, n.dirtyHi = min(n.dirtyLo, lo), max(n.dirtyHi, hi)
}

// sync makes synced what data holds, copying the bytes written since the
// last Sync and those past synced's end.
func (n *memNode) sync() {
	size := int64(len(n.data))
	switch {
	case n.synced == nil:
		n.synced = bytes.Clone(n.data)
	case size <= int64(len(n.synced)):
		n.synced = n.synced[:size]
	default:
		n.synced = append(n.synced, n.data[len(n.synced):]...)
	}
	if lo, hi := n.dirtyLo, min(n.dirtyHi, size); lo < hi {
		copy(n.synced[lo:hi], n.data[lo:hi])
	}
	n.dirtyLo, n.dirtyHi = 0, 0
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "sync", Path: f.name, Err: fs.ErrClosed}
	}
	if f.n.dir {
		f.n.durable = maps.Clone(f.n.children)
		return nil
	}
	f.n.sync()
	return nil
}

func (f *memFile) Datasync() error { return f.Sync() }

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size] // grow clears the rest if it comes back
	} else {
		f.n.dirty(int64(len(f.n.data)), size)
		f.n.grow(size)
	}
	f.n.mod = time.Now()
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, &fs.PathError{Op: "stat", Path: f.name, Err: fs.ErrClosed}
	}
	return f.n.info(filepath.Base(f.name)), nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	switch {
	case f.locked < 0:
		f.n.locks = 0
	case f.locked > 0:
		f.n.locks--
	}
	return nil
}
