//go:build linux

package fuzz

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
)

// replLog is a replicated log inside the process for the "replicated"
// configuration: the runner's DB is member 0, which submits every
// command; each submitted command is applied in log order to all three
// members, as a raft cluster's FSMs apply their log. After every
// instruction the members must hold the leader's state, and a reopen
// rebuilds the cluster from the log: one member restored from the
// leader's snapshot, one replaying every command from nothing, one
// restored from a snapshot and then following the log.
type replLog struct {
	mu      sync.Mutex
	entries [][]byte
	members []*replMember
}

type replMember struct {
	log     *replLog
	db      *engine.DB
	applied int
}

func (m *replMember) Submit(_ context.Context, cmd []byte) (*engine.Applied, error) {
	l := m.log
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, cmd)
	var out *engine.Applied
	for _, o := range l.members {
		for ; o.applied < len(l.entries); o.applied++ {
			if a := o.db.ApplyCommand(l.entries[o.applied]); o == m {
				out = a
			}
		}
	}
	return out, nil
}

func (*replMember) ReadBarrier(context.Context) error { return nil }

// openReplicated opens a three-member log whose member 0 (returned) has
// opts; the others have opts without its tap. entries and snap, if set, are
// the log to follow and a snapshot of it: members 0 and 2 restore the
// snapshot and member 1 replays every entry.
func openReplicated(opts engine.Options, entries [][]byte, snap []byte) (*replLog, error) {
	l := &replLog{entries: entries}
	for i := range 3 {
		o := opts
		if i > 0 {
			enginetest.Tap(&o, nil)
		}
		m := &replMember{log: l}
		db, err := engine.OpenReplicated(o, m)
		if err != nil {
			return nil, err
		}
		m.db = db
		if snap != nil && i != 1 {
			if err := db.Restore(bytes.NewReader(snap)); err != nil {
				return nil, err
			}
			m.applied = len(entries)
		}
		l.members = append(l.members, m)
	}
	for _, m := range l.members {
		for ; m.applied < len(l.entries); m.applied++ {
			if err := m.db.ApplyCommand(l.entries[m.applied]).Err(); isFailure(err) {
				return nil, err
			}
		}
	}
	return l, nil
}

// isFailure tells a replay that broke (the DB stopped) from a refusal,
// which is an answer the first apply gave too.
func isFailure(err error) bool {
	return errors.Is(err, engine.ErrFailed) || errors.Is(err, engine.ErrCorrupt)
}

// check requires every member to hold the leader's state, by hash and byte
// for byte.
func (l *replLog) check(r *runner) {
	r.tb.Helper()
	var want bytes.Buffer
	if err := l.members[0].db.EncodeState(&want); err != nil {
		r.fatalf("replicated leader: %v", err)
	}
	wh, _ := l.members[0].db.StateHash()
	for i, m := range l.members[1:] {
		var got bytes.Buffer
		if err := m.db.EncodeState(&got); err != nil {
			r.fatalf("member %d: %v", i+1, err)
		}
		if h, _ := m.db.StateHash(); h != wh || !bytes.Equal(got.Bytes(), want.Bytes()) {
			r.fatalf("member %d of the replicated log differs from the leader", i+1)
		}
	}
}

// reopen rebuilds the cluster from its log and the leader's snapshot.
func (l *replLog) reopen(r *runner) *replLog {
	r.tb.Helper()
	img, err := l.members[0].db.Image()
	if err != nil {
		r.fatalf("image: %v", err)
	}
	var snap bytes.Buffer
	if _, err := img.WriteTo(&snap); err != nil {
		r.fatalf("snapshot: %v", err)
	}
	l.close()
	nl, err := openReplicated(r.opts, l.entries, snap.Bytes())
	if err != nil {
		r.fatalf("reopen of the replicated log: %v", err)
	}
	nl.check(r)
	return nl
}

func (l *replLog) close() {
	for _, m := range l.members {
		m.db.Close()
	}
}
