package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docketdb/docket/engine"
)

// parkDelay is how long W7 lets its claimers settle into their blocking
// claims before enqueueing when it cannot see them parked (a server of
// another process): long against the few microseconds an empty claim
// takes.
const parkDelay = 200 * time.Microsecond

// runW7 measures wake-up latency: 1 + cfg.Parked claimers are parked in
// ClaimWait on an empty queue, one task is enqueued, and the time from just
// before the enqueue until a ClaimWait returns it is recorded, N times.
// Each trial starts once every claimer is parked again (DB.WaitParked, on
// the DB in this process, also the one under a remote run's server), so a
// trial with a thousand claimers meets a thousand parked calls. Against a
// running server (cfg.Server) the parked calls cannot be seen: each trial
// starts parkDelay after every claimer has gone back to its claim, and a
// claim that began after the enqueue is not counted as a wake-up.
func runW7(ctx context.Context, cfg Config, dir string, r *Result) error {
	var d *docketDriver
	var err error
	if cfg.Remote {
		d, err = openRemote(ctx, cfg, dir)
	} else {
		d, err = openDocket(cfg, dir, nil)
	}
	if err != nil {
		return err
	}
	err = wakeTrials(ctx, cfg, d, r)
	return errors.Join(err, d.Close())
}

func wakeTrials(ctx context.Context, cfg Config, d *docketDriver, r *Result) error {
	prog := startProgress(cfg.Progress, cfg.progressEvery, label(cfg), "wake-ups")
	defer prog.end()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	payload := makePayload(cfg.PayloadBytes, 0)
	claimers := 1 + cfg.Parked
	var sent atomic.Int64
	var early atomic.Int64
	h := new(lockedHist)
	// Each claimer says it is ready before each blocking claim, and after
	// each task it takes whether that was a wake-up.
	ready := make(chan struct{}, claimers)
	woke := make(chan bool, claimers)
	done := make(chan error, claimers)
	for range claimers {
		go func() {
			for {
				ready <- struct{}{}
				called := time.Now().UnixNano()
				ls, err := d.wq.ClaimWait(cctx, "bench", lease, 1)
				got := time.Now().UnixNano()
				if err != nil {
					if cctx.Err() != nil {
						err = nil
					}
					done <- err
					return
				}
				wake := called < sent.Load()
				if wake {
					h.record(time.Duration(got - sent.Load()))
				} else {
					early.Add(1) // it was not parked yet: not a wake-up
				}
				if _, err := d.wq.Complete(ctx, ls[0], engine.Done{}); err != nil {
					done <- err
					return
				}
				woke <- wake
			}
		}()
	}
	awaitReady := func() error {
		select {
		case <-ready:
			return nil
		case err := <-done:
			return fmt.Errorf("claimer stopped: %w", err)
		}
	}
	for range claimers {
		if err := awaitReady(); err != nil {
			return err
		}
	}
	w := openWindow(d)
	parked := func() error {
		if d.db == nil {
			time.Sleep(parkDelay)
			return nil
		}
		if err := d.db.WaitParked(cctx, benchNS, "tasks", claimers); err != nil {
			return fmt.Errorf("waiting for %d parked claimers: %w", claimers, err)
		}
		return nil
	}
	var elapsed time.Duration
	for prog.done.Load() < int64(cfg.N) {
		if err := parked(); err != nil {
			return err
		}
		t := time.Now()
		sent.Store(t.UnixNano())
		if _, err := d.q.Enqueue(ctx, engine.Task{Payload: payload}); err != nil {
			return err
		}
		var wake bool
		select {
		case wake = <-woke:
		case err := <-done:
			return fmt.Errorf("claimer stopped: %w", err)
		}
		if wake {
			elapsed += time.Since(t)
			prog.done.Add(1)
		}
		if err := awaitReady(); err != nil {
			return err
		}
	}
	cancel()
	for range claimers {
		if err := <-done; err != nil {
			return err
		}
	}
	w.close(r)
	r.Elapsed = elapsed
	r.Tasks = prog.done.Load()
	r.Calls = r.Tasks * 3
	r.Parked = cfg.Parked
	r.Latency = h.h.percentiles()
	if e := early.Load(); e > 0 {
		prog.say("%d trials discarded: the claimer was not parked yet", e)
	}
	return nil
}

