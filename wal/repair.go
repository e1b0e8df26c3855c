package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/internal/vfs"
)

const (
	dirPerm  = 0o750
	filePerm = 0o640
)

// RepairReport says what Repair did.
type RepairReport struct {
	// FirstSeq, LastSeq and Records describe the log after the repair, as
	// in CheckReport.
	FirstSeq uint64
	LastSeq  uint64
	Records  uint64

	// Cut is the torn tail that was removed, or nil if there was none.
	Cut *Damage

	// Broken is the path of the copy of the segment taken before the cut.
	Broken string

	// Covered is the damage before from that was left in place (see
	// CheckReport.Covered).
	Covered []Damage
}

// Repair puts dir in the state Open leaves it in, without opening the log:
// it finishes an interrupted truncation and cuts a torn tail, keeping a copy
// of the segment as it was. Damage Open would refuse is refused here too, with
// an error wrapping ErrCorrupt, and nothing is changed: silently dropping
// acknowledged records is not a repair. It must not run while the log is
// open.
func Repair(dir string) (RepairReport, error) { return RepairFrom(dir, 0) }

// RepairFrom is Repair for a log whose records before from are covered by a
// snapshot: damage confined to them is left in place and reported in
// Covered, as Open with Options.From does.
func RepairFrom(dir string, from uint64) (RepairReport, error) {
	_, rep, err := recoverScanned(vfs.Default, dir, from, nil)
	return rep, err
}

// recoverScanned validates dir and then, only if it is sound, resolves what
// a crash left behind, fsyncing everything it changes. It reuses v, when it
// is a sound validation of dir with the same from, instead of validating
// again.
func recoverScanned(fsys vfs.FS, dir string, from uint64, v *Validation) (*scanState, RepairReport, error) {
	s := v.reuse(fsys, dir, from)
	if s == nil {
		var err error
		if s, err = scan(fsys, dir, from); err != nil {
			return nil, RepairReport{}, err
		}
	}
	changed := false
	// Deletions before renames, as tidwall/wal orders them: renaming first
	// could leave old segments overlapping the renamed one after a crash.
	for _, p := range append(s.layout.remove, s.layout.temps...) {
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, RepairReport{}, err
		}
		changed = true
	}
	for _, seg := range s.layout.segs {
		if seg.path != seg.final {
			if err := fsys.Rename(seg.path, seg.final); err != nil {
				return nil, RepairReport{}, err
			}
			changed = true
		}
	}
	r := s.report
	rep := RepairReport{FirstSeq: r.FirstSeq, LastSeq: r.LastSeq, Records: r.Records, Covered: r.Covered}
	if r.Torn != nil {
		seg := s.layout.segs[len(s.layout.segs)-1].final
		broken, err := cutTail(fsys, seg, r.Torn.Offset)
		if err != nil {
			return nil, RepairReport{}, err
		}
		cut := *r.Torn
		cut.File = seg
		rep.Cut, rep.Broken = &cut, broken
		changed = true
	}
	if changed {
		if err := fsync.DirFS(fsys, dir); err != nil {
			return nil, RepairReport{}, err
		}
	}
	return s, rep, nil
}

// cutTail copies the segment at path aside and truncates it to size, syncing
// both files. The caller syncs the directory.
func cutTail(fsys vfs.FS, path string, size int64) (broken string, err error) {
	broken, err = copyAside(fsys, path)
	if err != nil {
		return "", fmt.Errorf("wal: keep a copy of %s: %w", path, err)
	}
	f, err := fsys.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	return broken, f.Close()
}

// copyAside copies path to a fresh <path>.broken file, never overwriting an
// earlier copy: each one is evidence of a separate crash.
func copyAside(fsys vfs.FS, path string) (string, error) {
	src, err := fsys.Open(path)
	if err != nil {
		return "", err
	}
	defer src.Close()
	name := path + brokenSuffix
	var dst vfs.File
	for i := 1; ; i++ {
		dst, err = fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
		if !errors.Is(err, fs.ErrExist) || i > 1000 {
			break
		}
		name = path + brokenSuffix + "." + strconv.Itoa(i)
	}
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return "", err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return "", err
	}
	return name, dst.Close()
}

// createDir makes dir if it is missing and fsyncs the parent of every
// directory it creates, so that a crash cannot lose the log's directory
// after records in it were acknowledged.
func createDir(fsys vfs.FS, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; {
		fi, err := fsys.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, dirPerm); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsync.DirFS(fsys, filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}
