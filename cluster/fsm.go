package cluster

import (
	"fmt"
	"io"
	"sync"

	"github.com/docketdb/docket/engine"
	"github.com/hashicorp/raft"
)

// FSM is raft's state machine over a replicated docket DB: each committed
// command entry is planned and applied by DB.ApplyCommand, and its answer
// (an *engine.Applied, refusals included) is what raft hands back to the
// leader's Apply future. A snapshot is a copy-on-write image of the DB
// written in docket's snapshot format while commands go on applying;
// Restore replaces the whole state with one.
type FSM struct {
	db *engine.DB
	// apply is db.ApplyCommand; a test replaces it to make applying panic.
	apply func([]byte) *engine.Applied

	mu sync.Mutex
	// applied is the index of the last command entry applied since the
	// FSM was made or last restored (0 before the first); raft's own
	// entries (no-ops, barriers, configurations) never reach the DB.
	applied uint64
	changed chan struct{} // closed and replaced on every apply and restore
}

var _ raft.BatchingFSM = (*FSM)(nil)

// NewFSM returns the FSM of db, which must have been opened with
// engine.OpenReplicated.
func NewFSM(db *engine.DB) (*FSM, error) {
	if db == nil || !db.Replicated() {
		return nil, fmt.Errorf("%w: the FSM needs a DB opened with engine.OpenReplicated", engine.ErrInvalid)
	}
	return &FSM{db: db, apply: db.ApplyCommand, changed: make(chan struct{})}, nil
}

// DB returns the DB the FSM applies to.
func (f *FSM) DB() *engine.DB { return f.db }

// Apply applies one committed entry. A panic while it applies stops the
// process (applyPanicked).
func (f *FSM) Apply(e *raft.Log) any {
	if e.Type != raft.LogCommand {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			panic(applyPanicked(e.Index, p))
		}
	}()
	a := f.apply(e.Data)
	f.setApplied(e.Index)
	return a
}

// ApplyBatch applies committed entries in order, one answer per entry. A
// panic while one applies stops the process (applyPanicked).
func (f *FSM) ApplyBatch(entries []*raft.Log) []any {
	out := make([]any, len(entries))
	last, at := uint64(0), uint64(0)
	defer func() {
		if p := recover(); p != nil {
			panic(applyPanicked(at, p))
		}
	}()
	for i, e := range entries {
		if e.Type != raft.LogCommand {
			continue
		}
		at = e.Index
		out[i] = f.apply(e.Data)
		last = e.Index
	}
	if last != 0 {
		f.setApplied(last)
	}
	return out
}

// applyPanicked is what a panic p while entry index applied goes on
// with, out of raft's FSM goroutine, which ends the process: the DB's
// state may be half changed (the engine fails itself on a panic while
// applying, not on one while planning), and a node must not apply later
// entries on top of it, answer reads from it, or snapshot it. A restarted
// node restores its newest snapshot and replays the log after it, so the
// entry is applied again on a state rebuilt whole. An entry that panics
// wherever it applies stops every node that applies it, at every restart:
// the cluster stops rather than diverge.
func applyPanicked(index uint64, p any) error {
	err, ok := p.(error)
	if !ok {
		err = fmt.Errorf("%v", p)
	}
	return fmt.Errorf("cluster: applying log entry %d panicked; the process stops rather than go on from a state the panic may have half changed (a restart replays the log): %w", index, err)
}

func (f *FSM) setApplied(i uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = i
	close(f.changed)
	f.changed = make(chan struct{})
}

// Applied returns the index of the last command entry applied since the
// FSM was made or restored (a snapshot carries the DB's state, not raft's
// indexes; raft.Raft.AppliedIndex is raft's view), and a channel closed at
// the next apply or restore.
func (f *FSM) Applied() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied, f.changed
}

// Snapshot captures the DB's state at once (a copy-on-write image); raft
// persists it later, while Apply goes on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	img, err := f.db.Image()
	if err != nil {
		return nil, err
	}
	return fsmSnapshot{img}, nil
}

// Restore discards the DB's state and loads the snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := f.db.Restore(rc); err != nil {
		return err
	}
	f.setApplied(0)
	return nil
}

type fsmSnapshot struct{ img *engine.Image }

// Persist writes the image in docket's snapshot format to sink.
func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.img.WriteTo(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("cluster: snapshot of batch %d: %w", s.img.Seq(), err)
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}
