package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vlog"
)

// DefaultValueThreshold is Options.ValueThreshold when it is 0.
const DefaultValueThreshold = 1024

// values is the value log of a DB on disk: a payload, result or progress
// record of at least Options.ValueThreshold bytes is written there when its
// batch commits, and the state (and so the log's batches and every
// snapshot) holds a reference to it instead of its bytes. Claim, Get, List
// and Search read the bytes back when they return them, outside the engine
// lock.
//
// Ordering: a value is appended under mu, in logAndApply, before the batch
// that refers to it is encoded; durable syncs (or flushes) the value log
// before the log, so no logged batch refers to a value that a crash can
// take while the batch survives. A reader that meets a value not yet
// written (ErrUnsynced: its batch is applied but its round not synced)
// flushes the value log and reads again; one that meets a value moved by
// compaction (ErrMissing: the file went) looks the reference up again.
// A value that cannot be read (damage, an I/O error) fails its task, not
// the call that read it: unreadable.go.
type values struct {
	log       *vlog.Log
	threshold int
	durable   bool // Durability is SyncAlways: Sync, not Flush
}

func (c *core) valueDir() string { return filepath.Join(c.dir, "vlog") }

// openValues opens the value log of a DB on disk. Call once the state is
// recovered; the log reads no value. With the threshold off, a directory
// that has a value log still opens it: its tasks keep their values there,
// and only new values stay in memory.
func (c *core) openValues() error {
	if c.opts.ValueThreshold < 0 {
		if _, err := c.fs().Stat(c.valueDir()); err != nil {
			return nil
		}
	}
	l, err := vlog.Open(c.valueDir(), vlog.Options{FS: c.fs(), FileSize: c.opts.valueFileSize})
	if err != nil {
		return wrapStorage(err)
	}
	c.vals = &values{log: l, threshold: c.opts.ValueThreshold, durable: c.opts.Durability == SyncAlways}
	return nil
}

// openValuesReadOnly opens the value log to read values, without creating
// anything; a directory with none has no references to read.
func (c *core) openValuesReadOnly() error {
	if _, err := c.fs().Stat(c.valueDir()); err != nil {
		return nil
	}
	l, err := vlog.Open(c.valueDir(), vlog.Options{FS: c.fs()})
	if err != nil {
		return wrapStorage(err)
	}
	c.vals = &values{log: l}
	return nil
}

// outOfLine moves the large values of batch b into the value log, in
// place: each mutation that would put one in memory gets a reference to
// it instead. Call with mu held, before b is checked, encoded and applied.
func (v *values) outOfLine(b *index.Batch) error {
	if v.threshold < 0 {
		return nil // off: the log only serves the values already in it
	}
	for i := range b.Mutations {
		m := &b.Mutations[i]
		switch m.Kind {
		case index.MutPutTask:
			// The record is new, made by the planner for this batch and
			// stored by nothing yet: its payload reference is set in place
			// (WithRef would copy the record for every large payload).
			t := m.Task
			if len(t.Payload()) >= v.threshold {
				r, err := v.log.Append(t.ID, vlog.Payload, t.Payload())
				if err != nil {
					return err
				}
				t.SetPayloadRef(index.ValueRef(r))
			}
			if x := t.Extra; x != nil {
				if len(x.Result) >= v.threshold {
					r, err := v.log.Append(t.ID, vlog.Result, x.Result)
					if err != nil {
						return err
					}
					t = t.WithRef(index.ValueResult, index.ValueRef(r))
				}
				if len(x.Progress) >= v.threshold {
					r, err := v.log.Append(t.ID, vlog.Progress, x.Progress)
					if err != nil {
						return err
					}
					t = t.WithRef(index.ValueProgress, index.ValueRef(r))
				}
			}
			m.Task = t
		case index.MutUpdateTask:
			u := &m.Update
			if u.Flags&index.UpdResult != 0 && len(u.Result) >= v.threshold {
				r, err := v.log.Append(u.ID, vlog.Result, u.Result)
				if err != nil {
					return err
				}
				u.Result, u.ResultRef = nil, index.ValueRef(r)
			}
			if u.Flags&index.UpdProgress != 0 && len(u.Progress) >= v.threshold {
				r, err := v.log.Append(u.ID, vlog.Progress, u.Progress)
				if err != nil {
					return err
				}
				u.Progress, u.ProgressRef = nil, index.ValueRef(r)
			}
		}
	}
	return nil
}

