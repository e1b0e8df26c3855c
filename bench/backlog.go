package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Backlog is what W10 measured: a queue filled with no consumer, then
// reopened, then held at a standing backlog while tasks flow through it,
// then drained.
type Backlog struct {
	Tasks        int `json:"tasks"`
	PayloadBytes int `json:"payload_bytes"`
	// Slices is the enqueue rate over each tenth of the fill, with the
	// memory held at its end: whether enqueues slow down as the backlog
	// grows, and how memory grows with it.
	Slices []BacklogSlice `json:"slices"`
	// Fill is the whole fill's time; FillPeakRSS the process's peak
	// resident set over it (VmHWM); HeapPerTask the live heap at its end
	// per task held (after a collection).
	Fill        time.Duration `json:"fill_ns"`
	FillPeakRSS int64         `json:"fill_peak_rss_bytes"`
	HeapPerTask float64       `json:"heap_per_task"`
	// DiskBytes is the data directory's size once the DB is closed.
	DiskBytes int64 `json:"disk_bytes"`
	// Reopen is how long Open took on the full directory.
	Reopen time.Duration `json:"reopen_ns"`
	// Standing is claim latency while Workers claim and complete one task
	// at a time and a producer enqueues one task for each completed, so
	// the backlog stays at Tasks; StandingPerSec is the rate through it.
	Standing       Percentiles `json:"standing_claim"`
	StandingPerSec float64     `json:"standing_per_sec"`
	// StandingRate is the rate the standing phase was paced to
	// (Config.StandingRate; 0: not paced). StandingLate is then how late
	// each claim began after the moment the schedule asked for it (a
	// worker busy, a stall, and the schedule's own timer, which the Go
	// runtime wakes within about a millisecond): Standing is the calls
	// alone.
	StandingRate int          `json:"standing_rate,omitempty"`
	StandingLate *Percentiles `json:"standing_late,omitempty"`
	// StandingRuntime is what the Go runtime did over the standing phase,
	// to tell the engine's share of a claim's tail from the collector's
	// and the scheduler's.
	StandingRuntime RuntimeShare `json:"standing_runtime"`
	// DrainPerSec is the rate at which Workers, claiming ClaimBatch tasks
	// and completing them in one commit, emptied the queue.
	Drain       time.Duration `json:"drain_ns"`
	DrainPerSec float64       `json:"drain_per_sec"`
}

// BacklogSlice is one tenth of W10's fill.
type BacklogSlice struct {
	Held      int64   `json:"held"` // tasks in the queue at the slice's end
	PerSec    float64 `json:"per_sec"`
	HeapBytes uint64  `json:"heap_bytes"` // runtime.MemStats.HeapAlloc
	RSS       int64   `json:"rss_bytes"`  // VmRSS
}

// standingDefault is how long W10's standing phase runs when the config
// sets no Duration.
const standingDefault = 5 * time.Second

