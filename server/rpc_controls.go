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

func (h controlsRPC) Pause(ctx context.Context, req *connect.Request[v1.PauseRequest]) (*connect.Response[v1.PauseResponse], error) {
	return answer(h.s.runPause(ctx, req.Msg))
}

func (s *Server) runPause(ctx context.Context, m *v1.PauseRequest) (*v1.PauseResponse, error) {
	return onQueue(ctx, s, m.GetNamespace(), m.GetQueue(), &v1.PauseResponse{}, func(q engine.Queue) error { return q.Pause(ctx) })
}

func (h controlsRPC) Resume(ctx context.Context, req *connect.Request[v1.ResumeRequest]) (*connect.Response[v1.ResumeResponse], error) {
	return answer(h.s.runResume(ctx, req.Msg))
}

func (s *Server) runResume(ctx context.Context, m *v1.ResumeRequest) (*v1.ResumeResponse, error) {
	return onQueue(ctx, s, m.GetNamespace(), m.GetQueue(), &v1.ResumeResponse{}, func(q engine.Queue) error { return q.Resume(ctx) })
}

func (h controlsRPC) SetLimits(ctx context.Context, req *connect.Request[v1.SetLimitsRequest]) (*connect.Response[v1.SetLimitsResponse], error) {
	return answer(h.s.runSetLimits(ctx, req.Msg))
}

func (s *Server) runSetLimits(ctx context.Context, m *v1.SetLimitsRequest) (*v1.SetLimitsResponse, error) {
	l, err := wire.Limits(m.GetLimits())
	if err != nil {
		return nil, err
	}
	return onQueue(ctx, s, m.GetNamespace(), m.GetQueue(), &v1.SetLimitsResponse{}, func(q engine.Queue) error { return q.SetLimits(ctx, l) })
}

func (h controlsRPC) Settings(ctx context.Context, req *connect.Request[v1.SettingsRequest]) (*connect.Response[v1.SettingsResponse], error) {
	return answer(h.s.runSettings(ctx, req.Msg))
}

func (s *Server) runSettings(ctx context.Context, m *v1.SettingsRequest) (*v1.SettingsResponse, error) {
	out := &v1.SettingsResponse{}
	return onQueue(ctx, s, m.GetNamespace(), m.GetQueue(), out, func(q engine.Queue) error {
		st, err := q.Settings(ctx)
		out.Settings = wire.PBSettings(st)
		return err
	})
}

func (h controlsRPC) Partitions(ctx context.Context, req *connect.Request[v1.PartitionsRequest]) (*connect.Response[v1.PartitionsResponse], error) {
	return answer(h.s.runPartitions(ctx, req.Msg))
}

func (s *Server) runPartitions(ctx context.Context, m *v1.PartitionsRequest) (*v1.PartitionsResponse, error) {
	var out *v1.PartitionsResponse
	_, err := onQueue(ctx, s, m.GetNamespace(), m.GetQueue(), &struct{}{}, func(q engine.Queue) error {
		p, err := q.Partitions(ctx, engine.PartitionListOptions{Limit: int(m.GetLimit()), Cursor: m.GetCursor()})
		if err == nil {
			out = wire.PBPartitions(p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
