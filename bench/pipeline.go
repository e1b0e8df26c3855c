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

// Pipeliner is a Driver whose one producer can have many enqueues in
// flight: EnqueueAsync starts one and returns without waiting for it to be
// durable (docket's EnqueueAsync, JetStream's PublishAsync); the Awaiter
// waits for that. W1P needs one.
type Pipeliner interface {
	EnqueueAsync(ctx context.Context, payload []byte) Awaiter
}

// Awaiter waits for one enqueue a Pipeliner started.
type Awaiter interface {
	Wait(ctx context.Context) error
}

// pendingAwaiter waits for docket's Pending.
type pendingAwaiter struct{ p *engine.Pending }

func (a pendingAwaiter) Wait(ctx context.Context) error {
	_, err := a.p.Wait(ctx)
	return err
}

// EnqueueAsync is the engine's, or the client's against a server.
func (d *docketDriver) EnqueueAsync(ctx context.Context, payload []byte) Awaiter {
	return pendingAwaiter{d.q.EnqueueAsync(ctx, engine.Task{Payload: payload})}
}

// runW1P is W1 pipelined in process: one producer, one task per commit,
// with up to cfg.InFlight commits in flight (EnqueueAsync, its
// back-pressure set to the same bound).
func runW1P(ctx context.Context, cfg Config, dir string, r *Result) error {
	d, err := openDocket(cfg, dir, func(o *engine.Options) { o.MaxInFlight = cfg.InFlight })
	if err != nil {
		return err
	}
	err = pipelined(ctx, cfg, d, d, r)
	return errors.Join(err, d.Close())
}

// pipelined is W1P on p: one producer keeps up to cfg.InFlight enqueues
// in flight. Each call's latency runs from the call until Wait returns
// its acknowledgement, the oldest first. counted is the queue whose
// counters the window reads.
func pipelined(ctx context.Context, cfg Config, p Pipeliner, counted any, r *Result) error {
	prog := startProgress(cfg.Progress, cfg.progressEvery, label(cfg), "tasks enqueued")
	defer prog.end()
	payload := makePayload(cfg.PayloadBytes, 0)
	type call struct {
		a  Awaiter
		at time.Time
	}
	ring := make([]call, cfg.InFlight)
	head, n := 0, 0
	h := new(hist)
	settle := func() error {
		c := &ring[head]
		err := c.a.Wait(ctx)
		h.record(time.Since(c.at))
		*c = call{}
		head = (head + 1) % len(ring)
		n--
		if err == nil {
			prog.done.Add(1)
		}
		return err
	}
	w := openWindow(counted)
	start := time.Now()
	for i := 0; i < cfg.N; i++ {
		if n == len(ring) {
			if err := settle(); err != nil {
				return err
			}
		}
		at := time.Now()
		ring[(head+n)%len(ring)] = call{a: p.EnqueueAsync(ctx, payload), at: at}
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
	r.Producers = 1
	r.Latency = h.percentiles()
	return nil
}
