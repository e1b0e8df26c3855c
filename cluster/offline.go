package cluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/flock"
	"github.com/docketdb/docket/internal/snapshot"
	"github.com/docketdb/docket/wal"
	"github.com/hashicorp/raft"
)

// A node's directory, as Start lays it out:
//
//	LOCK                  held by the running node (flock)
//	raft/log/             the raft log, on docket's wal (LogStore)
//	raft/stable           current term and vote (StableStore)
//	raft/snapshots/NAME/  raft's snapshot store: meta.json (index, term,
//	                      configuration, size, CRC-64 of state.bin) and
//	                      state.bin, the FSM's state in docket's snapshot
//	                      format
//
// Check and OpenReadOnly read it without changing a byte.

// IsNodeDir reports whether dir is a cluster node's data directory (it holds
// a raft directory), as opposed to a standalone docket directory.
func IsNodeDir(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "raft"))
	return err == nil && st.IsDir()
}

// NodeSnapshot is what Check found in one of a node's snapshots.
type NodeSnapshot struct {
	Name         string // its directory under raft/snapshots
	Path         string // its state file
	Index, Term  uint64 // the last raft entry it covers
	Size         int64
	Seq          uint64 // the docket batch it holds the state after
	Records      int
	Tasks        int
	Members      []string // the cluster configuration it records
	Err          error    // nil if it restores
	restoredInto *engine.DB
}

// NodeReport is what Check found in a node's directory.
type NodeReport struct {
	Dir string
	// Stable store: raft's current term and last vote. StableMissing is
	// set when the file does not exist (a node that never voted).
	Term          uint64
	VoteTerm      uint64
	Vote          string
	StableMissing bool
	StableErr     error
	// Snapshots lists the snapshots newest first, as raft tries them.
	Snapshots []NodeSnapshot
	// Log is what the check of the raft log's wal found; LogErr is damage
	// in it (framing, checksums, an entry that does not decode, a gap),
	// naming the file and the offset or entry.
	Log    wal.CheckReport
	LogErr error
	// FirstIndex..LastIndex are the entries the log holds, LastTerm the
	// newest one's term.
	FirstIndex, LastIndex, LastTerm uint64
	// Restored names the snapshot recovery starts from ("" for none) and
	// SnapshotIndex the entry it covers; Applied is how many command
	// entries after it the log holds, Refused how many of those were
	// answered with a refusal (an outcome, not damage).
	Restored      string
	SnapshotIndex uint64
	Applied       int
	Refused       int
	// NotCommands counts command entries whose bytes are not a docket
	// command: the node answers them with ErrCorrupt and applies nothing,
	// as every node does, but a correct leader never writes one.
	NotCommands int
	// Members is the newest cluster configuration, from the log or the
	// snapshot.
	Members []string
	// StateErr is a state that does not hold together after the replay.
	StateErr error
	// The state as of the log's last entry.
	Tasks, Queues int
}

// Err returns the first damage the report holds that keeps the node from
// starting or from recovering its state, nil if none does.
func (r *NodeReport) Err() error {
	if r.StableErr != nil {
		return r.StableErr
	}
	if r.LogErr != nil {
		return r.LogErr
	}
	if r.Restored == "" && len(r.Snapshots) > 0 {
		return fmt.Errorf("%w: %s: none of the %d snapshots restores, and raft refuses to start without one", engine.ErrCorrupt,
			filepath.Join(r.Dir, "raft", "snapshots"), len(r.Snapshots))
	}
	return r.StateErr
}

