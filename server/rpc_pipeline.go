package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// pipelineRPC serves the Pipeline service: the queue calls that do several
// steps in one commit.
type pipelineRPC struct{ s *Server }

var _ docketv1connect.PipelineHandler = pipelineRPC{}

func (h pipelineRPC) CompleteAndClaim(ctx context.Context, req *connect.Request[v1.CompleteAndClaimRequest]) (*connect.Response[v1.CompleteAndClaimResponse], error) {
	return answer(h.s.runCompleteAndClaim(ctx, req.Msg))
}

// runCompleteAndClaim runs a CompleteAndClaim call (alone, or an item of
// CompleteAndClaimEach).
func (s *Server) runCompleteAndClaim(ctx context.Context, m *v1.CompleteAndClaimRequest) (*v1.CompleteAndClaimResponse, error) {
	l, d, a, err := decodeCompleteAndClaim(m)
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	res, ls, err := q.CompleteAndClaim(ctx, l, d, a.owner, a.lease, a.max)
	if err != nil {
		return nil, err
	}
	return &v1.CompleteAndClaimResponse{Result: wire.PBTxResult(res), Leases: wire.PBLeases(ls)}, nil
}

func (h pipelineRPC) HeartbeatBatch(ctx context.Context, req *connect.Request[v1.HeartbeatBatchRequest]) (*connect.Response[v1.HeartbeatBatchResponse], error) {
	return answer(h.s.runHeartbeatBatch(ctx, req.Msg))
}

func (s *Server) runHeartbeatBatch(ctx context.Context, m *v1.HeartbeatBatchRequest) (*v1.HeartbeatBatchResponse, error) {
	extend, err := wire.Duration("extend", m.GetExtend())
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	refs := m.GetLeases()
	ls := make([]engine.Lease, len(refs))
	ptrs := make([]*engine.Lease, len(refs))
	for i, r := range refs {
		ls[i] = wire.LeaseRef(r)
		ptrs[i] = &ls[i]
	}
	errs, err := q.HeartbeatBatch(ctx, ptrs, extend)
	if err != nil {
		return nil, err
	}
	out := &v1.HeartbeatBatchResponse{Errors: make([]*v1.Error, len(errs))}
	for i, e := range errs {
		out.Errors[i] = wire.PBError(e)
		if e == nil && out.Deadline == nil {
			out.Deadline = wire.PBTime(ls[i].Deadline)
		}
	}
	return out, nil
}
