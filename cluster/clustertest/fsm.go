package clustertest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// FSM is a trivial state machine: the commands applied, in order, and the
// index of the last one. Two FSMs are equal when their commands are.
type FSM struct {
	mu       sync.Mutex
	commands [][]byte
	index    uint64
	changed  chan struct{} // closed and replaced whenever index moves
}

var _ raft.FSM = (*FSM)(nil)

// NewFSM returns an empty FSM.
func NewFSM() *FSM { return &FSM{changed: make(chan struct{})} }

// Apply records a command entry.
func (f *FSM) Apply(e *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Type == raft.LogCommand {
		f.commands = append(f.commands, bytes.Clone(e.Data))
	}
	f.setIndex(e.Index)
	return nil
}

// setIndex moves index and wakes waiters; it holds mu.
func (f *FSM) setIndex(i uint64) {
	f.index = i
	close(f.changed)
	f.changed = make(chan struct{})
}

// Index returns the index of the last entry applied or restored.
func (f *FSM) Index() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.index
}

// Commands returns a copy of the commands applied so far.
func (f *FSM) Commands() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commands)
}

// WaitIndex returns once the FSM has applied index, or an error at the
// deadline.
func (f *FSM) WaitIndex(index uint64, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		f.mu.Lock()
		at, ch := f.index, f.changed
		f.mu.Unlock()
		if at >= index {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return fmt.Errorf("clustertest: FSM at index %d, still short of %d at the deadline", at, index)
		}
	}
}

// Snapshot captures the commands applied so far.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := binary.LittleEndian.AppendUint64(nil, f.index)
	b = binary.AppendUvarint(b, uint64(len(f.commands)))
	for _, c := range f.commands {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return snapshot(b), nil
}

// Restore replaces the state with a snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if len(b) < 8 {
		return errors.New("clustertest: snapshot too short")
	}
	index := binary.LittleEndian.Uint64(b)
	b = b[8:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return errors.New("clustertest: snapshot count does not decode")
	}
	b = b[k:]
	cmds := make([][]byte, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return errors.New("clustertest: snapshot command does not decode")
		}
		cmds = append(cmds, bytes.Clone(b[k:k+int(l)]))
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return errors.New("clustertest: bytes after the snapshot")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commands = cmds
	f.setIndex(index)
	return nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshot) Release() {}
