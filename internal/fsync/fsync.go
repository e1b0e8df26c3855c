// Package fsync makes file-system changes durable: a directory's entries
// (creations, renames, removals) and small files replaced whole.
package fsync

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/docketdb/docket/internal/vfs"
)

// Dir makes creations, renames and removals in dir durable: without it a
// crash can bring back the old directory entries even though the files'
// data is synced. On Windows, where a directory cannot be opened for fsync
// and NTFS journals the metadata change itself, it does nothing.
func Dir(dir string) error { return DirFS(vfs.Default, dir) }

// DirFS is Dir on fsys.
func DirFS(fsys vfs.FS, dir string) error {
	if runtime.GOOS == "windows" && fsys == vfs.Default {
		return nil
	}
	d, err := fsys.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// WriteFile replaces path with data durably: it writes a temporary file
// beside it, syncs it, renames it over path and syncs the directory, so a
// crash leaves either the old file or the new one, never a mix. The
// temporary file is removed when a step fails.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteFileFS(vfs.Default, path, data, perm)
}

// WriteFileFS is WriteFile on fsys.
func WriteFileFS(fsys vfs.FS, path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		fsys.Remove(tmp)
		return err
	}
	return DirFS(fsys, filepath.Dir(path))
}

// MkdirAll creates dir and any missing parents, syncing the parent of each
// directory it creates so that a power loss cannot lose the directory that
// holds acknowledged data. A dir that exists as a file is an error.
func MkdirAll(dir string) error { return MkdirAllFS(vfs.Default, dir, 0o755) }

// MkdirAllFS is MkdirAll on fsys, creating directories with perm.
func MkdirAllFS(fsys vfs.FS, dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	if st, err := fsys.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAllFS(fsys, parent, perm); err != nil {
			return err
		}
	}
	if err := fsys.Mkdir(dir, perm); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return DirFS(fsys, parent)
}
