package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// controlsRPC serves the queue controls: the engine checks the caller's
// permissions (admin to change, read to look) as in process.
type controlsRPC struct{ s *Server }

var _ docketv1connect.ControlsHandler = controlsRPC{}

// onQueue runs fn on the queue a request names.
func (h controlsRPC) onQueue(ctx context.Context, ns *v1.Namespace, name string, fn func(engine.Queue) error) error {
	q, err := h.s.queue(ctx, ns, name)
	if err == nil {
		err = fn(q)
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

func (h controlsRPC) Pause(ctx context.Context, req *connect.Request[v1.PauseRequest]) (*connect.Response[v1.PauseResponse], error) {
	m := req.Msg
	if err := h.onQueue(ctx, m.GetNamespace(), m.GetQueue(), func(q engine.Queue) error { return q.Pause(ctx) }); err != nil {
		return nil, err
	}
	return reply(&v1.PauseResponse{})
}

func (h controlsRPC) Resume(ctx context.Context, req *connect.Request[v1.ResumeRequest]) (*connect.Response[v1.ResumeResponse], error) {
	m := req.Msg
	if err := h.onQueue(ctx, m.GetNamespace(), m.GetQueue(), func(q engine.Queue) error { return q.Resume(ctx) }); err != nil {
		return nil, err
	}
	return reply(&v1.ResumeResponse{})
}

func (h controlsRPC) SetLimits(ctx context.Context, req *connect.Request[v1.SetLimitsRequest]) (*connect.Response[v1.SetLimitsResponse], error) {
	m := req.Msg
	l, err := wire.Limits(m.GetLimits())
	if err != nil {
		return nil, fail(err)
	}
	if err := h.onQueue(ctx, m.GetNamespace(), m.GetQueue(), func(q engine.Queue) error { return q.SetLimits(ctx, l) }); err != nil {
		return nil, err
	}
	return reply(&v1.SetLimitsResponse{})
}

func (h controlsRPC) Settings(ctx context.Context, req *connect.Request[v1.SettingsRequest]) (*connect.Response[v1.SettingsResponse], error) {
	m := req.Msg
	var s engine.QueueSettings
	err := h.onQueue(ctx, m.GetNamespace(), m.GetQueue(), func(q engine.Queue) (err error) {
		s, err = q.Settings(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return reply(&v1.SettingsResponse{Settings: wire.PBSettings(s)})
}

func (h controlsRPC) Partitions(ctx context.Context, req *connect.Request[v1.PartitionsRequest]) (*connect.Response[v1.PartitionsResponse], error) {
	m := req.Msg
	var p engine.PartitionPage
	err := h.onQueue(ctx, m.GetNamespace(), m.GetQueue(), func(q engine.Queue) (err error) {
		p, err = q.Partitions(ctx, engine.PartitionListOptions{Limit: int(m.GetLimit()), Cursor: m.GetCursor()})
		return err
	})
	if err != nil {
		return nil, err
	}
	return reply(wire.PBPartitions(p))
}
