package server

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// presenceRPC serves engine.Presence: the engine checks the caller's
// permissions (work to report, read to list, admin to control a
// schedule) as in process.
type presenceRPC struct{ s *Server }

var _ docketv1connect.PresenceHandler = presenceRPC{}

// presence runs fn on the call's view of the engine.
func (h presenceRPC) presence(ctx context.Context, fn func(engine.Presence) error) error {
	api, err := h.s.api(ctx)
	if err == nil {
		p, ok := api.(engine.Presence)
		if !ok {
			err = fmt.Errorf("%w: this server keeps no worker presence", engine.ErrInvalid)
		} else {
			err = fn(p)
		}
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

func (h presenceRPC) ReportWorker(ctx context.Context, req *connect.Request[v1.ReportWorkerRequest]) (*connect.Response[v1.ReportWorkerResponse], error) {
	m := req.Msg
	p, err := wire.Worker(m.GetWorker())
	if err != nil {
		return nil, fail(err)
	}
	ttl, err := wire.Duration("ttl", m.GetTtl())
	if err != nil {
		return nil, fail(err)
	}
	if err := h.presence(ctx, func(api engine.Presence) error {
		return api.ReportWorker(ctx, wire.Namespace(m.GetNamespace()), p, ttl)
	}); err != nil {
		return nil, err
	}
	return reply(&v1.ReportWorkerResponse{})
}

func (h presenceRPC) RemoveWorker(ctx context.Context, req *connect.Request[v1.RemoveWorkerRequest]) (*connect.Response[v1.RemoveWorkerResponse], error) {
	m := req.Msg
	if err := h.presence(ctx, func(api engine.Presence) error {
		return api.RemoveWorker(ctx, wire.Namespace(m.GetNamespace()), m.GetId())
	}); err != nil {
		return nil, err
	}
	return reply(&v1.RemoveWorkerResponse{})
}

func (h presenceRPC) Workers(ctx context.Context, req *connect.Request[v1.WorkersRequest]) (*connect.Response[v1.WorkersResponse], error) {
	var ws []engine.WorkerPresence
	if err := h.presence(ctx, func(api engine.Presence) (err error) {
		ws, err = api.Workers(ctx, wire.Namespace(req.Msg.GetNamespace()))
		return err
	}); err != nil {
		return nil, err
	}
	res := &v1.WorkersResponse{}
	for _, w := range ws {
		res.Workers = append(res.Workers, wire.PBWorker(w))
	}
	return reply(res)
}

func (h presenceRPC) ReportSchedule(ctx context.Context, req *connect.Request[v1.ReportScheduleRequest]) (*connect.Response[v1.ReportScheduleResponse], error) {
	m := req.Msg
	s, err := wire.Schedule(m.GetSchedule())
	if err != nil {
		return nil, fail(err)
	}
	ttl, err := wire.Duration("ttl", m.GetTtl())
	if err != nil {
		return nil, fail(err)
	}
	if err := h.presence(ctx, func(api engine.Presence) error {
		return api.ReportSchedule(ctx, wire.Namespace(m.GetNamespace()), s, ttl)
	}); err != nil {
		return nil, err
	}
	return reply(&v1.ReportScheduleResponse{})
}

func (h presenceRPC) Schedules(ctx context.Context, req *connect.Request[v1.SchedulesRequest]) (*connect.Response[v1.SchedulesResponse], error) {
	var ss []engine.ScheduleInfo
	if err := h.presence(ctx, func(api engine.Presence) (err error) {
		ss, err = api.Schedules(ctx, wire.Namespace(req.Msg.GetNamespace()))
		return err
	}); err != nil {
		return nil, err
	}
	res := &v1.SchedulesResponse{}
	for _, s := range ss {
		res.Schedules = append(res.Schedules, wire.PBSchedule(s))
	}
	return reply(res)
}

// control serves the three control calls of one schedule.
func (h presenceRPC) control(ctx context.Context, m *v1.ScheduleRequest,
	fn func(engine.Presence, context.Context, engine.Namespace, string, string) error) (*connect.Response[v1.ScheduleResponse], error) {
	if err := h.presence(ctx, func(api engine.Presence) error {
		return fn(api, ctx, wire.Namespace(m.GetNamespace()), m.GetQueue(), m.GetName())
	}); err != nil {
		return nil, err
	}
	return reply(&v1.ScheduleResponse{})
}

func (h presenceRPC) PauseSchedule(ctx context.Context, req *connect.Request[v1.ScheduleRequest]) (*connect.Response[v1.ScheduleResponse], error) {
	return h.control(ctx, req.Msg, engine.Presence.PauseSchedule)
}

func (h presenceRPC) ResumeSchedule(ctx context.Context, req *connect.Request[v1.ScheduleRequest]) (*connect.Response[v1.ScheduleResponse], error) {
	return h.control(ctx, req.Msg, engine.Presence.ResumeSchedule)
}

func (h presenceRPC) RunSchedule(ctx context.Context, req *connect.Request[v1.ScheduleRequest]) (*connect.Response[v1.ScheduleResponse], error) {
	return h.control(ctx, req.Msg, engine.Presence.RunSchedule)
}
