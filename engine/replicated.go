package engine

import (
	"context"
	"errors"
	"io"

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/recovery"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/snapshot"
)

// Replicator is the replicated log a DB opened with OpenReplicated commits
// through; package cluster implements it on hashicorp/raft. The DB hands it
// each write as an encoded command, and the log hands every committed
// command, on every node and in log order, to that node's
// DB.ApplyCommand.
type Replicator interface {
	// Submit appends cmd to the log and returns once the entry is
	// committed and applied on this node, with what this node's
	// ApplyCommand returned for it. An error wrapping ErrNotLeader means
	// nothing was appended (the call may go to the leader); one wrapping
	// ErrOutcomeUnknown means the entry was appended but its fate is not
	// known (leadership was lost before it committed).
	Submit(ctx context.Context, cmd []byte) (*Applied, error)
	// ReadBarrier returns nil once a read made on this node after it
	// returns sees every write acknowledged before it was called: this
	// node is the leader, has applied everything committed in earlier
	// terms, and a quorum has just confirmed it. It returns an error
	// wrapping ErrNotLeader otherwise.
	ReadBarrier(ctx context.Context) error
}

// Applied is what applying one command came to on this node: the answer
// the call that submitted it gets. A refusal (ErrLeaseLost, ErrConflict,
// ErrNotFound, ErrInvalid) is an answer too, the same on every node.
type Applied struct {
	res cmdResult
	err error
}

// Err is the command's refusal, nil when it applied.
func (a *Applied) Err() error { return a.err }

// OpenReplicated returns a DB whose state is the replicated log's: every
// write is validated on this node, then submitted to log as a command, and
// planned and applied by each node's ApplyCommand as the log commits it;
// reads are served after log.ReadBarrier unless their context carries
// WithStaleReads. The DB keeps no files: the log, with its snapshots
// (Snapshot, Restore), is what survives a restart. It starts empty.
//
// Options that decide a plan (RetainCompleted, IdempotencyTTL) travel
// with each command from the node that submitted it, so a node configured
// otherwise still applies the same batches; Durability, SyncEvery,
// SnapshotBytes and SegmentBytes are the log's business and are
// ignored. The Observer and Stats of every node count every command the
// node applies, whichever node submitted it.
func OpenReplicated(opts Options, log Replicator) (*DB, error) {
	if log == nil {
		return nil, invalid("OpenReplicated with a nil log")
	}
	return open("", opts, func(c *core) error {
		c.st = replicatedStorage{repl: log}
		c.repl = log
		c.seeds = c.entropy
		// Planning draws entropy from the command being applied, never from
		// this node: every node derives the same lease secrets.
		c.entropy = func() uint64 { return c.applySeed }
		return nil
	})
}

// Replicated reports whether the DB commits through a replicated log.
func (d *DB) Replicated() bool { return d.c.repl != nil }

// submit stamps cmd with this node's clock, entropy and planning options,
// submits it to the log and copies the answer applying it gave into res.
func (c *core) submit(ctx context.Context, cmd *command, res *cmdResult) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if err := c.writable(); err != nil {
		c.mu.Unlock()
		return err
	}
	cmd.Now = c.clock.Now().UnixMicro()
	switch cmd.Args.(type) {
	case *machine.Claim, *machine.CompleteClaim:
		cmd.Seed = c.seeds()
	}
	cmd.Retain, cmd.IdemTTL = c.opts.RetainCompleted.Microseconds(), c.opts.IdempotencyTTL.Microseconds()
	if err := c.admit(cmd); err != nil {
		c.mu.Unlock()
		return err
	}
	c.mu.Unlock()
	// Encoded from a copy: encoding makes what it is given escape, and
	// cmd is on the stack of every commit of a standalone DB too.
	enc := *cmd
	data, err := enc.Encode()
	if err != nil {
		return err
	}
	a, err := c.repl.Submit(ctx, data)
	if err != nil {
		return err
	}
	*res = a.res
	return a.err
}

// claimReplicated is queue.claim on a replicated DB. A ClaimWait parks
// before its claim is submitted, so that a commit applied between the
// claim and the wait still wakes it; prev, the sleeper of its last wait,
// is back to claim at that moment.
func (c *core) claimReplicated(ctx context.Context, cmd *command, wait bool, prev *sleeper) ([]Lease, *sleeper, error) {
	s := prev
	if wait {
		c.mu.Lock()
		if err := c.usable(); err != nil {
			c.mu.Unlock()
			return nil, s, err
		}
		if s != nil {
			c.arrive(s)
		}
		s = c.park(cmd.Key(), 0)
		c.mu.Unlock()
	}
	var res cmdResult
	err := c.submit(ctx, cmd, &res)
	if err == nil && len(res.Leases) == 0 && s != nil {
		c.mu.Lock()
		c.arm(s, res.Due)
		c.mu.Unlock()
	}
	return res.Leases, s, err
}

