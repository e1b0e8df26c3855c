package server

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// The decoders turn a request into the engine's arguments. What the wire
// format allows and Go types cannot hold (a malformed duration, an empty
// op) is refused here with ErrInvalid; everything else is the engine's to
// check, so that a remote call and an in-process one are refused alike.

func decodeEnqueue(m *v1.EnqueueRequest) (engine.Task, []engine.Op, error) {
	t, err := wire.Task(m.GetTask())
	if err != nil {
		return t, nil, err
	}
	ops, err := wire.Ops(m.GetOps())
	return t, ops, err
}

func decodeEnqueueBatch(m *v1.EnqueueBatchRequest) ([]engine.Task, []engine.Op, error) {
	ts, err := wire.Tasks(m.GetTasks())
	if err != nil {
		return nil, nil, err
	}
	ops, err := wire.Ops(m.GetOps())
	return ts, ops, err
}

type claimArgs struct {
	owner string
	lease time.Duration
	max   int
}

func decodeClaim(owner string, lease *durationpb.Duration, max int32) (claimArgs, error) {
	d, err := wire.Duration("lease", lease)
	return claimArgs{owner: owner, lease: d, max: int(max)}, err
}

func decodeClaimWait(m *v1.ClaimWaitRequest) (claimArgs, time.Duration, error) {
	a, err := decodeClaim(m.GetOwner(), m.GetLease(), m.GetMax())
	if err != nil {
		return a, 0, err
	}
	wait, err := wire.Duration("max wait", m.GetMaxWait())
	if err == nil && wait < 0 {
		err = wire.Invalid("max wait is negative (%v)", wait)
	}
	return a, wait, err
}

func decodeComplete(m *v1.CompleteRequest) (engine.Lease, engine.Done, error) {
	d, err := wire.Done(m.GetDone())
	return wire.LeaseRef(m.GetLease()), d, err
}

func decodeCompleteAndClaim(m *v1.CompleteAndClaimRequest) (engine.Lease, engine.Done, claimArgs, error) {
	d, err := wire.Done(m.GetDone())
	if err != nil {
		return engine.Lease{}, d, claimArgs{}, err
	}
	a, err := decodeClaim(m.GetOwner(), m.GetClaimLease(), m.GetMax())
	return wire.LeaseRef(m.GetLease()), d, a, err
}

func decodeCompleteBatch(m *v1.CompleteBatchRequest) []engine.Lease {
	ls := make([]engine.Lease, len(m.GetLeases()))
	for i, l := range m.GetLeases() {
		ls[i] = wire.LeaseRef(l)
	}
	return ls
}

func decodeFail(m *v1.FailRequest) (engine.Lease, engine.Failure, error) {
	f, err := wire.Failure(m.GetFailure())
	return wire.LeaseRef(m.GetLease()), f, err
}

func decodeHeartbeat(m *v1.HeartbeatRequest) (engine.Lease, time.Duration, []byte, error) {
	d, err := wire.Duration("extend", m.GetExtend())
	return wire.LeaseRef(m.GetLease()), d, m.Progress, err
}

func decodeSnooze(m *v1.SnoozeRequest) (engine.Lease, time.Duration, error) {
	d, err := wire.Duration("snooze", m.GetDelay())
	return wire.LeaseRef(m.GetLease()), d, err
}

func decodeList(m *v1.ListRequest) engine.ListOptions {
	st := m.GetState()
	if st < 0 || st > 255 {
		st = 0 // no state: the engine refuses it, where a cast would wrap into one
	}
	return engine.ListOptions{State: engine.State(st), Limit: int(m.GetLimit()), Cursor: m.GetCursor()}
}

func decodeScan(m *v1.KVScanRequest) engine.ScanOptions {
	return engine.ScanOptions{Prefix: m.GetPrefix(), Start: m.GetStart(), End: m.GetEnd(), Limit: int(m.GetLimit())}
}

func decodeCommit(m *v1.KVCommitRequest) ([]engine.Op, error) { return wire.Ops(m.GetOps()) }