// runW10 fills a queue with cfg.N tasks of cfg.PayloadBytes from
// cfg.Producers goroutines (batches of EnqueueBatchSize, so that the fill
// itself is quick), sampling each tenth; closes and reopens it; runs the
// standing phase for cfg.Duration; then drains it.
func runW10(ctx context.Context, cfg Config, dir string, r *Result) error {
	b := &Backlog{Tasks: cfg.N, PayloadBytes: cfg.PayloadBytes}
	r.Filled = b
	d, err := openDocket(cfg, dir, nil)
	if err != nil {
		return err
	}
	if err := fillBacklog(ctx, cfg, d, b); err != nil {
		d.Close()
		return err
	}
	if err := d.Close(); err != nil {
		return err
	}
	b.DiskBytes = dirBytes(dir)
	runtime.GC()
	var prof *os.File
	if cfg.ReopenProfile != "" {
		if prof, err = os.Create(cfg.ReopenProfile); err == nil {
			err = pprof.StartCPUProfile(prof)
		}
		if err != nil {
			return fmt.Errorf("reopen profile: %w", errors.Join(err, closeFile(prof)))
		}
	}
	start := time.Now()
	d, err = openDocket(cfg, dir, nil)
	b.Reopen = time.Since(start)
	if prof != nil {
		pprof.StopCPUProfile()
		if perr := prof.Close(); perr != nil {
			err = errors.Join(err, fmt.Errorf("reopen profile: %w", perr))
			if d != nil {
				d.Close()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	if n := d.db.Stats().Tasks; n != cfg.N {
		d.Close()
		return fmt.Errorf("reopen recovered %d tasks, want %d", n, cfg.N)
	}
	err = errors.Join(standing(ctx, cfg, d, b), drainBacklog(ctx, cfg, d, b))
	r.Tasks = int64(cfg.N)
	r.Elapsed = b.Fill
	r.TasksPerSec = float64(cfg.N) / b.Fill.Seconds()
	return errors.Join(err, d.Close())
}

func fillBacklog(ctx context.Context, cfg Config, d *docketDriver, b *Backlog) error {
	prog := startProgress(cfg.Progress, cfg.progressEvery, label(cfg), "tasks enqueued")
	defer prog.end()
	payload := makePayload(cfg.PayloadBytes, 0)
	batch := make([][]byte, EnqueueBatchSize)
	for i := range batch {
		batch[i] = payload
	}
	slice := max(int64(cfg.N)/10, 1)
	var next atomic.Int64 // tasks handed out
	var done atomic.Int64 // tasks enqueued
	var mu sync.Mutex
	last, lastDone := time.Now(), int64(0)
	sample := func() {
		mu.Lock()
		defer mu.Unlock()
		n := done.Load()
		now := time.Now()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s := BacklogSlice{Held: n, HeapBytes: ms.HeapAlloc, RSS: currentRSS()}
		if dt := now.Sub(last).Seconds(); dt > 0 {
			s.PerSec = float64(n-lastDone) / dt
		}
		b.Slices = append(b.Slices, s)
		last, lastDone = now, n
	}
	resetPeakRSS()
	start := time.Now()
	errs := make([]error, cfg.Producers)
	var wg sync.WaitGroup
	for p := range cfg.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				hi := next.Add(EnqueueBatchSize)
				lo := hi - EnqueueBatchSize
				if lo >= int64(cfg.N) {
					return
				}
				k := min(hi, int64(cfg.N)) - lo
				if err := d.EnqueueBatch(ctx, batch[:k]); err != nil {
					errs[p] = err
					return
				}
				prog.done.Add(k)
				// A producer whose batch crosses a tenth samples it.
				if n := done.Add(k); n/slice != (n-k)/slice {
					sample()
				}
			}
		}()
	}
	wg.Wait()
	b.Fill = time.Since(start)
	b.FillPeakRSS = peakRSS()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.HeapPerTask = float64(ms.HeapAlloc) / float64(max(cfg.N, 1))
	if cfg.HeapProfile != "" {
		if err := writeHeapProfile(cfg.HeapProfile); err != nil {
			return fmt.Errorf("heap profile: %w", err)
		}
	}
	return nil
}

func closeFile(f *os.File) error {
	if f == nil {
		return nil
	}
	return f.Close()
}

// writeHeapProfile writes the heap's profile (as of the last collection)
// to the file path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(pprof.WriteHeapProfile(f), f.Close())
}

