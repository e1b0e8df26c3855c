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
