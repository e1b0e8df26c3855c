package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/docketdb/docket/index"
	"github.com/docketdb/docket/snapshot"
	"github.com/docketdb/docket/wal"
)

// SnapshotCheck is what Check found in one snapshot file.
type SnapshotCheck struct {
	Path    string
	Seq     uint64
	Records int
	Err     error
}

// CheckReport is what Check found in a data directory.
type CheckReport struct {
	Dir       string
	Snapshots []SnapshotCheck
	Log       wal.CheckReport
	// LoadedFrom is the snapshot recovery would start from ("" for none).
	LoadedFrom string
	Seq        uint64 // last batch after replay
	Tasks      int
	Queues     int
}

// Print writes the report for a person.
func (r CheckReport) Print(w io.Writer) {
	fmt.Fprintf(w, "directory %s\n", r.Dir)
	for _, s := range r.Snapshots {
		status := "ok"
		if s.Err != nil {
			status = "BAD: " + s.Err.Error()
		}
		fmt.Fprintf(w, "snapshot %s: seq %d, %d records: %s\n", filepath.Base(s.Path), s.Seq, s.Records, status)
	}
	l := r.Log
	fmt.Fprintf(w, "log: %d segments, records %d..%d (%d records, %d bytes)\n", l.Segments, l.FirstSeq, l.LastSeq, l.Records, l.Bytes)
	if l.Torn != nil {
		fmt.Fprintf(w, "log: torn tail in %s at offset %d (%d bytes): %s; open or repair cuts it\n",
			filepath.Base(l.Torn.File), l.Torn.Offset, l.Torn.Size, l.Torn.Reason)
	}
	if l.Corrupt != nil {
		fmt.Fprintf(w, "log: CORRUPT in %s at offset %d: %s\n", filepath.Base(l.Corrupt.File), l.Corrupt.Offset, l.Corrupt.Reason)
	}
	if r.LoadedFrom != "" {
		fmt.Fprintf(w, "recovery starts from %s\n", filepath.Base(r.LoadedFrom))
	}
	fmt.Fprintf(w, "state after replay: last batch %d, %d tasks in %d queues\n", r.Seq, r.Tasks, r.Queues)
}

// Check verifies a data directory without changing it: every snapshot's
// checksums, every log record's checksum and sequence, and, after replaying
// the log over the newest good snapshot, every index against the records. It
// returns an error wrapping ErrCorrupt when anything is damaged, even damage
// Open would get past (a bad newest snapshot).
func Check(dir string) (CheckReport, error) {
	rep := CheckReport{Dir: dir}
	if _, err := os.Stat(dir); err != nil {
		return rep, err
	}
	var damage []error
	infos, err := snapshot.List(filepath.Join(dir, "snap"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, err
	}
	var store *index.Store
	for _, info := range infos {
		sc := SnapshotCheck{Path: info.Path, Seq: info.Seq}
		st, err := readSnapshot(info.Path)
		if err != nil {
			sc.Err = err
			damage = append(damage, err)
		} else {
			sc.Records = st.Len()
			if store == nil {
				store, rep.LoadedFrom = st, info.Path
			}
		}
		rep.Snapshots = append(rep.Snapshots, sc)
	}
	if store == nil {
		if len(infos) > 0 {
			return rep, fmt.Errorf("%w: no readable snapshot: %w", ErrCorrupt, errors.Join(damage...))
		}
		store = index.NewStore()
	}
	walDir := filepath.Join(dir, "wal")
	rep.Log, err = wal.Check(walDir)
	if err != nil {
		damage = append(damage, err)
	} else if store.Seq() > 0 && (rep.Log.LastSeq < store.Seq() || rep.Log.FirstSeq > store.Seq()+1) {
		damage = append(damage, fmt.Errorf("log %d..%d does not continue snapshot %d", rep.Log.FirstSeq, rep.Log.LastSeq, store.Seq()))
	} else {
		dec := index.NewDecoder(store)
		var b index.Batch
		err = wal.Scan(walDir, store.Seq()+1, func(seq uint64, data []byte) error {
			if err := dec.Batch(data, &b); err != nil {
				return fmt.Errorf("log record %d: %w", seq, err)
			}
			if err := store.Apply(&b); err != nil {
				return fmt.Errorf("log record %d: %w", seq, err)
			}
			return nil
		})
		if err != nil {
			damage = append(damage, err)
		} else if err := store.Verify(); err != nil {
			damage = append(damage, err)
		}
	}
	rep.Seq, rep.Tasks = store.Seq(), store.Len()
	store.Queues(func(*index.Queue) bool { rep.Queues++; return true })
	if len(damage) > 0 {
		return rep, fmt.Errorf("%w: %w", ErrCorrupt, errors.Join(damage...))
	}
	return rep, nil
}

// Repair cuts a torn log tail the way Open does, keeping a copy of the
// damaged segment, and removes leftover temporary snapshot files. It refuses
// a directory that is open, and damage that Open would refuse.
func Repair(dir string) (string, error) {
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := lockFile(lock); err != nil {
		if errors.Is(err, errLockHeld) {
			return "", fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return "", err
	}
	if err := snapshot.RemoveTemp(filepath.Join(dir, "snap")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	rep, err := wal.Repair(filepath.Join(dir, "wal"))
	if err != nil {
		return "", wrapStorage(err)
	}
	if rep.Cut == nil {
		return fmt.Sprintf("log records %d..%d: nothing to repair", rep.FirstSeq, rep.LastSeq), nil
	}
	return fmt.Sprintf("cut %d bytes of torn tail from %s at offset %d (%s); copy kept in %s; log records %d..%d",
		rep.Cut.Size, rep.Cut.File, rep.Cut.Offset, rep.Cut.Reason, rep.Broken, rep.FirstSeq, rep.LastSeq), nil
}
