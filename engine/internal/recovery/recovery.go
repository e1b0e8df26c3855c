// Package recovery finds the state a data directory holds, the one path
// Open, OpenReadOnly and the offline checks share: the newest snapshot
// that reads, whether the log continues it, and the replay of the log
// after it (OpenLog, for a directory opened to write). It writes the
// snapshots it reads back (WriteSnapshot), and keeps the state a
// replicated log's follower builds from the same batches (Replica). It takes no lock and keeps no engine:
// the engine gives it the one step that applies a batch (Apply).
package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/snapshot"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/wal"
)

// Apply applies batch b, logged as record seq, to store: the engine's one
// step from a logged batch to the state, the same on the live commit path
// as in recovery.
type Apply func(store *index.Store, seq uint64, b *index.Batch) (index.Outcome, error)

// SnapshotCheck is what Check found in one snapshot file.
type SnapshotCheck struct {
	Path    string
	Seq     uint64
	Records int
	Err     error
}

// Recovery is one path shared by Open, OpenReadOnly, Check, Repair and
// Salvage, so that they cannot disagree about a directory:
//
//  1. loadBase: the newest snapshot that reads (falling back to older ones);
//  2. the log is opened (Open) or validated in place (the others) with
//     wal's From set to base.from(): damage in records the snapshot covers
//     does not count;
//  3. base.decide: does the log continue the snapshot?
//  4. base.replay: every record after the snapshot through applyLogged.

// Base is where recovery starts.
type Base struct {
	Store   *index.Store
	Path    string // the snapshot loaded, "" for none
	newest  uint64 // seq of the newest snapshot on disk, 0 for none
	snapErr error  // set when no snapshot reads: wraps dockettype.ErrCorrupt
	// Snaps is what was found in each snapshot, newest first (only the ones
	// read: loadBase stops at the first good one unless asked for all).
	Snaps []SnapshotCheck
	// Refused counts replayed batches whose assertions no longer held.
	Refused int
}

// LoadBase finds the newest snapshot in snapDir that verifies. A snapshot
// that fails to verify is passed over (logged); any other error (permission,
// I/O) stops recovery as it is: it says nothing about the data. all reads
// every snapshot, for a report.
func LoadBase(fsys vfs.FS, snapDir string, logger *slog.Logger, all bool) (*Base, error) {
	b := &Base{}
	infos, err := snapshot.ListFS(fsys, snapDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var firstErr error
	for _, info := range infos {
		if b.Store != nil && !all {
			break
		}
		sc := SnapshotCheck{Path: info.Path, Seq: info.Seq}
		store, err := ReadSnapshot(fsys, info.Path)
		if err != nil && !isCorrupt(err) {
			return nil, err
		}
		if err != nil {
			sc.Err = WrapStorage(err)
			if firstErr == nil {
				firstErr = sc.Err
			}
		} else {
			sc.Records = store.Len()
			if b.Store == nil {
				b.Store, b.Path = store, info.Path
				if firstErr != nil && logger != nil {
					logger.Warn("docket: newest snapshot unreadable, using an older one",
						"err", firstErr, "snapshot", info.Path)
				}
			}
		}
		b.Snaps = append(b.Snaps, sc)
	}
	if len(infos) > 0 {
		b.newest = infos[0].Seq
	}
	if b.Store == nil {
		b.Store = index.NewStore()
		if firstErr != nil {
			b.snapErr = fmt.Errorf("no readable snapshot: %w", firstErr)
		}
	}
	return b, nil
}

func isCorrupt(err error) bool {
	return errors.Is(err, wal.ErrCorrupt) || errors.Is(err, snapshot.ErrCorrupt) ||
		errors.Is(err, index.ErrCorrupt) || errors.Is(err, dockettype.ErrCorrupt)
}

// From is the first log record recovery reads: the one after the snapshot,
// or the very first when no snapshot reads and the whole log must do.
func (b *Base) From() uint64 {
	if b.snapErr != nil {
		return 1
	}
	return b.Store.Seq() + 1
}

// Decide says whether a log holding records first..last continues the base.
func (b *Base) Decide(first, last uint64, logger *slog.Logger) error {
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
	from := b.Store.Seq() + 1
	if last < b.Store.Seq() {
		return fmt.Errorf("%w: log ends at %d, before snapshot %d", dockettype.ErrCorrupt, last, b.Store.Seq())
	}
	if first > from {
		return fmt.Errorf("%w: log starts at %d, snapshot needs %d", dockettype.ErrCorrupt, first, from)
	}
	return nil
}

// Replay applies every record from the one after the snapshot, read by
// read (wal.Log.Replay, or wal.Scan over a directory left as it is),
// through the engine's one replay (ApplyLogged with apply, as the live
// path applies); refused batches are counted, not damage.
func (b *Base) Replay(apply Apply, read func(from uint64, fn func(seq uint64, data []byte) error) error) error {
	from := b.Store.Seq() + 1
	n, err := Replay(b.Store, apply, func(fn func(uint64, []byte) error) error { return read(from, fn) })
	b.Refused += n
	return WrapStorage(err)
}

// IsDocketDir reports whether dir looks like a data directory Open made: it
// holds a wal or snap directory. Read-only commands refuse anything else
// rather than read (or worse, make) a docket directory inside it.
func IsDocketDir(fsys vfs.FS, dir string) error {
	st, err := fsys.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", dockettype.ErrInvalid, dir)
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
	return fmt.Errorf("%w: %s is not a docket data directory (it has no wal or snap directory)", dockettype.ErrInvalid, dir)
}

// InPlace runs recovery over dir without changing a byte of it, the
// way Open would (a torn tail is left in place and not read). It returns the
// base with the replayed state and what the log check found.
func InPlace(fsys vfs.FS, dir string, logger *slog.Logger, allSnaps bool, apply Apply) (*Base, wal.CheckReport, error) {
	if err := IsDocketDir(fsys, dir); err != nil {
		return nil, wal.CheckReport{}, err
	}
	b, err := LoadBase(fsys, filepath.Join(dir, "snap"), logger, allSnaps)
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
	} else if rep, err = wal.CheckFromFS(fsys, walDir, b.From()); err != nil {
		return b, rep, WrapStorage(err)
	}
	if err := b.Decide(rep.FirstSeq, rep.LastSeq, logger); err != nil {
		return b, rep, err
	}
	if noLog {
		return b, rep, nil
	}
	err = b.Replay(apply, func(from uint64, fn func(uint64, []byte) error) error {
		return wal.ScanFS(fsys, walDir, from, fn)
	})
	return b, rep, err
}