// Print writes the report for a person.
func (r *NodeReport) Print(w io.Writer) {
	fmt.Fprintf(w, "cluster node directory %s\n", r.Dir)
	switch {
	case r.StableErr != nil:
		fmt.Fprintf(w, "stable store: BAD: %s\n", r.StableErr)
	case r.StableMissing:
		fmt.Fprintf(w, "stable store: none yet (the node never voted nor saw a term)\n")
	default:
		fmt.Fprintf(w, "stable store: current term %d", r.Term)
		if r.Vote != "" {
			fmt.Fprintf(w, ", voted for %s in term %d", r.Vote, r.VoteTerm)
		}
		fmt.Fprintln(w, ": ok")
	}
	for _, s := range r.Snapshots {
		status := "ok"
		if s.Err != nil {
			status = "BAD: " + s.Err.Error()
		}
		fmt.Fprintf(w, "snapshot %s: raft index %d, term %d, %d bytes, docket batch %d, %d records, %d tasks: %s\n",
			s.Name, s.Index, s.Term, s.Size, s.Seq, s.Records, s.Tasks, status)
	}
	l := r.Log
	fmt.Fprintf(w, "raft log: %d segments, %d entries", l.Segments, l.Records)
	if r.LastIndex >= r.FirstIndex && r.LastIndex > 0 {
		fmt.Fprintf(w, " (%d..%d, last term %d)", r.FirstIndex, r.LastIndex, r.LastTerm)
	}
	fmt.Fprintf(w, ", %d bytes\n", l.Bytes)
	if l.Torn != nil {
		fmt.Fprintf(w, "raft log: torn tail in %s at offset %d (%d bytes): %s; the node cuts it when it starts\n",
			l.Torn.File, l.Torn.Offset, l.Torn.Size, l.Torn.Reason)
	}
	if r.LogErr != nil {
		fmt.Fprintf(w, "raft log: BAD: %s\n", r.LogErr)
	}
	if len(r.Members) > 0 {
		fmt.Fprintf(w, "members: %s\n", strings.Join(r.Members, ", "))
	}
	switch {
	case r.Restored != "":
		fmt.Fprintf(w, "recovery restores snapshot %s (raft index %d) and applies the %d commands after it in the log\n",
			r.Restored, r.SnapshotIndex, r.Applied)
	case len(r.Snapshots) > 0:
		fmt.Fprintf(w, "recovery: no snapshot restores, and the node would not start (the log alone replays %d commands)\n", r.Applied)
	default:
		fmt.Fprintf(w, "recovery starts from an empty state and applies the %d commands of the log\n", r.Applied)
	}
	if r.StateErr != nil {
		fmt.Fprintf(w, "state: BAD: %s\n", r.StateErr)
	} else if r.LogErr == nil {
		fmt.Fprintf(w, "state as of raft index %d: %d tasks in %d queues (entries after the last commit this node saw may yet be replaced by the leader's)\n",
			max(r.LastIndex, r.SnapshotIndex), r.Tasks, r.Queues)
	}
	if r.Refused > 0 {
		fmt.Fprintf(w, "%d commands of the log were refused when applied (their callers were told so; not damage)\n", r.Refused)
	}
	if r.NotCommands > 0 {
		fmt.Fprintf(w, "WARNING: %d command entries of the log are not docket commands (each node applies nothing for them)\n", r.NotCommands)
	}
}

// Check verifies a node's directory offline, changing nothing: the stable
// store (its checksum), every snapshot (raft's CRC and size, docket's
// snapshot format, and its state, restored and checked), and the raft log
// (the wal's framing and checksums, each entry's encoding, index and term,
// that it continues the snapshot), then replays the log's commands over the
// newest snapshot that restores, as the node's recovery does, and checks the
// state's indexes. It returns the report and its Err: an error wrapping
// engine.ErrCorrupt when the node would refuse to start or the state does
// not recover. It takes the directory's lock shared, so it fails with
// engine.ErrLocked while a node runs on it (and a node cannot start while it
// runs).
func Check(dir string) (*NodeReport, error) {
	lock, err := lockShared(dir)
	if err != nil {
		return nil, err
	}
	if lock != nil {
		defer unlock(lock)
	}
	rep := &NodeReport{Dir: dir}
	db, err := recoverNode(dir, engine.Options{}, rep, true)
	if err != nil {
		return rep, err
	}
	db.Close()
	return rep, rep.Err()
}

// ReadOnly is a node's state, recovered offline by OpenReadOnly: an
// engine.API whose reads see the state as of the log's last entry and whose
// writes fail with engine.ErrReadOnly.
type ReadOnly struct {
	*engine.DB
	lock   *os.File
	Report *NodeReport
}

// Close closes the DB and releases the directory's lock.
func (r *ReadOnly) Close() error {
	err := r.DB.Close()
	if r.lock != nil {
		unlock(r.lock)
	}
	return err
}

