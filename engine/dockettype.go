package engine

import "github.com/docketdb/docket/internal/index"

// The value types, sentinel errors, constants and helpers of package
// dockettype are engine's under the same names (dockettype_gen.go).
//go:generate go run ../internal/gen aliases -src ../dockettype -o dockettype_gen.go

// idxNS is the index's name of namespace n.
func idxNS(n Namespace) index.Namespace { return index.Namespace{Project: n.Project, Scope: n.Scope} }

// The states are the index's.
const _ = uint(Ready-State(index.StateReady)) + uint(State(index.StateReady)-Ready) +
	uint(Scheduled-State(index.StateScheduled)) + uint(State(index.StateScheduled)-Scheduled) +
	uint(InFlight-State(index.StateInFlight)) + uint(State(index.StateInFlight)-InFlight) +
	uint(Dead-State(index.StateDead)) + uint(State(index.StateDead)-Dead) +
	uint(Completed-State(index.StateCompleted)) + uint(State(index.StateCompleted)-Completed) +
	uint(Waiting-State(index.StateWaiting)) + uint(State(index.StateWaiting)-Waiting)
