package client

import (
	"context"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

var _ engine.Presence = (*Client)(nil)

func presenceOf(s *stubs) docketv1connect.PresenceClient { return s.presence }

// ReportWorker is repeated after a lost answer: a report replaces the last
// one.
func (c *Client) ReportWorker(ctx context.Context, ns engine.Namespace, p engine.WorkerPresence, ttl time.Duration) error {
	_, err := invoke(ctx, c, true, noSession[v1.ReportWorkerRequest, v1.ReportWorkerResponse](), presenceOf, docketv1connect.PresenceClient.ReportWorker,
		&v1.ReportWorkerRequest{Namespace: wire.PBNamespace(ns), Worker: wire.PBWorker(p), Ttl: wire.PBDuration(ttl)})
	return err
}

// RemoveWorker is repeated after a lost answer: removing what is gone
// changes nothing.
func (c *Client) RemoveWorker(ctx context.Context, ns engine.Namespace, id string) error {
	_, err := invoke(ctx, c, true, noSession[v1.RemoveWorkerRequest, v1.RemoveWorkerResponse](), presenceOf, docketv1connect.PresenceClient.RemoveWorker,
		&v1.RemoveWorkerRequest{Namespace: wire.PBNamespace(ns), Id: id})
	return err
}

// Workers lists the live worker processes of ns.
func (c *Client) Workers(ctx context.Context, ns engine.Namespace) ([]engine.WorkerPresence, error) {
	res, err := invoke(ctx, c, true, noSession[v1.WorkersRequest, v1.WorkersResponse](), presenceOf, docketv1connect.PresenceClient.Workers,
		&v1.WorkersRequest{Namespace: wire.PBNamespace(ns)})
	if err != nil {
		return nil, err
	}
	out := make([]engine.WorkerPresence, 0, len(res.Workers))
	for _, pb := range res.Workers {
		p, err := wire.Worker(pb)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// ReportSchedule is repeated after a lost answer, as ReportWorker.
func (c *Client) ReportSchedule(ctx context.Context, ns engine.Namespace, s engine.ScheduleInfo, ttl time.Duration) error {
	_, err := invoke(ctx, c, true, noSession[v1.ReportScheduleRequest, v1.ReportScheduleResponse](), presenceOf, docketv1connect.PresenceClient.ReportSchedule,
		&v1.ReportScheduleRequest{Namespace: wire.PBNamespace(ns), Schedule: wire.PBSchedule(s), Ttl: wire.PBDuration(ttl)})
	return err
}

// Schedules lists the live periodic schedules of ns.
func (c *Client) Schedules(ctx context.Context, ns engine.Namespace) ([]engine.ScheduleInfo, error) {
	res, err := invoke(ctx, c, true, noSession[v1.SchedulesRequest, v1.SchedulesResponse](), presenceOf, docketv1connect.PresenceClient.Schedules,
		&v1.SchedulesRequest{Namespace: wire.PBNamespace(ns)})
	if err != nil {
		return nil, err
	}
	out := make([]engine.ScheduleInfo, 0, len(res.Schedules))
	for _, pb := range res.Schedules {
		s, err := wire.Schedule(pb)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// PauseSchedule is repeated after a lost answer: pausing a paused schedule
// changes nothing.
func (c *Client) PauseSchedule(ctx context.Context, ns engine.Namespace, queue, name string) error {
	_, err := invoke(ctx, c, true, noSession[v1.ScheduleRequest, v1.ScheduleResponse](), presenceOf, docketv1connect.PresenceClient.PauseSchedule,
		&v1.ScheduleRequest{Namespace: wire.PBNamespace(ns), Queue: queue, Name: name})
	return err
}

// ResumeSchedule is repeated after a lost answer, as PauseSchedule.
func (c *Client) ResumeSchedule(ctx context.Context, ns engine.Namespace, queue, name string) error {
	_, err := invoke(ctx, c, true, noSession[v1.ScheduleRequest, v1.ScheduleResponse](), presenceOf, docketv1connect.PresenceClient.ResumeSchedule,
		&v1.ScheduleRequest{Namespace: wire.PBNamespace(ns), Queue: queue, Name: name})
	return err
}

// RunSchedule is not repeated after a lost answer (the runtime may have
// taken the request in between, and a repeat would run the schedule
// twice): that is ErrOutcomeUnknown.
func (c *Client) RunSchedule(ctx context.Context, ns engine.Namespace, queue, name string) error {
	_, err := invoke(ctx, c, false, noSession[v1.ScheduleRequest, v1.ScheduleResponse](), presenceOf, docketv1connect.PresenceClient.RunSchedule,
		&v1.ScheduleRequest{Namespace: wire.PBNamespace(ns), Queue: queue, Name: name})
	return err
}