// OpenReadOnly recovers the state of the node directory dir as the node
// would (the newest snapshot that restores, then every command of the log
// after it) without changing a byte of it, for reading while the node is
// down. Damage Check would report is refused with an error wrapping
// engine.ErrCorrupt; a directory a node runs on, with engine.ErrLocked. opts
// are the engine's options (a Logger); Close releases the lock.
func OpenReadOnly(dir string, opts engine.Options) (*ReadOnly, error) {
	if !IsNodeDir(dir) {
		return nil, fmt.Errorf("%w: %s is not a cluster node's directory (it has no raft directory)", engine.ErrInvalid, dir)
	}
	lock, err := lockShared(dir)
	if err != nil {
		return nil, err
	}
	rep := &NodeReport{Dir: dir}
	db, err := recoverNode(dir, opts, rep, false)
	if err == nil {
		if err = rep.Err(); err != nil {
			db.Close()
		}
	}
	if err != nil {
		if lock != nil {
			unlock(lock)
		}
		return nil, err
	}
	return &ReadOnly{DB: db, lock: lock, Report: rep}, nil
}

// lockShared takes the node directory's lock shared, nil if there is no lock
// file (no node ever ran there).
func lockShared(dir string) (*os.File, error) {
	if !IsNodeDir(dir) {
		if _, err := os.Stat(dir); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s is not a cluster node's directory (it has no raft directory)", engine.ErrInvalid, dir)
	}
	f, err := os.Open(filepath.Join(dir, "LOCK"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := flock.Shared(f); err != nil {
		f.Close()
		if errors.Is(err, flock.ErrHeld) {
			return nil, fmt.Errorf("%w: %s", engine.ErrLocked, dir)
		}
		return nil, err
	}
	return f, nil
}

// unlock releases the lock f holds and closes it. The lock is released
// first: a child process started at that moment (os/exec, until it runs
// its program) holds a copy of f's descriptor, and with it the lock, so a
// Close alone could leave the directory locked for a moment.
func unlock(f *os.File) error {
	flock.Unlock(f)
	return f.Close()
}

// offlineLog is the Replicator of a state recovered offline: nothing can be
// submitted, and reads need no leader.
type offlineLog struct{}

func (offlineLog) Submit(context.Context, []byte) (*engine.Applied, error) {
	return nil, fmt.Errorf("%w: a cluster node's directory opened offline", engine.ErrReadOnly)
}

func (offlineLog) ReadBarrier(context.Context) error { return nil }

func newOfflineDB(opts engine.Options) (*engine.DB, error) {
	return engine.OpenReplicated(opts, offlineLog{})
}

// fileSnapshotMeta is raft's meta.json (FileSnapshotStore).
type fileSnapshotMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

// recoverNode fills rep and returns the recovered state. Damage goes into
// rep (see NodeReport.Err); the error is for what is not damage (a missing
// directory, a permission). allSnaps restores every snapshot, not only the
// one recovery starts from, to check each.
func recoverNode(dir string, opts engine.Options, rep *NodeReport, allSnaps bool) (*engine.DB, error) {
	raftDir := filepath.Join(dir, "raft")
	if err := checkStable(filepath.Join(raftDir, "stable"), rep); err != nil {
		return nil, err
	}
	if err := listSnapshots(filepath.Join(raftDir, "snapshots"), rep); err != nil {
		return nil, err
	}
	var db *engine.DB
	for i := range rep.Snapshots {
		s := &rep.Snapshots[i]
		if s.Err != nil || (db != nil && !allSnaps) {
			continue
		}
		sdb, err := restoreSnapshot(s, opts)
		if err != nil {
			return nil, err
		}
		if s.Err != nil {
			continue
		}
		if db == nil {
			db, rep.Restored, rep.SnapshotIndex, rep.Members = sdb, s.Name, s.Index, s.Members
		} else {
			sdb.Close()
		}
	}
	if db == nil {
		var err error
		if db, err = newOfflineDB(opts); err != nil {
			return nil, err
		}
	}
	if err := replayLog(filepath.Join(raftDir, "log"), db, rep); err != nil {
		db.Close()
		return nil, err
	}
	if rep.LogErr == nil {
		if err := db.Verify(); err != nil {
			rep.StateErr = fmt.Errorf("%w: the state after the log's replay: %w", engine.ErrCorrupt, err)
		}
		rep.Tasks = db.Stats().Tasks
		if qs, err := db.Queues(context.Background()); err == nil {
			rep.Queues = len(qs)
		}
	}
	return db, nil
}

func checkStable(path string, rep *NodeReport) error {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		rep.StableMissing = true
		return nil
	case err != nil:
		return err
	}
	kv, err := decodeStable(b)
	if err != nil {
		rep.StableErr = fmt.Errorf("%w: %s: %w", engine.ErrCorrupt, path, err)
		return nil
	}
	u64 := func(key string) (uint64, error) {
		v, ok := kv[key]
		if !ok {
			return 0, nil
		}
		if len(v) != 8 {
			return 0, fmt.Errorf("%w: %s: %s holds %d bytes, not a uint64", engine.ErrCorrupt, path, key, len(v))
		}
		return binary.LittleEndian.Uint64(v), nil
	}
	if rep.Term, err = u64("CurrentTerm"); err == nil {
		rep.VoteTerm, err = u64("LastVoteTerm")
	}
	rep.StableErr = err
	rep.Vote = string(kv["LastVoteCand"])
	return nil
}

// listSnapshots reads the meta.json of every snapshot and checks each
// state file's size and CRC, newest first as raft lists them. A snapshot
// raft would skip (a temporary one) is not listed.
func listSnapshots(dir string, rep *NodeReport) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		s := NodeSnapshot{Name: e.Name(), Path: filepath.Join(dir, e.Name(), "state.bin")}
		metaPath := filepath.Join(dir, e.Name(), "meta.json")
		var meta fileSnapshotMeta
		if b, err := os.ReadFile(metaPath); err != nil {
			s.Err = fmt.Errorf("%w: %s: %w", engine.ErrCorrupt, metaPath, err)
		} else if err := json.Unmarshal(b, &meta); err != nil {
			s.Err = fmt.Errorf("%w: %s: %w", engine.ErrCorrupt, metaPath, err)
		} else if meta.Version < raft.SnapshotVersionMin || meta.Version > raft.SnapshotVersionMax {
			s.Err = fmt.Errorf("%w: %s: snapshot version %d unknown", engine.ErrCorrupt, metaPath, meta.Version)
		}
		s.Index, s.Term, s.Size = meta.Index, meta.Term, meta.Size
		for _, m := range meta.Configuration.Servers {
			s.Members = append(s.Members, fmt.Sprintf("%s=%s (%s)", m.ID, m.Address, m.Suffrage))
		}
		if s.Err == nil {
			s.Err = checkState(s.Path, meta)
		}
		rep.Snapshots = append(rep.Snapshots, s)
	}
	slices.SortFunc(rep.Snapshots, func(a, b NodeSnapshot) int {
		return -cmp.Or(cmp.Compare(a.Term, b.Term), cmp.Compare(a.Index, b.Index), strings.Compare(a.Name, b.Name))
	})
	return nil
}

