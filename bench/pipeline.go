package bench

import (
	"context"
	"errors"
	"time"

	"github.com/docketdb/docket/engine"
)

// CompleteClaimer is a Driver that can acknowledge a job and claim the
// next ones in one commit. The drain and steady-state workloads use it for
// claims of one job, unless Config.SplitCommits.
type CompleteClaimer[J any] interface {
	// CompleteAndClaim acknowledges j and claims up to max jobs, without
	// waiting for one.
	CompleteAndClaim(ctx context.Context, j *J, max int) ([]J, error)
}

func (d *docketDriver) CompleteAndClaim(ctx context.Context, l *engine.Lease, max int) ([]engine.Lease, error) {
	_, ls, err := d.wq.CompleteAndClaim(ctx, *l, engine.Done{}, "bench", lease, max)
	return ls, err
}

// completeClaimer returns d as a CompleteClaimer when the run may use one.
func completeClaimer[J any](cfg Config, d Driver[J]) (CompleteClaimer[J], bool) {
	if cfg.SplitCommits || cfg.ClaimBatch != 1 {
		return nil, false
	}
	cc, ok := d.(CompleteClaimer[J])
	return cc, ok
}

// runW1P is W1 pipelined: one producer, one task per commit, with up to
// cfg.InFlight commits in flight (EnqueueAsync, its back-pressure set to
// the same bound). Each call's latency runs from the call until Wait
// returns its acknowledgement, the oldest first.
func runW1P(ctx context.Context, cfg Config, dir string, r *Result) error {
	d, err := openDocket(cfg, dir, func(o *engine.Options) { o.MaxInFlight = cfg.InFlight })
	if err != nil {
		return err
	}
	err = pipelined(ctx, cfg, d, r)
	return errors.Join(err, d.Close())
}

func pipelined(ctx context.Context, cfg Config, d *docketDriver, r *Result) error {
	prog := startProgress(cfg.Progress, label(cfg), "tasks enqueued")
	defer prog.end()
	payload := makePayload(cfg.PayloadBytes, 0)
	type call struct {
		p  *engine.Pending
		at time.Time
	}
	ring := make([]call, cfg.InFlight)
	head, n := 0, 0
	h := new(hist)
	settle := func() error {
		c := &ring[head]
		_, err := c.p.Wait(ctx)
		h.record(time.Since(c.at))
		*c = call{}
		head = (head + 1) % len(ring)
		n--
		if err == nil {
			prog.done.Add(1)
		}
		return err
	}
	w := openWindow(d)
	start := time.Now()
	for i := 0; i < cfg.N; i++ {
		if n == len(ring) {
			if err := settle(); err != nil {
				return err
			}
		}
		at := time.Now()
		ring[(head+n)%len(ring)] = call{p: d.q.EnqueueAsync(ctx, engine.Task{Payload: payload}), at: at}
		n++
	}
	for n > 0 {
		if err := settle(); err != nil {
			return err
		}
	}
	r.Elapsed = time.Since(start)
	w.close(r)
	r.Tasks = prog.done.Load()
	r.Calls = int64(cfg.N)
	r.Latency = h.percentiles()
	return nil
}
