package wire

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
)

// Headers of a replicated docket, between the server and the client.
const (
	// LeaderHeader is the response header in which a node that cannot take
	// a call (it is not the leader) names the leader's API URL, so that the
	// client sends the call there.
	LeaderHeader = "Docket-Leader"
	// StaleReadsHeader, on a request, asks a node of a cluster to serve a
	// read from its own state at once instead of confirming with a quorum
	// that it leads (engine.WithStaleReads): any node answers, possibly
	// behind the leader.
	StaleReadsHeader = "Docket-Stale-Reads"
)

// replicationError is the answer to the errors only a replicated DB
// returns, nil for any other. Both come before the sentinels: a write cut
// by a closing node is an unknown outcome that also wraps ErrClosed, and
// must not be answered as a closed DB, which took nothing.
//
//   - engine.ErrOutcomeUnknown: Unavailable with neither a detail nor
//     UnavailableHeader, so a client handles it as a call sent without an
//     answer: it repeats a call whose repeat is harmless and reports an
//     unknown outcome for any other.
//   - engine.ErrNotLeader: Unavailable with UnavailableHeader, since
//     nothing was appended; the server adds LeaderHeader when it knows
//     the leader's URL.
func replicationError(err error) *connect.Error {
	switch {
	case errors.Is(err, engine.ErrOutcomeUnknown):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, engine.ErrNotLeader):
		ce := connect.NewError(connect.CodeUnavailable, err)
		ce.Meta().Set(UnavailableHeader, "not the leader")
		return ce
	}
	return nil
}