// ApplyCommand plans and applies data, a command a replicated log
// committed, on this node: under the engine lock, at the time max(the
// command's, the last applied), with the command's entropy, exactly as
// every other node does. It never reads a clock. The answer is for the
// call that submitted the command; a refusal is an answer, not a failure
// of the log. Bytes that are not a command give an ErrCorrupt answer and
// change nothing; a command of a version this build does not know stops
// the DB (ErrFailed), since applying it as something else would diverge.
func (d *DB) ApplyCommand(data []byte) *Applied {
	if err := d.owner("ApplyCommand"); err != nil {
		return &Applied{err: err}
	}
	c := d.c
	if c.repl == nil {
		return &Applied{err: invalid("ApplyCommand is for a DB opened with OpenReplicated: a standalone DB commits through its own log")}
	}
	var cmd command
	derr := decodeCommand(data, &cmd)
	c.mu.Lock()
	if err := c.usable(); err != nil {
		c.mu.Unlock()
		return &Applied{err: err}
	}
	if derr != nil {
		if errors.Is(derr, ErrFailed) {
			derr = c.fail(derr)
		}
		c.mu.Unlock()
		return &Applied{err: derr}
	}
	c.opts.RetainCompleted, c.opts.IdempotencyTTL = micros(cmd.Retain), micros(cmd.IdemTTL)
	c.applySeed = cmd.Seed
	a := &Applied{}
	seq, rep, err := c.step(max(cmd.Now, c.store.Now()), func(p *planner) error { return cmd.Plan(p, &a.res) })
	c.applySeed = 0
	if a.err = err; err == nil {
		a.res.Seq = seq
	}
	c.mu.Unlock()
	c.report(&rep, err)
	return a
}

// Image is a copy-on-write image of a DB's state: taking it pauses commits
// only for the copy, and writing it runs alongside them.
type Image struct{ img *index.Image }

// Image returns an image of the state as of now.
func (d *DB) Image() (*Image, error) {
	if err := d.owner("Image"); err != nil {
		return nil, err
	}
	img, err := d.image()
	if err != nil {
		return nil, err
	}
	return &Image{img: img}, nil
}

// Seq is the sequence number of the last batch the image holds.
func (i *Image) Seq() uint64 { return i.img.Seq }

// WriteTo writes the image to w in docket's snapshot format (package
// snapshot), the records in their fixed order, so that the same state gives
// the same bytes on every node. It returns the bytes written.
func (i *Image) WriteTo(w io.Writer) (int64, error) {
	return snapshot.Encode(w, i.img.Seq, func(sw *snapshot.Writer) error {
		return index.WriteImage(i.img, index.NewEncoder(), sw.Add)
	})
}

// Restore replaces the whole state of a replicated DB with a snapshot read
// from r (what Image.WriteTo wrote), discarding everything it held: a
// replicated log restores a node from its snapshot this way. Parked
// ClaimWait calls wake and look again. On error the state is unchanged.
func (d *DB) Restore(r io.Reader) error {
	if err := d.owner("Restore"); err != nil {
		return err
	}
	c := d.c
	if c.repl == nil {
		return invalid("Restore is for a DB opened with OpenReplicated: a standalone DB restores from its own directory")
	}
	store, err := recovery.LoadSnapshot("snapshot stream", func(fn func([]byte) error) (uint64, error) {
		seq, _, err := snapshot.Decode(r, fn)
		return seq, err
	})
	if err != nil {
		return wrapStorage(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	c.store = store
	c.wakeAll()
	return nil
}

// staleKey marks a context whose reads may be served from this node's state.
type staleKey struct{}

// WithStaleReads returns a context whose reads on a replicated DB are
// served from this node's state at once, without confirming that it is the
// leader: faster, and available on a follower or without a leader, but
// they may miss writes acknowledged elsewhere moments before. Standalone
// DBs ignore it.
func WithStaleReads(ctx context.Context) context.Context {
	return context.WithValue(ctx, staleKey{}, true)
}

// StaleReads reports whether ctx allows stale reads (WithStaleReads).
func StaleReads(ctx context.Context) bool {
	v, _ := ctx.Value(staleKey{}).(bool)
	return v
}

// readBarrier is the hook of every read: on a replicated DB, reads are
// linearizable unless ctx allows stale ones.
func (c *core) readBarrier(ctx context.Context) error {
	return c.st.readBarrier(ctx)
}
