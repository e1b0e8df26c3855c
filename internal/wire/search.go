package wire

import (
	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// Filter converts a search filter; the engine validates what it says.
func Filter(pb *v1.Filter) (engine.Filter, error) {
	f := engine.Filter{Kind: pb.GetKind(), Error: pb.GetError(), Partition: pb.GetPartition(),
		HeaderKey: pb.GetHeaderKey(), HeaderValue: pb.GetHeaderValue(), MinID: pb.GetMinId(), MaxID: pb.GetMaxId()}
	if n := len(pb.GetStates()); n > 0 {
		if n > 8 {
			return f, Invalid("filter of %d states", n)
		}
		f.States = make([]engine.State, n)
		for i, st := range pb.GetStates() {
			if st <= 0 || st > 255 {
				return f, Invalid("filter state %d", st)
			}
			f.States[i] = engine.State(st)
		}
	}
	if r := pb.GetRetrying(); r < 0 || r > 255 {
		return f, Invalid("filter retrying %d", r)
	} else {
		f.Retrying = engine.Retrying(r)
	}
	var err error
	if f.EnqueuedSince, err = Time("filter enqueued_since", pb.GetEnqueuedSince()); err != nil {
		return f, err
	}
	if f.EnqueuedBefore, err = Time("filter enqueued_before", pb.GetEnqueuedBefore()); err != nil {
		return f, err
	}
	return f, nil
}

// PBFilter converts a search filter.
func PBFilter(f engine.Filter) *v1.Filter {
	pb := &v1.Filter{Retrying: v1.Retrying(f.Retrying), Kind: f.Kind, Error: f.Error, Partition: f.Partition,
		HeaderKey: f.HeaderKey, HeaderValue: f.HeaderValue, MinId: f.MinID, MaxId: f.MaxID,
		EnqueuedSince: PBTime(f.EnqueuedSince), EnqueuedBefore: PBTime(f.EnqueuedBefore)}
	for _, st := range f.States {
		pb.States = append(pb.States, v1.State(st))
	}
	return pb
}

// BulkAction converts a bulk action; the engine refuses one it does not
// know.
func BulkAction(a v1.BulkAction) engine.BulkAction {
	if a < 0 || a > 255 {
		return 0
	}
	return engine.BulkAction(a)
}

// PBBulkResult converts what a bulk action did.
func PBBulkResult(r engine.BulkResult) *v1.BulkResponse {
	out := &v1.BulkResponse{Done: int64(r.Done)}
	for _, s := range r.Skipped {
		out.Skipped = append(out.Skipped, &v1.BulkSkip{Reason: s.Reason, Count: int64(s.Count)})
	}
	return out
}

// BulkResult converts what a bulk action did, as the server sent it.
func BulkResult(pb *v1.BulkResponse) engine.BulkResult {
	r := engine.BulkResult{Done: int(pb.GetDone())}
	for _, s := range pb.GetSkipped() {
		r.Skipped = append(r.Skipped, engine.BulkSkip{Reason: s.GetReason(), Count: int(s.GetCount())})
	}
	return r
}
