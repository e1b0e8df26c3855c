package valuelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vlog"
)

// Compaction. A value log file holds the values of tasks that have since
// ended or changed: dead bytes. Compact reclaims them, file by file,
// online: it copies the values still referred to into the file appends go
// to (vlog.Compact, which makes the copies durable), commits one batch
// that moves each reference to its copy (index.MutMoveValue, applied only
// where the reference is still the one copied, so a value that changed or
// ended meanwhile is left alone), waits for that batch to be durable, and
// only then removes the file. A crash before the batch is durable leaves
// the file and dead copies (reclaimed when their own file is compacted);
// a crash after it leaves a file nothing refers to, removed by the next
// pass. Reads racing the removal look the reference up again (Read).

// compactAt is the share of a file's bytes that must be dead for a pass
// to compact it.
const compactAt = 0.5

// CompactEvery is how often the background pass looks for files to
// compact.
const CompactEvery = 2 * time.Second

// Loop runs a compaction pass every CompactEvery until stop is closed.
func (v *Log) Loop(stop <-chan struct{}, log *slog.Logger) {
	t := time.NewTicker(CompactEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if _, err := v.Compact(context.Background()); err != nil && !errors.Is(err, dockettype.ErrClosed) {
				log.Warn("docket: value log compaction failed", "err", err)
			}
		}
	}
}

// Compact runs one compaction pass: it removes the files no value is in,
// then compacts those at least compactAt dead, oldest first. It returns
// how many files it removed.
func (v *Log) Compact(ctx context.Context) (removed int, err error) {
	v.compactMu.Lock()
	defer v.compactMu.Unlock()
	var head uint32
	live := map[uint32]int64{}
	if err := v.host.Locked(true, func(st *index.Store) {
		// Every value appended so far is applied (appends happen under
		// the engine lock, as its batch is applied): the files before
		// head hold no value of a commit still to come, which
		// vlog.Compact needs (its liveness rule).
		head = v.VLog.Head()
		for _, fb := range st.LiveBytes() {
			live[fb.File] = fb.Bytes
		}
	}); err != nil {
		return 0, err
	}
	for _, f := range v.VLog.Files() {
		if f.Num >= head || f.Synced < f.Size {
			continue
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if l := live[f.Num]; l > 0 && float64(l) > (1-compactAt)*float64(f.Size) {
			continue
		}
		if err := v.compactFile(ctx, f.Num, live[f.Num] > 0); err != nil {
			return removed, err
		}
		removed++
	}
	return removed, nil
}

// compactFile moves the live values of file n elsewhere (when it has any)
// and removes it.
func (v *Log) compactFile(ctx context.Context, n uint32, hasLive bool) error {
	if hasLive {
		// The engine lock is taken once for each batch of records, not
		// once a record: a compaction contends with the commits of a busy
		// DB.
		moves, err := v.VLog.CompactBatch(n, v.host.Live)
		if err != nil {
			return fmt.Errorf("docket: compacting value log file %d: %w", n, err)
		}
		if len(moves) > 0 {
			ms := make([]index.Mutation, len(moves))
			for i, m := range moves {
				ms[i] = index.Mutation{Kind: index.MutMoveValue, Move: index.ValueMove{
					Kind: indexKind[m.Kind], ID: m.Owner, Old: index.ValueRef(m.Old), New: index.ValueRef(m.New)}}
			}
			if err := v.host.Commit(ctx, ms); err != nil {
				return err
			}
		}
	}
	var left int64
	v.host.Locked(false, func(st *index.Store) { left = st.FileLiveBytes(n) })
	if left != 0 {
		// Only a value that Compact found dead and the state still refers
		// to, which the liveness rule excludes.
		return fmt.Errorf("docket: value log file %d still holds %d live bytes after compaction", n, left)
	}
	if err := v.VLog.Remove(n); err != nil && !errors.Is(err, vlog.ErrMissing) {
		return fmt.Errorf("docket: removing value log file %d: %w", n, err)
	}
	return nil
}
