// Package machine is the engine's state machine: given the state (an
// index.Store and the few options planning reads), a command and a time,
// it plans the batch to log and the command's result. It takes no lock,
// starts no goroutine, reads no clock and does no I/O: the engine (the
// shell) holds the lock, builds commands from API calls, admits them
// against the memory budget and quotas, logs and applies the batches,
// wakes waiters and keeps the data durable.
//
// The same state, command and time give the same batch on every node,
// which is what lets a replicated log plan its commands on each.
package machine

import (
	"fmt"
	"time"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// State is what planning reads: the state, and the options a batch
// depends on. A replicated log carries the options with each command.
type State struct {
	Store *index.Store
	// Retain is Options.RetainCompleted and IdemTTL
	// Options.IdempotencyTTL, in microseconds.
	Retain, IdemTTL int64
	// Entropy draws the seed of a batch's lease secrets, never 0; it is
	// called at most once per batch, only by a batch that leases.
	Entropy func() uint64
}

// Tiny helpers the engine has too.

func idxNS(n dockettype.Namespace) index.Namespace {
	return index.Namespace{Project: n.Project, Scope: n.Scope}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{dockettype.ErrInvalid}, args...)...)
}

// timeOf is the time of us microseconds since the epoch, in UTC; the zero
// time for 0.
func timeOf(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// clone copies b (nil for an empty b).
func clone(b []byte) []byte { return validate.Clone(b) }
