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
	return &FSM{db: db, changed: make(chan struct{})}, nil
}

// DB returns the DB the FSM applies to.
func (f *FSM) DB() *engine.DB { return f.db }

// Apply applies one committed entry.
func (f *FSM) Apply(e *raft.Log) any {
	if e.Type != raft.LogCommand {
		return nil
	}
	a := f.db.ApplyCommand(e.Data)
	f.setApplied(e.Index)
	return a
}

// ApplyBatch applies committed entries in order, one answer per entry.
func (f *FSM) ApplyBatch(entries []*raft.Log) []any {
	out := make([]any, len(entries))
	last := uint64(0)
	for i, e := range entries {
		if e.Type != raft.LogCommand {
			continue
		}
		out[i] = f.db.ApplyCommand(e.Data)
		last = e.Index
	}
	if last != 0 {
		f.setApplied(last)
	}
	return out
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