// borrows reports whether Enqueue and EnqueueBatch may plan payload p as
// the caller's bytes, without a copy of their own: a local commit appends
// a payload of at least the threshold to the value log (which copies it)
// before the call returns, and the state keeps only its reference. A
// lease of a task enqueued by the same batch copies its payload. A
// replicated commit may still hold its command after its caller gave up.
func (c *core) borrows(p []byte) bool {
	v := c.vals
	return c.repl == nil && v != nil && v.threshold >= 0 && len(p) >= v.threshold && len(p) > 0
}

// sync makes the values appended so far as durable as the log is about to
// make the batches that refer to them.
func (v *values) sync() error {
	if v.durable {
		return v.log.Sync()
	}
	return v.log.Flush()
}

// want is a value a call returns that the state holds by reference: the
// i-th item of the call's answer, whose value of kind lives at ref.
type want struct {
	i    int
	id   uint64
	kind index.ValueKind
	ref  index.ValueRef
}

// wants appends what of task t, the i-th item of an answer, lives in the
// value log: its payload, and with all its result and progress. Call with
// mu held.
func wants(ws []want, i int, t *index.Task, all bool) []want {
	if r := t.PayloadRef(); !r.IsZero() {
		ws = append(ws, want{i, t.ID, index.ValuePayload, r})
	}
	if t.Extra == nil || t.Extra.Refs == nil {
		return ws
	}
	if r := t.Extra.ProgressRef(); !r.IsZero() {
		ws = append(ws, want{i, t.ID, index.ValueProgress, r})
	}
	if r := t.Extra.ResultRef(); all && !r.IsZero() {
		ws = append(ws, want{i, t.ID, index.ValueResult, r})
	}
	return ws
}

var vlogKind = [...]vlog.Kind{index.ValuePayload: vlog.Payload, index.ValueResult: vlog.Result,
	index.ValueProgress: vlog.Progress, index.ValueKV: vlog.KVValue}

// readValues reads the values ws name, calling set with each. A value
// moved by a compaction meanwhile is looked up again. It returns the values
// it could not read (unreadable.go): those whose task ended or changed
// meanwhile, and those the value log cannot return. The error is for the
// call as a whole: a closed or failed DB.
func (c *core) readValues(ws []want, set func(w *want, b []byte)) ([]badValue, error) {
	if c.vals == nil {
		return nil, fmt.Errorf("%w: task %d holds a value in a value log this DB has not opened", ErrCorrupt, ws[0].id)
	}
	var bad []badValue
	for k := range ws {
		w := &ws[k]
		b, err := c.readValue(w)
		if err == nil {
			set(w, b)
			continue
		}
		bv, ok := unreadable(w, err)
		if !ok {
			return bad, err
		}
		bad = append(bad, bv)
	}
	return bad, nil
}

// errGone is a value whose task ended or changed while it was being read.
var errGone = fmt.Errorf("%w: the task changed while its value was read", ErrNotFound)

// readValue reads the value w names.
func (c *core) readValue(w *want) ([]byte, error) {
	v := c.vals
	for try := 0; ; try++ {
		b, err := v.log.Read(vlog.Ref(w.ref), w.id, vlogKind[w.kind], nil)
		switch {
		case err == nil:
			return b, nil
		case errors.Is(err, vlog.ErrUnsynced) && try < 3:
			// Its batch is applied, its round not written yet.
			if ferr := v.log.Flush(); ferr != nil {
				return nil, c.failLocked(ferr)
			}
		case errors.Is(err, vlog.ErrMissing) && try < 3:
			// Compaction moved it and removed its file: look it up again.
			if !c.relook(w) {
				return nil, fmt.Errorf("task %d: %w", w.id, errGone)
			}
		default:
			return nil, &valueReadError{kind: w.kind, id: w.id, ref: w.ref, err: err}
		}
	}
}

