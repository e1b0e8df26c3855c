package client

import (
	"context"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

func controlsOf(s *stubs) docketv1connect.ControlsClient { return s.controls }

// Pause is repeated after a lost answer: pausing a paused queue changes
// nothing.
func (q *queue) Pause(ctx context.Context) error {
	_, err := invoke(ctx, q.c, true, opPause, controlsOf, docketv1connect.ControlsClient.Pause,
		&v1.PauseRequest{Namespace: q.pb, Queue: q.name})
	return err
}

// Resume is repeated after a lost answer, as Pause.
func (q *queue) Resume(ctx context.Context) error {
	_, err := invoke(ctx, q.c, true, opResume, controlsOf, docketv1connect.ControlsClient.Resume,
		&v1.ResumeRequest{Namespace: q.pb, Queue: q.name})
	return err
}

// SetLimits is repeated after a lost answer: setting the limits a queue
// has changes nothing (its rate limiter's bucket included).
func (q *queue) SetLimits(ctx context.Context, l engine.Limits) error {
	_, err := invoke(ctx, q.c, true, opSetLimits, controlsOf, docketv1connect.ControlsClient.SetLimits,
		&v1.SetLimitsRequest{Namespace: q.pb, Queue: q.name, Limits: wire.PBLimits(l)})
	return err
}

// Settings returns the queue's pause state and limits.
func (q *queue) Settings(ctx context.Context) (engine.QueueSettings, error) {
	res, err := invoke(ctx, q.c, true, opSettings, controlsOf, docketv1connect.ControlsClient.Settings,
		&v1.SettingsRequest{Namespace: q.pb, Queue: q.name})
	if err != nil {
		return engine.QueueSettings{}, err
	}
	return wire.Settings(res.Settings), nil
}

// Partitions returns a page of the queue's partitions.
func (q *queue) Partitions(ctx context.Context, o engine.PartitionListOptions) (engine.PartitionPage, error) {
	res, err := invoke(ctx, q.c, true, opPartitions, controlsOf, docketv1connect.ControlsClient.Partitions,
		&v1.PartitionsRequest{Namespace: q.pb, Queue: q.name, Limit: wire.Int32(o.Limit), Cursor: o.Cursor})
	if err != nil {
		return engine.PartitionPage{}, err
	}
	return wire.Partitions(res), nil
}
