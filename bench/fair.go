package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docketdb/docket/engine"
)

// WF, fairness between partitions: the small partitions' tasks are served
// about as soon with a huge partition beside them as alone.
//
// Each round of a run enqueues FairSmallPartitions partitions of
// FairSmallTasks tasks each, one partition after the other, and then
// Workers workers claim ClaimBatch tasks at a time (and complete them)
// until every small task has been claimed; a run is FairRounds rounds, the
// two runs' rounds alternating. A task's wait is from the end of its
// round's enqueues to its claim: the same start in both runs. The first run holds the small
// partitions alone; the second first enqueues N tasks (default 1,000,000,
// not measured) in one more partition, before the small ones, so that by
// age alone every small task would come after all of them. The target is
// the small tasks' p99 wait with the big partition at most twice their p99
// wait alone.
const (
	FairSmallPartitions = 100
	FairSmallTasks      = 10
	// FairRounds is how many times each run enqueues and claims the small
	// partitions (the big one stays), merging their waits: one round
	// lasts a few milliseconds, too short to measure alone.
	FairRounds = 5
	// FairTarget is the largest ratio of the p99 waits that passes.
	FairTarget = 2.0
	// maxEmptyClaims bounds the empty claims a worker makes while others
	// hold the last small tasks.
	maxEmptyClaims = 1_000_000
)

// Fairness is what WF measured.
type Fairness struct {
	BigTasks   int `json:"big_tasks"`
	Partitions int `json:"partitions"`
	PerPart    int `json:"per_partition"`
	// Alone and Loaded are the small tasks' waits, enqueue to claim, with
	// the small partitions alone and with the big partition beside them.
	Alone  Percentiles `json:"alone"`
	Loaded Percentiles `json:"loaded"`
	// BigClaimed is how many big tasks the loaded run claimed before the
	// last small one.
	BigClaimed int64 `json:"big_claimed"`
	// Ratio is Loaded.P99 / Alone.P99; Pass is Ratio <= FairTarget.
	Ratio float64 `json:"ratio"`
	Pass  bool    `json:"pass"`
}

// runWF measures fairness (see Fairness), the loaded run's figures as the
// result's rates and latency. The two runs' rounds alternate, so that both
// meet the same spells of a busy machine.
func runWF(ctx context.Context, cfg Config, dir string, r *Result) error {
	f := &Fairness{BigTasks: cfg.N, Partitions: FairSmallPartitions, PerPart: FairSmallTasks}
	r.Fairness = f
	alone, err := fairSetup(ctx, cfg, filepath.Join(dir, "alone"), 0)
	if err != nil {
		return err
	}
	defer alone.Close()
	loaded, err := fairSetup(ctx, cfg, filepath.Join(dir, "loaded"), cfg.N)
	if err != nil {
		return err
	}
	defer loaded.Close()
	payload := makePayload(cfg.PayloadBytes, 0)
	var waitsAlone, waitsLoaded hist
	var bigAlone, bigClaimed, callsAlone, calls atomic.Int64
	var elapsed time.Duration
	w := openWindow(loaded)
	for range FairRounds {
		// The setup's garbage is not the claims' to collect.
		runtime.GC()
		waits, _, err := fairRound(ctx, cfg, alone.q, payload, &bigAlone, &callsAlone)
		if err != nil {
			return err
		}
		waitsAlone.merge(waits)
		runtime.GC()
		waits, took, err := fairRound(ctx, cfg, loaded.q, payload, &bigClaimed, &calls)
		if err != nil {
			return err
		}
		waitsLoaded.merge(waits)
		elapsed += took
	}
	w.close(r) // the CPU of both runs
	r.Tasks = int64(waitsLoaded.n) + bigClaimed.Load()
	r.Calls = calls.Load()
	r.Elapsed = elapsed
	f.Alone, f.Loaded, f.BigClaimed = waitsAlone.percentiles(), waitsLoaded.percentiles(), bigClaimed.Load()
	if f.Alone.P99 > 0 {
		f.Ratio = float64(f.Loaded.P99) / float64(f.Alone.P99)
	}
	f.Pass = f.Alone.P99 > 0 && f.Ratio <= FairTarget
	r.Latency = f.Loaded
	return nil
}

// fairSetup opens a DB for WF in dir holding big ready tasks in the big
// partition (not measured).
func fairSetup(ctx context.Context, cfg Config, dir string, big int) (*docketDriver, error) {
	prog := startProgress(cfg.Progress, cfg.progressEvery, label(cfg), "tasks enqueued")
	defer prog.end()
	d, err := openDocket(cfg, dir, func(o *engine.Options) { o.SnapshotBytes = -1 })
	if err != nil {
		return nil, err
	}
	payload := makePayload(cfg.PayloadBytes, 0)
	batch := make([]engine.Task, 0, setupBatch)
	for i := range big {
		batch = append(batch, engine.Task{Payload: payload, Partition: "big"})
		if len(batch) == setupBatch || i == big-1 {
			if _, err := d.q.EnqueueBatch(ctx, batch); err != nil {
				return nil, errors.Join(err, d.Close())
			}
			prog.done.Add(int64(len(batch)))
			batch = batch[:0]
		}
	}
	return d, nil
}

// fairRound enqueues the small partitions on q and claims (and completes)
// until every small task has been claimed: it returns their waits and how
// long the claims took, and counts the big tasks claimed and the calls.
func fairRound(ctx context.Context, cfg Config, q engine.Queue, payload []byte, bigClaimed, calls *atomic.Int64) (*hist, time.Duration, error) {
	batch := make([]engine.Task, 0, FairSmallTasks)
	for p := range FairSmallPartitions {
		batch = batch[:0]
		for range FairSmallTasks {
			batch = append(batch, engine.Task{Payload: payload, Partition: fmt.Sprintf("small-%03d", p)})
		}
		if _, err := q.EnqueueBatch(ctx, batch); err != nil {
			return nil, 0, err
		}
	}
	const small = FairSmallPartitions * FairSmallTasks
	var smallLeft atomic.Int64
	smallLeft.Store(small)
	hs := make([]hist, cfg.Workers)
	errs := make([]error, cfg.Workers)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", i)
			empty := 0
			for smallLeft.Load() > 0 && ctx.Err() == nil {
				ls, err := q.Claim(ctx, owner, lease, cfg.ClaimBatch)
				at := time.Since(start)
				calls.Add(1)
				if err != nil {
					errs[i] = err
					return
				}
				if len(ls) == 0 {
					// Another worker holds the last small tasks and has not
					// counted them yet.
					if empty++; empty > maxEmptyClaims {
						errs[i] = errors.New("claims keep finding nothing with small tasks left")
						return
					}
					runtime.Gosched()
					continue
				}
				for _, l := range ls {
					if l.Partition == "big" {
						bigClaimed.Add(1)
					} else {
						hs[i].record(at)
						smallLeft.Add(-1)
					}
				}
				if _, err := q.CompleteBatch(ctx, ls); err != nil {
					errs[i] = err
					return
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return nil, 0, err
	}
	var all hist
	for i := range hs {
		all.merge(&hs[i])
	}
	if all.n != small {
		return nil, 0, fmt.Errorf("claimed %d small tasks, want %d", all.n, small)
	}
	return &all, took, nil
}
