package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docketdb/docket/engine"
)

// Run runs one workload against docket and returns what it measured.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults(Workloads)
	if err != nil {
		return Result{}, err
	}
	switch cfg.Workload {
	case "W1P":
		if cfg.Remote {
			return RunDriver(ctx, remoteSystem(cfg), cfg, Docket)
		}
		return runWithDir(ctx, "docket", cfg, runW1P)
	case "W7":
		system := "docket"
		if cfg.Remote {
			system = remoteSystem(cfg)
		}
		return runWithDir(ctx, system, cfg, runW7)
	case "W8":
		return runWithDir(ctx, "docket", cfg, runW8)
	case "W9":
		return runWithDir(ctx, "docket", cfg, runW9)
	case "W10":
		return runWithDir(ctx, "docket", cfg, runW10)
	case "WF":
		return runWithDir(ctx, "docket", cfg, runWF)
	}
	system := "docket"
	if cfg.Remote {
		system = remoteSystem(cfg)
	}
	return RunDriver(ctx, system, cfg, Docket)
}

// RunDriver runs one of DriverWorkloads, or W1P where the queue is a
// Pipeliner, against the queue open makes, reporting it as system.
func RunDriver[J any](ctx context.Context, system string, cfg Config, open Opener[J]) (Result, error) {
	cfg, err := cfg.withDefaults(append(slices.Clip(DriverWorkloads), "W1P"))
	if err != nil {
		return Result{}, err
	}
	return runWithDir(ctx, system, cfg, func(ctx context.Context, cfg Config, dir string, r *Result) error {
		d, err := open(ctx, cfg, dir)
		if err != nil {
			return err
		}
		switch cfg.Workload {
		case "W1P":
			if p, ok := any(d).(Pipeliner); ok {
				err = pipelined(ctx, cfg, p, d, r)
			} else {
				err = fmt.Errorf("W1P needs a queue that pipelines its enqueues (bench.Pipeliner): %w", engine.ErrInvalid)
			}
		case "W1", "W2", "W3":
			err = runEnqueue(ctx, cfg, d, r)
		case "W4", "W5":
			err = runDrain(ctx, cfg, d, r)
		default:
			err = runSteady(ctx, cfg, d, r)
		}
		return errors.Join(err, d.Close())
	})
}

