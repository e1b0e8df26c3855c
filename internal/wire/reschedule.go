package wire

import (
	"context"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// Reschedule converts a reschedule request's changes: an unset time or
// priority keeps the task's; a priority int cannot hold is ErrInvalid.
func Reschedule(m *v1.RescheduleRequest) (engine.Reschedule, error) {
	var r engine.Reschedule
	var err error
	if r.At, err = Time("at", m.GetAt()); err != nil {
		return r, err
	}
	if m.Priority != nil {
		p, err := toInt("priority", m.GetPriority())
		if err != nil {
			return r, err
		}
		r.Priority = &p
	}
	return r, nil
}

// ServeReschedule runs a RescheduleRequest on q: its changes are
// converted (Reschedule) before the engine is asked.
func ServeReschedule(ctx context.Context, q engine.Queue, m *v1.RescheduleRequest) (*v1.RescheduleResponse, error) {
	r, err := Reschedule(m)
	if err != nil {
		return nil, err
	}
	if err := q.Reschedule(ctx, m.GetId(), r); err != nil {
		return nil, err
	}
	return &v1.RescheduleResponse{}, nil
}

// PBReschedule is the request that asks for r on task id.
func PBReschedule(ns *v1.Namespace, queue string, id uint64, r engine.Reschedule) *v1.RescheduleRequest {
	m := &v1.RescheduleRequest{Namespace: ns, Queue: queue, Id: id, At: PBTime(r.At)}
	if r.Priority != nil {
		p := int64(*r.Priority)
		m.Priority = &p
	}
	return m
}