// standing holds the backlog at cfg.N for cfg.Duration: cfg.Workers claim
// and complete one task at a time, and for each completion a producer
// enqueues one, so the queue neither fills nor empties.
func standing(ctx context.Context, cfg Config, d *docketDriver, b *Backlog) error {
	dur := cfg.Duration
	if dur == 0 {
		dur = standingDefault
	}
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	payload := makePayload(cfg.PayloadBytes, 0)
	refill := make(chan struct{}, cfg.Workers*4)
	hs := make([]*hist, cfg.Workers)
	lates := make([]*hist, cfg.Workers)
	stop, err := startStandingProfiles(cfg)
	if err != nil {
		return err
	}
	before := readRuntime()
	var through atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, cfg.Workers+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-refill:
			}
			if err := d.Enqueue(context.WithoutCancel(ctx), payload); err != nil {
				errs[cfg.Workers] = err
				cancel()
				return
			}
		}
	}()
	start := time.Now()
	var due <-chan time.Time
	if cfg.StandingRate > 0 {
		b.StandingRate = cfg.StandingRate
		due = paceClaims(ctx, cfg.StandingRate, cfg.Workers, &wg)
	}
	for w := range cfg.Workers {
		wg.Add(1)
		h, late := new(hist), new(hist)
		hs[w], lates[w] = h, late
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if due != nil {
					select {
					case at := <-due:
						late.record(time.Since(at))
					case <-ctx.Done():
						return
					}
				}
				t0 := time.Now()
				r := trace.StartRegion(ctx, "claim") // for -standing-trace
				ls, err := d.Claim(context.WithoutCancel(ctx), 1, false)
				r.End()
				if err != nil {
					errs[w] = err
					cancel()
					return
				}
				h.record(time.Since(t0))
				for i := range ls {
					if err := d.Complete(context.WithoutCancel(ctx), &ls[i]); err != nil {
						errs[w] = err
						cancel()
						return
					}
					through.Add(1)
					select {
					case refill <- struct{}{}:
					case <-ctx.Done():
					}
				}
			}
		}()
	}
	wg.Wait()
	b.StandingPerSec = float64(through.Load()) / time.Since(start).Seconds()
	b.Standing = mergeAll(hs).percentiles()
	if due != nil {
		p := mergeAll(lates).percentiles()
		b.StandingLate = &p
	}
	b.StandingRuntime = readRuntime().since(before)
	return errors.Join(append(errs, stop())...)
}

// paceClaims returns the schedule of a standing phase paced to rate
// claims a second: the time each claim is due, sent once it has come.
// When every worker is busy the schedule waits for one and the times it
// sends fall behind the clock: how late a claim began shows the wait (no
// coordinated omission).
func paceClaims(ctx context.Context, rate, workers int, wg *sync.WaitGroup) <-chan time.Time {
	due := make(chan time.Time, workers)
	every := time.Second / time.Duration(rate)
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := time.Now()
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			for now := time.Now(); !next.After(now); next = next.Add(every) {
				select {
				case due <- next:
				case <-ctx.Done():
					return
				}
			}
			t.Reset(time.Until(next))
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return due
}

