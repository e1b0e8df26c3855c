//go:build linux

package fuzz

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/internal/vfs"
)

// scratch is the file system the crash tests' directories live on: in
// memory, so that the thousands of directories they open, copy and cut
// cost no system calls, and tests can run side by side. The kill tests
// and the full-disk test, which need a real disk, use t.TempDir.
var scratch = vfs.NewMem()

// scratchRoot is the directory of scratch that holds the scratch
// directories.
const scratchRoot = "/docket-fuzz"

var scratchSeq atomic.Int64

// scratchDir returns the path of a fresh directory on scratch, removed
// after the test. Open it with openDB (or set the file system with
// onScratch); capture, materialize and checkDir know it.
func scratchDir(tb testing.TB) string {
	tb.Helper()
	dir := fmt.Sprintf("%s/%d", scratchRoot, scratchSeq.Add(1))
	tb.Cleanup(func() { scratch.RemoveAll(dir) })
	return dir
}

// onScratch reports whether dir is on scratch.
func onScratch(dir string) bool { return strings.HasPrefix(dir, scratchRoot+"/") }

// fsOf returns the file system dir is on.
func fsOf(dir string) vfs.FS {
	if onScratch(dir) {
		return scratch
	}
	return vfs.Default
}

// withFS returns opts set to open dir on the file system it is on.
func withFS(dir string, opts engine.Options) engine.Options {
	if onScratch(dir) {
		enginetest.FS(&opts, scratch)
	}
	return opts
}

// checkDir runs engine.Check on dir and returns the batch it recovers to.
func checkDir(dir string) (uint64, error) { return enginetest.Check(fsOf(dir), dir) }

// walkFS is a vfs.FS as an fs.FS, for fs.WalkDir (paths as given, not
// rooted).
type walkFS struct{ fsys vfs.FS }

func (w walkFS) Open(name string) (fs.File, error) { return nil, fs.ErrInvalid }

func (w walkFS) ReadDir(name string) ([]fs.DirEntry, error) { return w.fsys.ReadDir(name) }

func (w walkFS) Stat(name string) (fs.FileInfo, error) { return w.fsys.Stat(name) }

// writeFile writes name on fsys whole.
func writeFile(fsys vfs.FS, name string, data []byte) error {
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
