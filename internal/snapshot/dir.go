package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/internal/vfs"
)

// List returns the snapshot files in dir, newest (highest seq) first. Temp
// files, directories and names not of the form "snap-<20 digits>.snap" are
// ignored. List only reads the directory; it does not validate the files.
func List(dir string) ([]Info, error) { return ListFS(vfs.Default, dir) }

// ListFS is List on fsys.
func ListFS(fsys vfs.FS, dir string) ([]Info, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var infos []Info
	for _, e := range entries {
		seq, ok := parseName(e.Name(), snapExt)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir, e.g. by a concurrent Prune
		}
		if err != nil {
			return nil, err
		}
		infos = append(infos, Info{Seq: seq, Path: filepath.Join(dir, e.Name()), Size: fi.Size()})
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Seq > infos[j].Seq })
	return infos, nil
}

// Prune removes all but the newest keep snapshots in dir, and any leftover
// temp files, then fsyncs dir. keep 0 removes every snapshot, which is only
// right if the log still holds everything; keeping two leaves an older image
// for an operator to fall back on if the newest is ever damaged. Prune must
// not run concurrently with Write on the same dir.
func Prune(dir string, keep int) error { return PruneFS(vfs.Default, dir, keep) }

// PruneFS is Prune on fsys.
func PruneFS(fsys vfs.FS, dir string, keep int) error {
	if keep < 0 {
		return fmt.Errorf("snapshot: Prune: keep must be >= 0, got %d", keep)
	}
	infos, err := ListFS(fsys, dir)
	if err != nil {
		return err
	}
	var errs []error
	removed := false
	if len(infos) > keep {
		for _, in := range infos[keep:] {
			if err := fsys.Remove(in.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			} else {
				removed = true
			}
		}
	}
	n, err := removeTemps(fsys, dir)
	if err != nil {
		errs = append(errs, err)
	}
	if removed || n > 0 {
		if err := fsync.DirFS(fsys, dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveTemp removes temp files left in dir by a Write that crashed or
// failed before its rename. It is meant to run on open, before any Write.
func RemoveTemp(dir string) error { return RemoveTempFS(vfs.Default, dir) }

// RemoveTempFS is RemoveTemp on fsys.
func RemoveTempFS(fsys vfs.FS, dir string) error {
	n, err := removeTemps(fsys, dir)
	if n > 0 {
		// Not needed for correctness (a temp file that comes back is removed
		// again next time), but keeps the directory from churning on disk.
		if serr := fsync.DirFS(fsys, dir); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	return err
}

func removeTemps(fsys vfs.FS, dir string) (int, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, e := range entries {
		if _, ok := parseName(e.Name(), tmpExt); !ok || !e.Type().IsRegular() {
			continue
		}
		if err := fsys.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