// startStandingProfiles starts the CPU profile and the execution trace of
// the standing phase that cfg asks for; stop ends them.
func startStandingProfiles(cfg Config) (stop func() error, err error) {
	var files []*os.File
	var stops []func()
	stop = func() error {
		for _, s := range stops {
			s()
		}
		var err error
		for _, f := range files {
			err = errors.Join(err, f.Close())
		}
		return err
	}
	start := func(path string, begin func(*os.File) error, end func()) error {
		if path == "" {
			return nil
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		files = append(files, f)
		if err := begin(f); err != nil {
			return err
		}
		stops = append(stops, end)
		return nil
	}
	if err := start(cfg.StandingProfile, func(f *os.File) error { return pprof.StartCPUProfile(f) }, pprof.StopCPUProfile); err != nil {
		return nil, fmt.Errorf("standing profile: %w", errors.Join(err, stop()))
	}
	if err := start(cfg.StandingTrace, func(f *os.File) error { return trace.Start(f) }, trace.Stop); err != nil {
		return nil, fmt.Errorf("standing trace: %w", errors.Join(err, stop()))
	}
	return stop, nil
}

// RuntimeShare is what the Go runtime did over a phase: collections, the
// CPU they took, how long the world was stopped, and how long runnable
// goroutines waited for a thread (the scheduler's latency, which a
// loaded machine raises whatever the engine does).
type RuntimeShare struct {
	GCs       uint64        `json:"gcs"`
	GCCPU     float64       `json:"gc_cpu_share"` // of all the CPU the process used
	PauseP99  time.Duration `json:"gc_pause_p99_ns"`
	PauseMax  time.Duration `json:"gc_pause_max_ns"`
	SchedP99  time.Duration `json:"sched_latency_p99_ns"`
	SchedP999 time.Duration `json:"sched_latency_p999_ns"`
	HeapGoal  uint64        `json:"heap_goal_bytes"`
	LiveHeap  uint64        `json:"live_heap_bytes"` // as of the last collection
	HeapLimit int64         `json:"memory_limit_bytes"`
}

// runtimeSample is a reading of the runtime's metrics.
type runtimeSample []metrics.Sample

var runtimeMetrics = []string{
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/cpu/classes/idle:cpu-seconds",
	"/sched/pauses/total/gc:seconds",
	"/sched/latencies:seconds",
	"/gc/heap/goal:bytes",
	"/gc/heap/live:bytes",
	"/gc/gomemlimit:bytes",
}

func readRuntime() runtimeSample {
	s := make(runtimeSample, len(runtimeMetrics))
	for i, name := range runtimeMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	return s
}

func (s runtimeSample) since(before runtimeSample) RuntimeShare {
	u64 := func(x runtimeSample, i int) uint64 {
		if x[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return x[i].Value.Uint64()
	}
	f64 := func(x runtimeSample, i int) float64 {
		if x[i].Value.Kind() != metrics.KindFloat64 {
			return 0
		}
		return x[i].Value.Float64()
	}
	var r RuntimeShare
	r.GCs = u64(s, 0) - u64(before, 0)
	r.GCCPU = gcShare(f64(s, 1)-f64(before, 1), f64(s, 2)-f64(before, 2), f64(s, 3)-f64(before, 3))
	pauses := histDelta(s[4], before[4])
	r.PauseP99, r.PauseMax = pauses.quantile(0.99), pauses.quantile(1)
	sched := histDelta(s[5], before[5])
	r.SchedP99, r.SchedP999 = sched.quantile(0.99), sched.quantile(0.999)
	r.HeapGoal, r.LiveHeap = u64(s, 6), u64(s, 7)
	r.HeapLimit = int64(u64(s, 8))
	return r
}

// gcShare is the GC's share of the CPU the process used over a phase,
// from the runtime's /cpu/classes figures for it: gc, total and idle
// seconds. Those are estimates (overestimates, the runtime's documentation
// says), and over a short phase on an idle machine the GC's read 1.5 times
// all the CPU used: a share is at most 1, and 0 when nothing was used.
func gcShare(gc, total, idle float64) float64 {
	used := total - idle
	if used <= 0 || gc <= 0 {
		return 0
	}
	return min(1, gc/used)
}

// secondsHist is the difference of two readings of a runtime histogram.
type secondsHist struct {
	counts  []uint64
	buckets []float64
}

func histDelta(now, before metrics.Sample) secondsHist {
	if now.Value.Kind() != metrics.KindFloat64Histogram {
		return secondsHist{}
	}
	a := now.Value.Float64Histogram()
	h := secondsHist{counts: slices.Clone(a.Counts), buckets: a.Buckets}
	if before.Value.Kind() == metrics.KindFloat64Histogram {
		for i, c := range before.Value.Float64Histogram().Counts {
			if i < len(h.counts) {
				h.counts[i] -= c
			}
		}
	}
	return h
}

// quantile is the upper bound of the bucket holding the q-th sample (the
// lower bound for the last, unbounded, bucket).
func (h secondsHist) quantile(q float64) time.Duration {
	var n uint64
	for _, c := range h.counts {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := max(uint64(q*float64(n)+0.5), 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			hi := h.buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = h.buckets[i]
			}
			return time.Duration(hi * 1e9)
		}
	}
	return 0
}

// drainBacklog empties the queue with cfg.Workers goroutines, each
// claiming cfg.ClaimBatch tasks and completing them in one commit.
func drainBacklog(ctx context.Context, cfg Config, d *docketDriver, b *Backlog) error {
	prog := startProgress(cfg.Progress, cfg.progressEvery, label(cfg)+" drain", "tasks completed")
	defer prog.end()
	var drained atomic.Int64
	start := time.Now()
	errs := make([]error, cfg.Workers)
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ls, err := d.Claim(ctx, cfg.ClaimBatch, false)
				if err != nil {
					errs[w] = err
					return
				}
				if len(ls) == 0 {
					return
				}
				if err := d.CompleteBatch(ctx, ls); err != nil {
					errs[w] = err
					return
				}
				drained.Add(int64(len(ls)))
				prog.done.Add(int64(len(ls)))
			}
		}()
	}
	wg.Wait()
	b.Drain = time.Since(start)
	b.DrainPerSec = float64(drained.Load()) / b.Drain.Seconds()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if n := d.db.Stats().Tasks; n != 0 && drained.Load() < int64(cfg.N) {
		return fmt.Errorf("drain stopped with %d tasks held, %d drained of %d", n, drained.Load(), cfg.N)
	}
	return nil
}
