package bench

import (
	"math/bits"
	"sync"
	"time"
)

// subBits sets the histogram's precision: 2^subBits buckets per power of
// two, so a reported percentile is within 1/64 (1.6%) of the true value.
const subBits = 6

const (
	subCount = 1 << subBits
	rows     = 64 - subBits + 1
)

// hist is a log-linear histogram of durations in nanoseconds. Recording is
// a few instructions and allocation-free, and its size does not grow with
// the number of samples, so a long run does not inflate the peak RSS it
// reports. It is not safe for concurrent use: each goroutine keeps its own
// and they are merged at the end.
type hist struct {
	counts [rows * subCount]uint64
	n      uint64
	max    int64
}

func bucketOf(v int64) int {
	if v < subCount {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	exp := bits.Len64(uint64(v)) - subBits - 1
	return (exp+1)*subCount + int(uint64(v)>>uint(exp)) - subCount
}

// bucketValue returns the middle of bucket i.
func bucketValue(i int) int64 {
	if i < subCount {
		return int64(i)
	}
	exp := uint(i/subCount - 1)
	mant := int64(i%subCount + subCount)
	return mant<<exp + (int64(1)<<exp)/2
}

func (h *hist) record(d time.Duration) {
	v := int64(d)
	h.counts[bucketOf(v)]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

func (h *hist) merge(o *hist) {
	if o == nil {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the value below which a fraction q of the samples fall.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(bucketValue(i), h.max))
		}
	}
	return time.Duration(h.max)
}

func (h *hist) percentiles() Percentiles {
	return Percentiles{
		Count: h.n,
		P50:   h.quantile(0.50),
		P99:   h.quantile(0.99),
		P999:  h.quantile(0.999),
		Max:   time.Duration(h.max),
	}
}

// lockedHist is a hist shared by short-lived goroutines.
type lockedHist struct {
	mu sync.Mutex
	h  hist
}

func (l *lockedHist) record(d time.Duration) {
	l.mu.Lock()
	l.h.record(d)
	l.mu.Unlock()
}

// lockedHists are callHists shared by short-lived goroutines.
type lockedHists struct {
	mu sync.Mutex
	h  callHists
}

func (l *lockedHists) record(k call, d time.Duration) {
	l.mu.Lock()
	l.h.record(k, d)
	l.mu.Unlock()
}

// hists merges per-goroutine histograms.
func mergeAll(hs []*hist) *hist {
	out := new(hist)
	for _, h := range hs {
		out.merge(h)
	}
	return out
}

// call names the kinds of call a workload times separately.
type call int

const (
	callEnqueue call = iota
	callEnqueueBatch
	callClaim
	callComplete
	callCompleteBatch
	callCompleteClaim
	numCalls
)

// callNames are the keys of Result.PerCall.
var callNames = [numCalls]string{"enqueue", "enqueue_batch", "claim", "complete", "complete_batch", "complete_claim"}

// callHists keeps one goroutine's latencies by kind of call; a kind's
// histogram is made on its first sample.
type callHists [numCalls]*hist

func (c *callHists) record(k call, d time.Duration) {
	if c[k] == nil {
		c[k] = new(hist)
	}
	c[k].record(d)
}

// summarize merges the goroutines' latencies: every call together, and
// each kind of call that was made.
func summarize(cs []*callHists) (all Percentiles, per map[string]Percentiles) {
	total := new(hist)
	for k := range numCalls {
		h := new(hist)
		for _, c := range cs {
			h.merge(c[k])
		}
		if h.n == 0 {
			continue
		}
		if per == nil {
			per = map[string]Percentiles{}
		}
		per[callNames[k]] = h.percentiles()
		total.merge(h)
	}
	return total.percentiles(), per
}