// runW8 measures recovery: it builds a directory holding N pending tasks,
// one enqueue per commit with automatic snapshots off, closes it (Close
// writes a snapshot) and times Open twice: with that snapshot, and with
// the snapshot directory removed so that the whole log is replayed, as
// after a crash before any snapshot.
func runW8(ctx context.Context, cfg Config, dir string, r *Result) error {
	prog := startProgress(cfg.Progress, cfg.progressEvery, label(cfg), "tasks enqueued")
	defer prog.end()
	noSnap := func(o *engine.Options) { o.SnapshotBytes = -1 }
	// The build's own durability does not matter to what is measured.
	build := cfg
	build.Durability = engine.SyncNever
	d, err := openDocket(build, dir, noSnap)
	if err != nil {
		return err
	}
	rc := &Recovery{Tasks: cfg.N}
	r.Recovery = rc
	start := time.Now()
	if err := produce(ctx, cfg, d, prog); err != nil {
		d.Close()
		return err
	}
	rc.Build = time.Since(start)
	prog.end()
	prog.say("built %d tasks in %v; closing (writes the snapshot)", cfg.N, rc.Build.Round(time.Millisecond))
	start = time.Now()
	if err := d.Close(); err != nil {
		return err
	}
	rc.SnapshotWrite = time.Since(start)
	rc.SnapshotBytes = dirBytes(filepath.Join(dir, "snap"))
	rc.LogFileBytes = dirBytes(filepath.Join(dir, "wal"))

	reopen := func(what string) (time.Duration, error) {
		runtime.GC()
		start := time.Now()
		d, err := openDocket(cfg, dir, noSnap)
		took := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("open %s: %w", what, err)
		}
		n := d.db.Stats().Tasks
		err = d.Close()
		if err == nil && n != cfg.N {
			err = fmt.Errorf("open %s recovered %d tasks, want %d", what, n, cfg.N)
		}
		prog.say("opened %s in %v", what, took.Round(time.Millisecond))
		return took, err
	}
	if rc.FromSnapshot, err = reopen("from the snapshot"); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(dir, "snap")); err != nil {
		return err
	}
	if rc.FromLog, err = reopen("from the log alone"); err != nil {
		return err
	}
	r.Tasks = int64(cfg.N)
	return nil
}

// produce enqueues cfg.N tasks, one per commit, from cfg.Producers
// goroutines.
func produce(ctx context.Context, cfg Config, d *docketDriver, prog *progress) error {
	payload := makePayload(cfg.PayloadBytes, 0)
	var next atomic.Int64
	errs := make([]error, cfg.Producers)
	var wg sync.WaitGroup
	for p := range cfg.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(cfg.N) {
				if err := d.Enqueue(ctx, payload); err != nil {
					errs[p] = err
					return
				}
				prog.done.Add(1)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// lifecycleSample bounds how many tasks W9 takes through their whole life
// to measure log bytes: the figure per task settles long before.
const lifecycleSample = 10_000

// runW9 measures footprint: the live heap per pending task, the growth of
// the heap after a collection while N more tasks are enqueued (in cfg's
// mode), and the log bytes each step of a task's life
// writes, one step per commit (always on disk: there is no log in memory).
func runW9(ctx context.Context, cfg Config, dir string, r *Result) error {
	prog := startProgress(cfg.Progress, cfg.progressEvery, label(cfg), "tasks")
	defer prog.end()
	f := &Footprint{Tasks: cfg.N, PayloadBytes: cfg.PayloadBytes}
	r.Footprint = f
	d, err := openDocket(cfg, filepath.Join(dir, "heap"), nil)
	if err != nil {
		return err
	}
	// One batch first, so that the buffers that grow to a batch's size
	// (the plan's mutations, the log's encoding) exist before the baseline:
	// they are bounded by the batch, not by the tasks held, and would
	// otherwise be charged to the tasks (6,000 tasks' worth at 100k).
	err = fill(ctx, d, setupBatch, cfg.PayloadBytes, prog)
	before := liveHeap()
	if err == nil {
		err = fill(ctx, d, cfg.N, cfg.PayloadBytes, prog)
	}
	after := liveHeap()
	if err == nil {
		if n := d.db.Stats().Tasks; n != setupBatch+cfg.N {
			err = fmt.Errorf("holds %d tasks, want %d", n, setupBatch+cfg.N)
		}
	}
	runtime.KeepAlive(d)
	if err := errors.Join(err, d.Close()); err != nil {
		return err
	}
	f.HeapPerTask = float64(int64(after)-int64(before)) / float64(cfg.N)
	f.HeapBeyondPayload = f.HeapPerTask - float64(cfg.PayloadBytes)
	prog.say("%.0f heap bytes per pending task", f.HeapPerTask)

	logCfg := cfg
	logCfg.InMemory, logCfg.Durability = false, engine.SyncNever
	d, err = openDocket(logCfg, filepath.Join(dir, "log"), func(o *engine.Options) { o.SnapshotBytes = -1 })
	if err != nil {
		return err
	}
	err = lifecycle(ctx, min(cfg.N, lifecycleSample), cfg.PayloadBytes, d, f)
	if err := errors.Join(err, d.Close()); err != nil {
		return err
	}
	r.Tasks = int64(cfg.N)
	return nil
}

func lifecycle(ctx context.Context, n, size int, d *docketDriver, f *Footprint) error {
	payload := makePayload(size, 0)
	c0 := d.Counters()
	for range n {
		if err := d.Enqueue(ctx, payload); err != nil {
			return err
		}
	}
	c1 := d.Counters()
	ls := make([]engine.Lease, 0, n)
	for range n {
		got, err := d.Claim(ctx, 1, false)
		if err != nil {
			return err
		}
		if len(got) != 1 {
			return fmt.Errorf("claim found %d tasks, want 1", len(got))
		}
		ls = append(ls, got[0])
	}
	c2 := d.Counters()
	for i := range ls {
		if err := d.Complete(ctx, &ls[i]); err != nil {
			return err
		}
	}
	c3 := d.Counters()
	per := func(a, b Counters) float64 { return float64(b.LogBytes-a.LogBytes) / float64(n) }
	f.LogEnqueue, f.LogClaim, f.LogComplete = per(c0, c1), per(c1, c2), per(c2, c3)
	f.LogLifecycle = per(c0, c3)
	return nil
}

// liveHeap returns the live heap after a full collection.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
