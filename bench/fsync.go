package bench

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"
)

// FsyncResult is the raw fsync rate of a directory's file system: the
// ceiling for one committer that waits for each commit to be durable.
type FsyncResult struct {
	Syncs   int           `json:"syncs"`
	Elapsed time.Duration `json:"elapsed_ns"`
	PerSec  float64       `json:"per_sec"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
}

// MeasureFsync appends 128 bytes to a new file in dir and fsyncs it, in a
// loop, for d.
func MeasureFsync(dir string, d time.Duration) (FsyncResult, error) {
	var res FsyncResult
	appendSync, done, err := syncer(dir, "docket-fsync-")
	if err != nil {
		return res, err
	}
	defer done()
	h := new(hist)
	start := time.Now()
	for time.Since(start) < d || res.Syncs == 0 {
		t := time.Now()
		if err := appendSync(); err != nil {
			return res, err
		}
		h.record(time.Since(t))
		res.Syncs++
	}
	res.Elapsed = time.Since(start)
	res.PerSec = float64(res.Syncs) / res.Elapsed.Seconds()
	res.P50, res.P99 = h.quantile(0.5), h.quantile(0.99)
	return res, nil
}

// syncer makes a new file in dir and returns what appends 128 bytes to it
// and fsyncs it, and what closes and removes it.
func syncer(dir, prefix string) (appendSync func() error, done func(), err error) {
	f, err := os.CreateTemp(dir, prefix)
	if err != nil {
		return nil, nil, err
	}
	rec := make([]byte, 128)
	for i := range rec {
		rec[i] = byte('a' + i%26)
	}
	appendSync = func() error {
		if _, err := f.Write(rec); err != nil {
			return err
		}
		return f.Sync()
	}
	return appendSync, func() { f.Close(); os.Remove(f.Name()) }, nil
}

// Table writes the result as aligned name/value lines.
func (f FsyncResult) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "fsync\t%s/s (%d in %v)\n", rate(f.PerSec), f.Syncs, f.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(tw, "latency\tp50 %s  p99 %s\n", dur(f.P50), dur(f.P99))
	return tw.Flush()
}
