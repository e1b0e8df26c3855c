package wire

import (
	"context"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// The plain calls of a queue on a task id, or on the whole queue: the
// server's side (Serve<Method>: the request to the engine's call and its
// answer) and the client's (PB<Method>: the call's arguments to the request,
// <Method>Result: the answer to the call's result). The handlers and client
// methods around them are written by `go generate ./proto/...`.

// ServeCancel runs a CancelRequest on q.
func ServeCancel(ctx context.Context, q engine.Queue, m *v1.CancelRequest) (*v1.CancelResponse, error) {
	if err := q.Cancel(ctx, m.GetId()); err != nil {
		return nil, err
	}
	return &v1.CancelResponse{}, nil
}

// PBCancel is the request that cancels task id.
func PBCancel(ns *v1.Namespace, queue string, id uint64) *v1.CancelRequest {
	return &v1.CancelRequest{Namespace: ns, Queue: queue, Id: id}
}

// ServeRedrive runs a RedriveRequest on q.
func ServeRedrive(ctx context.Context, q engine.Queue, m *v1.RedriveRequest) (*v1.RedriveResponse, error) {
	if err := q.Redrive(ctx, m.GetId()); err != nil {
		return nil, err
	}
	return &v1.RedriveResponse{}, nil
}

// PBRedrive is the request that redrives task id.
func PBRedrive(ns *v1.Namespace, queue string, id uint64) *v1.RedriveRequest {
	return &v1.RedriveRequest{Namespace: ns, Queue: queue, Id: id}
}

// ServeRedriveAll runs a RedriveAllRequest on q.
func ServeRedriveAll(ctx context.Context, q engine.Queue, m *v1.RedriveAllRequest) (*v1.RedriveAllResponse, error) {
	n, err := q.RedriveAll(ctx)
	if err != nil {
		return nil, err
	}
	return &v1.RedriveAllResponse{Count: int64(n)}, nil
}

// PBRedriveAll is the request that redrives every dead task of the queue.
func PBRedriveAll(ns *v1.Namespace, queue string) *v1.RedriveAllRequest {
	return &v1.RedriveAllRequest{Namespace: ns, Queue: queue}
}

// RedriveAllResult is how many tasks a RedriveAll redrove.
func RedriveAllResult(m *v1.RedriveAllResponse) int { return int(m.GetCount()) }

// ServeRunNow runs a RunNowRequest on q.
func ServeRunNow(ctx context.Context, q engine.Queue, m *v1.RunNowRequest) (*v1.RunNowResponse, error) {
	if err := q.RunNow(ctx, m.GetId()); err != nil {
		return nil, err
	}
	return &v1.RunNowResponse{}, nil
}

// PBRunNow is the request that makes task id due now.
func PBRunNow(ns *v1.Namespace, queue string, id uint64) *v1.RunNowRequest {
	return &v1.RunNowRequest{Namespace: ns, Queue: queue, Id: id}
}
