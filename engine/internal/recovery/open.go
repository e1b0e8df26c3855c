package recovery

import (
	"log/slog"
	"path/filepath"

	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/snapshot"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/wal"
)

// OpenLog recovers the state dir holds and opens its log to write after
// it, as Open does: it makes the snapshot directory and removes the
// temporary files a crash left there, loads the newest snapshot that
// reads, opens the log with wopts (From and Validated are set here),
// cutting a torn tail, and replays the log after the snapshot. The caller
// holds dir's lock.
func OpenLog(fsys vfs.FS, dir string, logger *slog.Logger, apply Apply, wopts wal.Options) (*index.Store, *wal.Log, error) {
	snapDir, walDir := filepath.Join(dir, "snap"), filepath.Join(dir, "wal")
	if err := fsync.MkdirAllFS(fsys, snapDir, 0o755); err != nil {
		return nil, nil, err
	}
	if err := snapshot.RemoveTempFS(fsys, snapDir); err != nil {
		return nil, nil, err
	}
	// Validating the log reads every record of it, which takes about as
	// long as loading a large snapshot: do both at once, validating from
	// where the newest snapshot ends. Should that one not be the snapshot
	// used (it does not read), wal.Open validates again from the right
	// place.
	from := uint64(1)
	if infos, err := snapshot.ListFS(fsys, snapDir); err == nil && len(infos) > 0 {
		from = infos[0].Seq + 1
	}
	validated := make(chan *wal.Validation, 1)
	go func() { validated <- wal.ValidateFS(fsys, walDir, from) }()
	b, err := LoadBase(fsys, snapDir, logger, false)
	v := <-validated // read no file after OpenLog returns
	if err != nil {
		return nil, nil, err
	}
	wopts.From, wopts.Validated = b.From(), v
	log, err := wal.Open(walDir, wopts)
	if err != nil {
		return nil, nil, WrapStorage(err)
	}
	logRepairs(logger, log.Repaired())
	if err := b.Decide(log.FirstSeq(), log.LastSeq(), logger); err != nil {
		log.Close()
		return nil, nil, err
	}
	if err := b.Replay(apply, log.Replay); err != nil {
		log.Close()
		return nil, nil, err
	}
	if b.Refused > 0 {
		logger.Info("docket: replay refused batches whose assertions no longer held", "refused", b.Refused)
	}
	return b.Store, log, nil
}

// logRepairs tells the operator what opening the log did to the directory.
func logRepairs(logger *slog.Logger, rep wal.RepairReport) {
	if cut := rep.Cut; cut != nil {
		logger.Warn("docket: cut a torn tail off the log (a write the crash interrupted, never acknowledged)",
			"file", cut.File, "offset", cut.Offset, "bytes", cut.Size, "reason", cut.Reason, "copy", rep.Broken)
	}
	for _, d := range rep.Covered {
		logger.Warn("docket: damaged log record before the snapshot ignored (the snapshot holds its effect)",
			"file", d.File, "offset", d.Offset, "reason", d.Reason)
	}
}

// WriteSnapshot writes img as a snapshot in the snapshot directory of a
// data directory open for writing, and truncates its log behind the
// older of the two snapshots it keeps. The log (and, by before, the values
// the state refers to) is made durable up to the image first: a crash must
// not leave a snapshot ahead of a shorter log. A failure of the log or of
// before goes to fail, which stops the engine.
func WriteSnapshot(fsys vfs.FS, snapDir string, img *index.Image, failpoint func(string) error, log *wal.Log,
	before func() error, fail func(error) error) (snapshot.Info, error) {
	infos, err := snapshot.ListFS(fsys, snapDir)
	if err != nil {
		return snapshot.Info{}, err
	}
	if len(infos) > 0 && infos[0].Seq == img.Seq {
		return infos[0], nil // nothing changed since
	}
	if err := before(); err != nil {
		return snapshot.Info{}, fail(err)
	}
	if err := log.SyncGathered(img.Seq); err != nil {
		return snapshot.Info{}, fail(err)
	}
	info, err := snapshot.Write(snapDir, img.Seq, snapshot.Options{Failpoint: failpoint, FS: fsys}, func(w *snapshot.Writer) error {
		return index.WriteImage(img, index.NewEncoder(), w.Add)
	})
	if err != nil {
		return info, err
	}
	// Keep two snapshots, and the log back to the older one, so that an
	// unreadable newest snapshot can fall back to the previous plus the log.
	infos, err = snapshot.ListFS(fsys, snapDir)
	if err != nil {
		return info, err
	}
	if len(infos) >= 2 {
		if err := log.TruncateFront(infos[1].Seq + 1); err != nil {
			return info, fail(err)
		}
	}
	return info, snapshot.PruneFS(fsys, snapDir, 2)
}