// relook refreshes w's reference from the state; false if its task or
// value is gone.
func (c *core) relook(w *want) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.store.Task(w.id)
	if !ok {
		return false
	}
	var r index.ValueRef
	switch w.kind {
	case index.ValuePayload:
		r = t.PayloadRef()
	case index.ValueResult:
		r = t.Ex().ResultRef()
	case index.ValueProgress:
		r = t.Ex().ProgressRef()
	}
	if r.IsZero() {
		return false
	}
	w.ref = r
	return true
}

// leaseWants lists the values of leases held by reference. Call with mu
// held, while planning the claim: a task enqueued by the same batch has
// its values in line in its lease already.
func (c *core) leaseWants(ls []Lease, ws []want) []want {
	for i := range ls {
		if t, ok := c.store.Task(ls[i].ID); ok {
			ws = wants(ws, i, t, false)
		}
	}
	return ws
}

// fillLeases reads the values of ls that leaseWants listed, and returns
// the leases it read them all for: a lease whose value cannot be read is
// failed instead of handed out, one whose task went meanwhile is left out
// (dropUnreadable).
func (c *core) fillLeases(ctx context.Context, ls []Lease, ws []want) ([]Lease, error) {
	bad, err := c.readValues(ws, func(w *want, b []byte) {
		switch w.kind {
		case index.ValuePayload:
			ls[w.i].Payload = b
		case index.ValueProgress:
			ls[w.i].Progress = b
		}
	})
	if err != nil {
		return ls, err
	}
	if len(bad) > 0 {
		ls = c.dropUnreadable(ctx, ls, bad)
	}
	return ls, nil
}

// fillInfos reads the values of infos that wants listed. A value whose task
// ended meanwhile is left out (the task is shown as it was, less that
// value); so is one that cannot be read, and the task's Unreadable names
// the damage. It returns those, for a call about one task to report.
func (c *core) fillInfos(infos []TaskInfo, ws []want) ([]badValue, error) {
	bad, err := c.readValues(ws, func(w *want, b []byte) {
		switch w.kind {
		case index.ValuePayload:
			infos[w.i].Payload = b
		case index.ValueProgress:
			infos[w.i].Progress = b
		case index.ValueResult:
			infos[w.i].Result = b
		}
	})
	if err != nil {
		return nil, err
	}
	n := 0
	for k := range bad {
		b := &bad[k]
		if b.gone {
			continue
		}
		bad[n] = *b
		n++
		t := &infos[b.w.i]
		if t.Unreadable != "" {
			t.Unreadable += "; "
		}
		t.Unreadable += b.err.Error()
		c.noteUnreadable(b, &t.Namespace, t.Queue, "the task is shown without it")
	}
	return bad[:n], nil
}

// Compaction. A value log file holds the values of tasks that have since
// ended or changed: dead bytes. compactValues reclaims them, file by file,
// online: it copies the values still referred to into the file appends go
// to (vlog.Compact, which makes the copies durable), commits one batch
// that moves each reference to its copy (index.MutMoveValue, applied only
// where the reference is still the one copied, so a value that changed or
// ended meanwhile is left alone), waits for that batch to be durable, and
// only then removes the file. A crash before the batch is durable leaves
// the file and dead copies (reclaimed when their own file is compacted);
// a crash after it leaves a file nothing refers to, removed by the next
// pass. Reads racing the removal look the reference up again (readValue).

// compactAt is the share of a file's bytes that must be dead for a pass
// to compact it.
const compactAt = 0.5

// compactEvery is how often the background pass looks for files to
// compact.
const compactEvery = 2 * time.Second

func (c *core) compactLoop() {
	defer c.compactor.Done()
	t := time.NewTicker(compactEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stopBg:
			return
		case <-t.C:
			if _, err := c.compactValues(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
				c.opts.Logger.Warn("docket: value log compaction failed", "err", err)
			}
		}
	}
}

