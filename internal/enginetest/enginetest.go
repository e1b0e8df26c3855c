// Package enginetest reaches into package engine for the tests of this
// repository: what they need to watch a DB's commits and to follow its log,
// kept out of engine's public API. Package engine installs the functions
// when it is initialised (engine/export_internal.go), so they are set
// wherever engine is imported; being internal, the package cannot be
// imported from outside this repository.
package enginetest

import (
	"io"

	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vfs"
)

// Tap sets in opts, which must be a *engine.Options, a function that
// receives every batch the DB commits as the bytes the log holds for it
// (also in memory, where nothing is logged), in sequence order, right after
// it is applied; f nil removes it. f runs with the engine's lock held: it
// must be quick, must not call the DB, and must copy data to keep it.
var Tap func(opts any, f func(seq uint64, data []byte))

// FS sets in opts, which must be a *engine.Options, the file system the
// DB's files are on: a vfs.MemFS to crash it in memory, an errorfs to fail
// chosen operations. nil is the operating system's.
var FS func(opts any, fsys vfs.FS)

// Failpoint sets in opts, which must be a *engine.Options, a function
// called at named points of the log and snapshot code (see
// wal.Options.Failpoint and snapshot.Options.Failpoint); a non-nil error
// is treated as an I/O error at that point. Points: "append.write",
// "sync", "sync.after", "segment.create", "truncate", "truncate.back",
// "reset.remove" (log); "write.middle", "sync.before", "rename.before",
// "rename.after", "dirsync.after" (snapshot).
var Failpoint func(opts any, f func(name string) error)

// Check runs engine.Check on the data directory dir of fsys and returns
// the sequence number it recovers to.
var Check func(fsys vfs.FS, dir string) (seq uint64, err error)

// NewReplica returns a Replica of an empty DB.
var NewReplica func() Replica

// Replica is a copy of a DB's state kept by applying the batches the DB
// logs, exactly as logged (fed from Tap, in order): StateHash and
// EncodeState then equal the DB's at the same sequence number. It is not
// safe for concurrent use.
type Replica interface {
	// Apply applies data, the bytes logged for batch seq: applied, or
	// refused as the outcome says. An error (wrapping engine.ErrCorrupt)
	// means the bytes are damaged or do not follow the replica's state;
	// the replica then refuses everything until restored.
	Apply(seq uint64, data []byte) (index.Outcome, error)
	// Seq is the sequence number of the last batch applied.
	Seq() uint64
	// Verify checks every index against the primary records.
	Verify() error
	// StateHash is the SHA-256 of EncodeState's output.
	StateHash() ([32]byte, error)
	// EncodeState writes the state as DB.EncodeState does.
	EncodeState(w io.Writer) error
	// RestoreState replaces the state with one EncodeState wrote; on
	// error the replica is left failed.
	RestoreState(r io.Reader) error
}
