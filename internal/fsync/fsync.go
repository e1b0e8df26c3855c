// Package fsync makes file-system changes durable: a directory's entries
// (creations, renames, removals) and small files replaced whole.
package fsync

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Dir makes creations, renames and removals in dir durable: without it a
// crash can bring back the old directory entries even though the files'
// data is synced. On Windows, where a directory cannot be opened for fsync
// and NTFS journals the metadata change itself, it does nothing.
func Dir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
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
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
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
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return Dir(filepath.Dir(path))
}

// MkdirAll creates dir and any missing parents, syncing the parent of each
// directory it creates so that a power loss cannot lose the directory that
// holds acknowledged data. A dir that exists as a file is an error.
func MkdirAll(dir string) error {
	dir = filepath.Clean(dir)
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return Dir(parent)
}
