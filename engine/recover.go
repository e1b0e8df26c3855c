package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/snapshot"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/wal"
)

// Recovery is one path shared by Open, OpenReadOnly, Check, Repair and
// Salvage, so that they cannot disagree about a directory:
//
//  1. loadBase: the newest snapshot that reads (falling back to older ones);
//  2. the log is opened (Open) or validated in place (the others) with
//     wal's From set to base.from(): damage in records the snapshot covers
//     does not count;
//  3. base.decide: does the log continue the snapshot?
//  4. base.replay: every record after the snapshot through applyLogged.

// base is where recovery starts.
type base struct {
	store   *index.Store
	path    string // the snapshot loaded, "" for none
	newest  uint64 // seq of the newest snapshot on disk, 0 for none
	snapErr error  // set when no snapshot reads: wraps ErrCorrupt
	// snaps is what was found in each snapshot, newest first (only the ones
	// read: loadBase stops at the first good one unless asked for all).
	snaps []SnapshotCheck
	// refused counts replayed batches whose assertions no longer held.
	refused int
}

// loadBase finds the newest snapshot in snapDir that verifies. A snapshot
// that fails to verify is passed over (logged); any other error (permission,
// I/O) stops recovery as it is: it says nothing about the data. all reads
// every snapshot, for a report.
func loadBase(fsys vfs.FS, snapDir string, logger *slog.Logger, all bool) (*base, error) {
	b := &base{}
	infos, err := snapshot.ListFS(fsys, snapDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var firstErr error
	for _, info := range infos {
		if b.store != nil && !all {
			break
		}
		sc := SnapshotCheck{Path: info.Path, Seq: info.Seq}
		store, err := readSnapshot(fsys, info.Path)
		if err != nil && !isCorrupt(err) {
			return nil, err
		}
		if err != nil {
			sc.Err = wrapStorage(err)
			if firstErr == nil {
				firstErr = sc.Err
			}
		} else {
			sc.Records = store.Len()
			if b.store == nil {
				b.store, b.path = store, info.Path
				if firstErr != nil && logger != nil {
					logger.Warn("docket: newest snapshot unreadable, using an older one",
						"err", firstErr, "snapshot", info.Path)
				}
			}
		}
		b.snaps = append(b.snaps, sc)
	}
	if len(infos) > 0 {
		b.newest = infos[0].Seq
	}
	if b.store == nil {
		b.store = index.NewStore()
		if firstErr != nil {
			b.snapErr = fmt.Errorf("no readable snapshot: %w", firstErr)
		}
	}
	return b, nil
}

func isCorrupt(err error) bool {
	return errors.Is(err, wal.ErrCorrupt) || errors.Is(err, snapshot.ErrCorrupt) ||
		errors.Is(err, index.ErrCorrupt) || errors.Is(err, ErrCorrupt)
}

// from is the first log record recovery reads: the one after the snapshot,
// or the very first when no snapshot reads and the whole log must do.
func (b *base) from() uint64 {
	if b.snapErr != nil {
		return 1
	}
	return b.store.Seq() + 1
}

// decide says whether a log holding records first..last continues the base.
func (b *base) decide(first, last uint64, logger *slog.Logger) error {
	if b.snapErr != nil {
		// The log alone will do if it still holds every batch from the
		// first one up to the newest snapshot's.
		if first != 1 || last < b.newest {
			return b.snapErr
		}
		if logger != nil {
			logger.Warn("docket: no readable snapshot, replaying the whole log", "err", b.snapErr)
		}
	}
	from := b.store.Seq() + 1
	if last < b.store.Seq() {
		return fmt.Errorf("%w: log ends at %d, before snapshot %d", ErrCorrupt, last, b.store.Seq())
	}
	if first > from {
		return fmt.Errorf("%w: log starts at %d, snapshot needs %d", ErrCorrupt, first, from)
	}
	return nil
}

// replay applies every record from the one after the snapshot, read by
// read (wal.Log.Replay, or wal.Scan over a directory left as it is),
// through the engine's one replay (applyLogged, as the live path applies);
// refused batches are counted, not damage.
func (b *base) replay(read func(from uint64, fn func(seq uint64, data []byte) error) error) error {
	from := b.store.Seq() + 1
	n, err := replay(b.store, func(fn func(uint64, []byte) error) error { return read(from, fn) })
	b.refused += n
	return wrapStorage(err)
}

// isDocketDir reports whether dir looks like a data directory Open made: it
// holds a wal or snap directory. Read-only commands refuse anything else
// rather than read (or worse, make) a docket directory inside it.
func isDocketDir(fsys vfs.FS, dir string) error {
	st, err := fsys.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrInvalid, dir)
	}
	for _, sub := range []string{"wal", "snap"} {
		st, err := fsys.Stat(filepath.Join(dir, sub))
		if err == nil && st.IsDir() {
			return nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return fmt.Errorf("%w: %s is not a docket data directory (it has no wal or snap directory)", ErrInvalid, dir)
}

// recoverInPlace runs recovery over dir without changing a byte of it, the
// way Open would (a torn tail is left in place and not read). It returns the
// base with the replayed state and what the log check found.
func recoverInPlace(fsys vfs.FS, dir string, logger *slog.Logger, allSnaps bool) (*base, wal.CheckReport, error) {
	if err := isDocketDir(fsys, dir); err != nil {
		return nil, wal.CheckReport{}, err
	}
	b, err := loadBase(fsys, filepath.Join(dir, "snap"), logger, allSnaps)
	if err != nil {
		return nil, wal.CheckReport{}, err
	}
	walDir := filepath.Join(dir, "wal")
	noLog := false
	if _, err := fsys.Stat(walDir); errors.Is(err, fs.ErrNotExist) {
		noLog = true // Open would create an empty log
	}
	var rep wal.CheckReport
	if noLog {
		rep = wal.CheckReport{FirstSeq: 1}
	} else if rep, err = wal.CheckFromFS(fsys, walDir, b.from()); err != nil {
		return b, rep, wrapStorage(err)
	}
	if err := b.decide(rep.FirstSeq, rep.LastSeq, logger); err != nil {
		return b, rep, err
	}
	if noLog {
		return b, rep, nil
	}
	err = b.replay(func(from uint64, fn func(uint64, []byte) error) error {
		return wal.ScanFS(fsys, walDir, from, fn)
	})
	return b, rep, err
}