// WrapStorage marks errors from the storage packages with the engine's
// sentinels.
func WrapStorage(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wal.ErrCorrupt), errors.Is(err, snapshot.ErrCorrupt), errors.Is(err, index.ErrCorrupt):
		return fmt.Errorf("%w: %w", dockettype.ErrCorrupt, err)
	case errors.Is(err, wal.ErrFailed):
		return fmt.Errorf("%w: %w", dockettype.ErrFailed, err)
	}
	return err
}

// Replay applies logged batches to store in order: records is a log reader
// (wal.Log.Replay, wal.Scan) that calls its argument for every record from
// store.Seq()+1 on. It returns how many batches were refused (a refusal is
// an outcome, not damage); an error means the log does not fit the state.
// Open, Check and anything else that rebuilds state from a log call it, and
// it applies through apply, the live commit path's own,, so they cannot
// disagree about what a log means.
func Replay(store *index.Store, apply Apply, records func(func(seq uint64, data []byte) error) error) (refused int, err error) {
	dec := index.NewDecoder(store)
	var b index.Batch
	err = records(func(seq uint64, data []byte) error {
		out, err := ApplyLogged(store, apply, dec, &b, seq, data)
		if err != nil {
			return err
		}
		if out.Refused != "" {
			refused++
		}
		return nil
	})
	return refused, err
}

// ApplyLogged decodes data, the bytes logged as record seq, into b (reused)
// with dec and applies it to store with apply: exactly what was logged. The outcome says whether the batch applied or was
// refused (and why); an error (wrapping index.ErrCorrupt) means the record
// is damaged or does not follow store, and store must then be discarded.
func ApplyLogged(store *index.Store, apply Apply, dec *index.Decoder, b *index.Batch, seq uint64, data []byte) (index.Outcome, error) {
	if err := dec.Batch(data, b); err != nil {
		return index.Outcome{Seq: seq}, fmt.Errorf("log record %d: %w", seq, err)
	}
	return apply(store, seq, b)
}