// runWithDir gives fn a fresh data directory and fills in what every
// result has.
func runWithDir(ctx context.Context, system string, cfg Config, fn func(context.Context, Config, string, *Result) error) (Result, error) {
	r := Result{System: system, Workload: cfg.Workload, Mode: cfg.Mode()}
	if system != "docket" && system != Remote && system != RemoteSingle && system != Serve && r.Mode != "memory" {
		r.Mode = map[bool]string{true: "durable", false: "nosync"}[cfg.Durability == 0]
	}
	dir, err := os.MkdirTemp(cfg.Dir, "docket-bench-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	// Hand the memory of earlier runs back to the OS first, or the peak
	// would start from what they left resident.
	debug.FreeOSMemory()
	resetPeakRSS()
	if err := fn(ctx, cfg, dir, &r); err != nil {
		return r, fmt.Errorf("bench: %s %s %s: %w", system, cfg.Workload, r.Mode, err)
	}
	r.PeakRSS = peakRSS()
	r.finish()
	return r, nil
}

func label(cfg Config) string { return cfg.Workload + " " + cfg.Mode() }

// runEnqueue is W1 (one producer, one task per commit), W2 (many
// producers) and W3 (one producer, EnqueueBatchSize tasks per commit).
func runEnqueue[J any](ctx context.Context, cfg Config, d Driver[J], r *Result) error {
	batch := 1
	if cfg.Workload == "W3" {
		batch = EnqueueBatchSize
	}
	calls := int64((cfg.N + batch - 1) / batch)
	payload := makePayload(cfg.PayloadBytes, 0)
	prog := startProgress(cfg.Progress, cfg.progressEvery, label(cfg), "tasks enqueued")
	defer prog.end()
	var next atomic.Int64
	kind := callEnqueue
	if batch > 1 {
		kind = callEnqueueBatch
	}
	hs := make([]*callHists, cfg.Producers)
	errs := make([]error, cfg.Producers)
	w := openWindow(d)
	start := time.Now()
	var wg sync.WaitGroup
	for p := range cfg.Producers {
		hs[p] = new(callHists)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hs[p]
			payloads := make([][]byte, batch)
			for i := range payloads {
				payloads[i] = payload
			}
			for {
				i := next.Add(1) - 1
				if i >= calls {
					return
				}
				n := min(batch, cfg.N-int(i)*batch)
				t := time.Now()
				var err error
				if batch == 1 {
					err = d.Enqueue(ctx, payload)
				} else {
					err = d.EnqueueBatch(ctx, payloads[:n])
				}
				h.record(kind, time.Since(t))
				if err != nil {
					errs[p] = err
					return
				}
				prog.done.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	w.close(r)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.Tasks = prog.done.Load()
	r.Calls = calls
	r.Producers = cfg.Producers
	r.Latency, r.PerCall = summarize(hs)
	return nil
}

// fill enqueues n tasks in big commits, as the unmeasured start of a
// workload.
func fill[J any](ctx context.Context, d Driver[J], n, size int, prog *progress) error {
	payload := makePayload(size, 0)
	payloads := make([][]byte, setupBatch)
	for i := range payloads {
		payloads[i] = payload
	}
	for done := 0; done < n; {
		k := min(setupBatch, n-done)
		if err := d.EnqueueBatch(ctx, payloads[:k]); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		done += k
		if done%100_000 < k {
			prog.say("setup: %d of %d tasks enqueued", done, n)
		}
	}
	return nil
}

// runDrain is W4 and W5: workers drain N tasks enqueued beforehand, each
// looping Claim(ClaimBatch) and a Complete per task.
func runDrain[J any](ctx context.Context, cfg Config, d Driver[J], r *Result) error {
	prog := startProgress(cfg.Progress, cfg.progressEvery, label(cfg), "tasks completed")
	defer prog.end()
	if err := fill(ctx, d, cfg.N, cfg.PayloadBytes, prog); err != nil {
		return err
	}
	runtime.GC()
	var claimed, calls atomic.Int64
	hs := make([]*callHists, cfg.Workers)
	errs := make([]error, cfg.Workers)
	total := int64(cfg.N)
	w := openWindow(d)
	start := time.Now()
	cc, oneCommit := completeClaimer(cfg, d)
	var wg sync.WaitGroup
	for k := range cfg.Workers {
		hs[k] = new(callHists)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hs[k]
			n := int64(0)
			defer func() { calls.Add(n) }()
			var next []J // claimed by the last completion
			for len(next) > 0 || claimed.Load() < total {
				js := next
				next = nil
				if len(js) == 0 {
					t := time.Now()
					var err error
					js, err = d.Claim(ctx, cfg.ClaimBatch, false)
					h.record(callClaim, time.Since(t))
					n++
					if err != nil {
						errs[k] = fmt.Errorf("claim: %w", err)
						return
					}
					if len(js) == 0 {
						// The rest is leased to other workers, or (for a
						// peer) not yet visible: look again shortly.
						time.Sleep(50 * time.Microsecond)
						continue
					}
				}
				claimed.Add(int64(len(js)))
				if oneCommit && len(js) == 1 {
					// The completion claims the next task.
					t := time.Now()
					var err error
					next, err = cc.CompleteAndClaim(ctx, &js[0], 1)
					h.record(callCompleteClaim, time.Since(t))
					n++
					if err != nil {
						errs[k] = fmt.Errorf("complete and claim: %w", err)
						return
					}
					prog.done.Add(1)
					continue
				}
				if bc, ok := d.(BatchCompleter[J]); ok && len(js) > 1 {
					t := time.Now()
					err := bc.CompleteBatch(ctx, js)
					h.record(callCompleteBatch, time.Since(t))
					n++
					if err != nil {
						errs[k] = fmt.Errorf("complete batch: %w", err)
						return
					}
					prog.done.Add(int64(len(js)))
					continue
				}
				for i := range js {
					t := time.Now()
					err := d.Complete(ctx, &js[i])
					h.record(callComplete, time.Since(t))
					n++
					if err != nil {
						errs[k] = fmt.Errorf("complete: %w", err)
						return
					}
					prog.done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	w.close(r)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.Tasks = prog.done.Load()
	r.Calls = calls.Load()
	r.Latency, r.PerCall = summarize(hs)
	switch {
	case r.Tasks < total:
		return fmt.Errorf("completed %d tasks, want %d", r.Tasks, total)
	case r.Tasks > total && r.System == "docket":
		// docket never leases a task twice.
		return fmt.Errorf("completed %d tasks, want %d: a task was leased twice", r.Tasks, total)
	case r.Tasks > total:
		// An at-least-once peer delivered some message twice: count each
		// task once, and report the extra deliveries.
		r.Redelivered = r.Tasks - total
		r.Tasks = total
	}
	return nil
}

// maxInFlightSends bounds W6R's concurrent enqueues: when the queue falls
// this far behind, the pacers wait and the run reports it did not keep up.
const maxInFlightSends = 4096

// runSteady is W6 (unthrottled producers) and W6R (producers paced to
// OfferedRate) with workers that block in Claim, for Duration or until N
// tasks have completed.
func runSteady[J any](ctx context.Context, cfg Config, d Driver[J], r *Result) error {
	paced := cfg.Workload == "W6R"
	prog := startProgress(cfg.Progress, cfg.progressEvery, label(cfg), "tasks completed")
	defer prog.end()

	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	var stopped atomic.Bool
	var stopOnce sync.Once
	var enqAtStop, doneAtStop int64
	var stopAt time.Time
	var enqueued, calls, errCount atomic.Int64
	var firstErr atomic.Pointer[error]
	var halt func()
	fail := func(err error) {
		if stopped.Load() && (errors.Is(err, context.Canceled) || stopCtx.Err() != nil) {
			return // a call cut short by the end of the run
		}
		errCount.Add(1)
		firstErr.CompareAndSwap(nil, &err)
		halt()
	}
	halt = func() {
		stopOnce.Do(func() {
			// The counts before the time: what they count happened by
			// stopAt, so that Enqueued is at most what the schedule had
			// due by the end of Elapsed, however late this runs.
			enqAtStop, doneAtStop = enqueued.Load(), prog.done.Load()
			stopAt = time.Now()
			stopped.Store(true)
			stop()
		})
	}

	w := openWindow(d)
	start := time.Now()
	timer := time.AfterFunc(cfg.Duration, halt)
	defer timer.Stop()

	var sendHists lockedHists
	var prodWG, sendWG, workWG sync.WaitGroup
	prodHists := make([]*callHists, cfg.Producers)
	for p := range cfg.Producers {
		prodHists[p] = new(callHists)
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			if paced {
				pace(cfg, p, start, &stopped, func(release func()) {
					sendWG.Add(1)
					go func() {
						defer sendWG.Done()
						defer release()
						// Counted before the call: a worker may complete
						// the task before the call returns.
						enqueued.Add(1)
						t := time.Now()
						err := d.Enqueue(ctx, makePayload(cfg.PayloadBytes, t.UnixNano()))
						sendHists.record(callEnqueue, time.Since(t))
						calls.Add(1)
						if err != nil {
							fail(fmt.Errorf("enqueue: %w", err))
						}
					}()
				})
				return
			}
			h := prodHists[p]
			payload := makePayload(cfg.PayloadBytes, 0)
			for !stopped.Load() {
				enqueued.Add(1) // before the call, as above
				t := time.Now()
				err := d.Enqueue(ctx, payload)
				h.record(callEnqueue, time.Since(t))
				calls.Add(1)
				if err != nil {
					fail(fmt.Errorf("enqueue: %w", err))
					return
				}
			}
		}()
	}

	workHists := make([]*callHists, cfg.Workers)
	e2eHists := make([]*hist, cfg.Workers)
	limit := int64(cfg.N)
	cc, oneCommit := completeClaimer(cfg, d)
	for k := range cfg.Workers {
		workHists[k], e2eHists[k] = new(callHists), new(hist)
		workWG.Add(1)
		go func() {
			defer workWG.Done()
			h, e2e := workHists[k], e2eHists[k]
			var next []J // claimed by the last completion
			for len(next) > 0 || !stopped.Load() {
				js := next
				next = nil
				if len(js) == 0 {
					var err error
					if js, err = d.Claim(stopCtx, cfg.ClaimBatch, true); err != nil {
						fail(fmt.Errorf("claim: %w", err))
						return
					}
					// A blocking claim's time is mostly waiting for work,
					// not the queue's service time: it is counted but not
					// timed.
					calls.Add(1)
				}
				if oneCommit && len(js) == 1 && !stopped.Load() {
					// The completion claims the next task, if one is due.
					stamp := stampOf(d.Payload(&js[0]))
					t := time.Now()
					var err error
					next, err = cc.CompleteAndClaim(ctx, &js[0], 1)
					now := time.Now()
					h.record(callCompleteClaim, now.Sub(t))
					calls.Add(1)
					if err != nil {
						fail(fmt.Errorf("complete and claim: %w", err))
						return
					}
					if stamp > 0 {
						e2e.record(time.Duration(now.UnixNano() - stamp))
					}
					if n := prog.done.Add(1); limit > 0 && n >= limit {
						halt()
					}
					continue
				}
				if bc, ok := d.(BatchCompleter[J]); ok && len(js) > 1 {
					t := time.Now()
					err := bc.CompleteBatch(ctx, js)
					now := time.Now()
					h.record(callCompleteBatch, now.Sub(t))
					calls.Add(1)
					if err != nil {
						fail(fmt.Errorf("complete batch: %w", err))
						return
					}
					for i := range js {
						if stamp := stampOf(d.Payload(&js[i])); stamp > 0 {
							e2e.record(time.Duration(now.UnixNano() - stamp))
						}
					}
					if n := prog.done.Add(int64(len(js))); limit > 0 && n >= limit {
						halt()
					}
					continue
				}
				for i := range js {
					stamp := stampOf(d.Payload(&js[i]))
					t := time.Now()
					// The run's end does not cut a completion short: a
					// claimed task is always acknowledged.
					err := d.Complete(ctx, &js[i])
					now := time.Now()
					h.record(callComplete, now.Sub(t))
					calls.Add(1)
					if err != nil {
						fail(fmt.Errorf("complete: %w", err))
						return
					}
					if stamp > 0 {
						e2e.record(time.Duration(now.UnixNano() - stamp))
					}
					if n := prog.done.Add(1); limit > 0 && n >= limit {
						halt()
					}
				}
			}
		}()
	}

	<-stopCtx.Done()
	halt()
	prodWG.Wait()
	sendWG.Wait()
	workWG.Wait()
	w.close(r)
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("%d errors, the first: %w", errCount.Load(), *p)
	}
	r.Elapsed = stopAt.Sub(start)
	r.Tasks = doneAtStop
	r.Enqueued = enqAtStop
	r.Backlog = max(enqAtStop-doneAtStop, 0)
	r.Calls = calls.Load()
	r.Latency, r.PerCall = summarize(append(append(prodHists, workHists...), &sendHists.h))
	if paced {
		p := mergeAll(e2eHists).percentiles()
		r.EndToEnd = &p
		r.OfferedRate = cfg.OfferedRate
		r.KeptUp = float64(r.Tasks) >= 0.95*float64(cfg.OfferedRate)*r.Elapsed.Seconds()
	}
	return nil
}

// pace calls send on producer p's share of the schedule: with P producers
// at a total rate R, producer p's k-th send is due at start + (k*P+p)/R.
// A late pacer sends at once to catch up, and send never blocks on the
// queue, so the offered load does not drop when the queue slows down (no
// coordinated omission) unless maxInFlightSends are outstanding.
func pace(cfg Config, p int, start time.Time, stopped *atomic.Bool, send func(release func())) {
	sem := make(chan struct{}, maxInFlightSends/cfg.Producers+1)
	release := func() { <-sem }
	interval := time.Duration(float64(time.Second) * float64(cfg.Producers) / float64(cfg.OfferedRate))
	offset := time.Duration(float64(time.Second) * float64(p) / float64(cfg.OfferedRate))
	for k := 0; !stopped.Load(); k++ {
		due := start.Add(offset + time.Duration(k)*interval)
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
			if stopped.Load() {
				return
			}
		}
		sem <- struct{}{}
		send(release)
	}
}
