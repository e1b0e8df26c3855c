package bench

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// progressEvery is how often a running workload reports, unless its
// Config says otherwise (tests).
const progressEvery = 500 * time.Millisecond

// progress counts what a workload has done and, if it has a writer,
// reports it every interval (progressEvery if 0) from its own goroutine.
type progress struct {
	done  atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup
	label string
	unit  string
	w     io.Writer
	every time.Duration
}

func startProgress(w io.Writer, every time.Duration, label, unit string) *progress {
	if every <= 0 {
		every = progressEvery
	}
	p := &progress{stop: make(chan struct{}), label: label, unit: unit, w: w, every: every}
	if w == nil {
		return p
	}
	p.wg.Add(1)
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer p.wg.Done()
	t := time.NewTicker(p.every)
	defer t.Stop()
	start := time.Now()
	last, lastAt := int64(0), start
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			n := p.done.Load()
			fmt.Fprintf(p.w, "%s: %d %s in %.1fs, %s/s now\n", p.label, n, p.unit,
				now.Sub(start).Seconds(), rate(float64(n-last)/now.Sub(lastAt).Seconds()))
			last, lastAt = n, now
		}
	}
}

// say writes one line if there is a writer.
func (p *progress) say(format string, args ...any) {
	if p.w != nil {
		fmt.Fprintf(p.w, "%s: "+format+"\n", append([]any{p.label}, args...)...)
	}
}

func (p *progress) end() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}