// checkState checks a state file against its meta: size and CRC-64, as raft
// checks it when it opens the snapshot.
func checkState(path string, meta fileSnapshotMeta) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", engine.ErrCorrupt, path, err)
	}
	defer f.Close()
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if n != meta.Size {
		return fmt.Errorf("%w: %s: %d bytes, meta.json says %d", engine.ErrCorrupt, path, n, meta.Size)
	}
	if !bytes.Equal(h.Sum(nil), meta.CRC) {
		return fmt.Errorf("%w: %s: CRC-64 %x, meta.json says %x", engine.ErrCorrupt, path, h.Sum(nil), meta.CRC)
	}
	return nil
}

// restoreSnapshot reads s's state file in docket's snapshot format (damage
// is reported with its offset) and restores it into a new offline DB, whose
// indexes it checks. Damage goes into s.Err and gives a nil DB.
func restoreSnapshot(s *NodeSnapshot, opts engine.Options) (*engine.DB, error) {
	seq, n, err := snapshot.Read(s.Path, nil)
	if err != nil {
		if errors.Is(err, snapshot.ErrCorrupt) {
			s.Err = fmt.Errorf("%w: %w", engine.ErrCorrupt, err)
			return nil, nil
		}
		return nil, err
	}
	s.Seq, s.Records = seq, n
	db, err := newOfflineDB(opts)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(s.Path)
	if err != nil {
		db.Close()
		return nil, err
	}
	err = db.Restore(f)
	f.Close()
	if err == nil {
		err = db.Verify()
	}
	if err != nil {
		db.Close()
		s.Err = fmt.Errorf("%w: %s: the state does not restore: %w", engine.ErrCorrupt, s.Path, err)
		return nil, nil
	}
	s.Tasks = db.Stats().Tasks
	return db, nil
}

