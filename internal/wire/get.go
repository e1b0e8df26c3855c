package wire

import (
	"context"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// ServeGet runs a GetRequest on q.
func ServeGet(ctx context.Context, q engine.Queue, m *v1.GetRequest) (*v1.GetResponse, error) {
	t, err := q.Get(ctx, m.GetId())
	if err != nil {
		return nil, err
	}
	return &v1.GetResponse{Task: PBTaskInfo(t)}, nil
}

// PBGet is the request that reads task id.
func PBGet(ns *v1.Namespace, queue string, id uint64) *v1.GetRequest {
	return &v1.GetRequest{Namespace: ns, Queue: queue, Id: id}
}

// GetResult is the task a Get answered.
func GetResult(m *v1.GetResponse) engine.TaskInfo { return TaskInfo(m.GetTask()) }