// compactValues runs one compaction pass: it removes the files no value
// is in, then compacts those at least compactAt dead, oldest first. It
// returns how many files it removed.
func (c *core) compactValues(ctx context.Context) (removed int, err error) {
	v := c.vals
	c.compactMu.Lock()
	defer c.compactMu.Unlock()
	c.mu.Lock()
	if err := c.writable(); err != nil {
		c.mu.Unlock()
		return 0, err
	}
	// Every value appended so far is applied (appends happen under mu, in
	// logAndApply): the files before head hold no value of a commit still
	// to come, which vlog.Compact needs (its liveness rule).
	head := v.log.Head()
	live := map[uint32]int64{}
	for _, fb := range c.store.LiveBytes() {
		live[fb.File] = fb.Bytes
	}
	c.mu.Unlock()
	for _, f := range v.log.Files() {
		if f.Num >= head || f.Synced < f.Size {
			continue
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if l := live[f.Num]; l > 0 && float64(l) > (1-compactAt)*float64(f.Size) {
			continue
		}
		if err := c.compactFile(ctx, f.Num, live[f.Num] > 0); err != nil {
			return removed, err
		}
		removed++
	}
	return removed, nil
}

// compactFile moves the live values of file n elsewhere (when it has any)
// and removes it.
func (c *core) compactFile(ctx context.Context, n uint32, hasLive bool) error {
	v := c.vals
	if hasLive {
		// The engine lock is taken once for each batch of records, not
		// once a record: a compaction contends with the commits of a busy
		// DB.
		moves, err := v.log.CompactBatch(n, func(recs []vlog.Record, keep []bool) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.liveChecks++
			for i, r := range recs {
				keep[i] = c.refOf(r.Owner, r.Kind) == index.ValueRef(r.Ref)
			}
		})
		if err != nil {
			return fmt.Errorf("docket: compacting value log file %d: %w", n, err)
		}
		if len(moves) > 0 {
			if _, err := c.commit(ctx, func(p *planner) error {
				for _, m := range moves {
					p.B.Mutations = append(p.B.Mutations, index.Mutation{Kind: index.MutMoveValue, Move: index.ValueMove{
						Kind: indexKind[m.Kind], ID: m.Owner, Old: index.ValueRef(m.Old), New: index.ValueRef(m.New)}})
				}
				return nil
			}); err != nil {
				return err
			}
		}
	}
	c.mu.Lock()
	left := c.store.FileLiveBytes(n)
	c.mu.Unlock()
	if left != 0 {
		// Only a value that Compact found dead and the state still refers
		// to, which the liveness rule excludes.
		return fmt.Errorf("docket: value log file %d still holds %d live bytes after compaction", n, left)
	}
	if err := v.log.Remove(n); err != nil && !errors.Is(err, vlog.ErrMissing) {
		return fmt.Errorf("docket: removing value log file %d: %w", n, err)
	}
	return nil
}

var indexKind = [...]index.ValueKind{vlog.Payload: index.ValuePayload, vlog.Result: index.ValueResult,
	vlog.Progress: index.ValueProgress, vlog.KVValue: index.ValueKV}

// refOf is the reference the state holds for the value of kind of task
// owner (zero for none). Call with mu held.
func (c *core) refOf(owner uint64, kind vlog.Kind) index.ValueRef {
	t, ok := c.store.Task(owner)
	if !ok {
		return index.ValueRef{}
	}
	switch kind {
	case vlog.Payload:
		return t.PayloadRef()
	case vlog.Result:
		return t.Ex().ResultRef()
	case vlog.Progress:
		return t.Ex().ProgressRef()
	}
	return index.ValueRef{}
}

// CompactValues runs a compaction pass of the value log now (one also runs
// in the background every few seconds): it removes the files no value is
// in and moves the values of those mostly dead. It returns how many files
// it removed. A DB that keeps every value in memory has nothing to do.
func (d *DB) CompactValues(ctx context.Context) (int, error) {
	if err := d.owner("CompactValues"); err != nil {
		return 0, err
	}
	if d.c.vals == nil {
		return 0, nil
	}
	return d.c.compactValues(ctx)
}