// replayLog checks the raft log and applies its commands after the
// restored snapshot to db.
func replayLog(dir string, db *engine.DB, rep *NodeReport) error {
	lrep, err := wal.Check(dir)
	rep.Log = lrep
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // a node that never stored an entry
	case errors.Is(err, wal.ErrCorrupt):
		rep.LogErr = fmt.Errorf("%w: raft log: %w", engine.ErrCorrupt, err)
		return nil
	case err != nil:
		return err
	}
	if lrep.Records == 0 {
		return nil
	}
	rep.FirstIndex, rep.LastIndex = lrep.FirstSeq, lrep.LastSeq
	if from := rep.SnapshotIndex + 1; lrep.FirstSeq > from {
		rep.LogErr = fmt.Errorf("%w: raft log %s starts at entry %d, but recovery needs it from %d (entries %d..%d are missing)",
			engine.ErrCorrupt, dir, lrep.FirstSeq, from, from, lrep.FirstSeq-1)
		return nil
	}
	var e raft.Log
	var prevTerm uint64
	err = wal.Scan(dir, 0, func(seq uint64, data []byte) error {
		if err := decodeEntry(data, &e); err != nil {
			return err
		}
		if e.Index != seq {
			return fmt.Errorf("%w: the record holds entry %d", errEntry, e.Index)
		}
		if e.Term < prevTerm {
			return fmt.Errorf("%w: term %d after term %d", errEntry, e.Term, prevTerm)
		}
		prevTerm = e.Term
		rep.LastTerm = e.Term
		if e.Type == raft.LogConfiguration {
			if m, ok := decodeMembers(e.Data); ok {
				rep.Members = m
			} else {
				return fmt.Errorf("%w: a configuration entry that does not decode", errEntry)
			}
		}
		if seq <= rep.SnapshotIndex || e.Type != raft.LogCommand {
			return nil
		}
		rep.Applied++
		a := db.ApplyCommand(e.Data)
		if err := a.Err(); err != nil {
			switch {
			case errors.Is(err, engine.ErrFailed):
				return fmt.Errorf("%w: applying it: %w", errEntry, err)
			case errors.Is(err, engine.ErrCorrupt):
				rep.NotCommands++
			default:
				rep.Refused++
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, wal.ErrCorrupt):
		rep.LogErr = fmt.Errorf("%w: raft log: %w", engine.ErrCorrupt, err)
	case err != nil:
		return err
	case rep.StableMissing && rep.LastTerm > 0:
		rep.StableErr = fmt.Errorf("%w: %s is missing, but the log holds entries of term %d: the node would forget its term and vote",
			engine.ErrCorrupt, filepath.Join(filepath.Dir(dir), "stable"), rep.LastTerm)
	case rep.StableErr == nil && rep.Term < rep.LastTerm:
		rep.StableErr = fmt.Errorf("%w: %s: current term %d is behind the log's last term %d", engine.ErrCorrupt,
			filepath.Join(filepath.Dir(dir), "stable"), rep.Term, rep.LastTerm)
	}
	return nil
}

// decodeMembers decodes a configuration entry; raft's decoder panics on bad
// input.
func decodeMembers(data []byte) (members []string, ok bool) {
	defer func() {
		if recover() != nil {
			members, ok = nil, false
		}
	}()
	conf := raft.DecodeConfiguration(data)
	for _, m := range conf.Servers {
		members = append(members, fmt.Sprintf("%s=%s (%s)", m.ID, m.Address, m.Suffrage))
	}
	return members, true
}
