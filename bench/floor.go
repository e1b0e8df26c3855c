package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// HTTPFloor is what the bare transport of the server costs a durable call:
// a plain net/http POST over loopback to a handler that does nothing but
// append to a file and fsync it, against the same append and fsync made
// in process, the two alternating. No connect, protobuf, engine or client
// is in it: it is the least any durable call through docket's server
// (net/http and HTTP/1.1) can take on this machine.
type HTTPFloor struct {
	Calls int           `json:"calls"`
	Sync  Percentiles   `json:"sync"` // the append and fsync in process
	Call  Percentiles   `json:"call"` // the POST whose handler appends and fsyncs
	Added time.Duration `json:"added_ns"`
	// SyncMean and CallMean are the means; Added is their difference, what
	// the call's network path costs beyond its fsync.
	SyncMean time.Duration `json:"sync_mean_ns"`
	CallMean time.Duration `json:"call_mean_ns"`
}

// MeasureHTTPFloor measures HTTPFloor for d in dir, on a server it starts
// on 127.0.0.1 and stops.
func MeasureHTTPFloor(ctx context.Context, dir string, d time.Duration) (HTTPFloor, error) {
	appendSync, done, err := syncer(dir, "docket-floor-")
	if err != nil {
		return HTTPFloor{}, err
	}
	defer done()
	return measureHTTPFloor(ctx, d, appendSync)
}

// measureHTTPFloor is MeasureHTTPFloor with appendSync the append and
// fsync, in process and in the handler.
func measureHTTPFloor(ctx context.Context, d time.Duration, appendSync func() error) (HTTPFloor, error) {
	var out HTTPFloor
	var handlerErr atomic.Value
	answer := make([]byte, 16)
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if err := appendSync(); err != nil {
				handlerErr.Store(err)
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/proto")
			w.Write(answer)
		}),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return out, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Close()
		<-served
	}()
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	url := "http://" + ln.Addr().String() + "/floor"
	body := makePayload(200, 0)
	post := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/proto")
		res, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if _, err := io.Copy(io.Discard, res.Body); err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK {
			if e, ok := handlerErr.Load().(error); ok {
				return e
			}
			return fmt.Errorf("bench: the floor's server answered %s", res.Status)
		}
		return nil
	}
	// One call unmeasured, so that the connection is made.
	if err := post(); err != nil {
		return out, err
	}
	var syncs, calls hist
	var syncSum, callSum time.Duration
	start := time.Now()
	for out.Calls == 0 || time.Since(start) < d {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		t := time.Now()
		if err := appendSync(); err != nil {
			return out, err
		}
		s := time.Since(t)
		t = time.Now()
		if err := post(); err != nil {
			return out, err
		}
		c := time.Since(t)
		syncs.record(s)
		calls.record(c)
		syncSum += s
		callSum += c
		out.Calls++
	}
	out.Sync, out.Call = syncs.percentiles(), calls.percentiles()
	out.SyncMean = syncSum / time.Duration(out.Calls)
	out.CallMean = callSum / time.Duration(out.Calls)
	out.Added = out.CallMean - out.SyncMean
	return out, nil
}

// MedianFloor is the floor of fs (one per round) whose call took the
// median mean time.
func MedianFloor(fs []HTTPFloor) HTTPFloor {
	s := slices.Clone(fs)
	slices.SortStableFunc(s, func(a, b HTTPFloor) int { return cmp.Compare(a.CallMean, b.CallMean) })
	return s[(len(s)-1)/2]
}

// WriteFloor writes the floor f, the median round's (MedianFloor), under a
// heading that says what it is, and sets it beside the median durable W1
// and W2 of rs, where the run has them: what the server adds to a call
// (W1) and to a producer's round (W2) over the same in process, against
// what the bare call adds to its fsync. (The log's own sync is cheaper
// than the floor's fsync, so the additions are compared, not the rates.)
// At 80% of in process, W2's round through the server may add a quarter
// of its round in process.
func WriteFloor(w io.Writer, f HTTPFloor, rs []Result) error {
	fmt.Fprintln(w, "the floor of a durable call over HTTP/1.1 here, median of the rounds (a bare net/http POST whose handler appends and fsyncs, against the append and fsync alone, alternating):")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "fsync in process\tmean %s  p50 %s  p99 %s\n", dur(f.SyncMean), dur(f.Sync.P50), dur(f.Sync.P99))
	fmt.Fprintf(tw, "bare net/http call that fsyncs\tmean %s  p50 %s  p99 %s\n", dur(f.CallMean), dur(f.Call.P50), dur(f.Call.P99))
	fmt.Fprintf(tw, "added by the bare call\t%s (%d calls)\n", signed(f.Added), f.Calls)
	ms := medians(rs)
	round := func(w string) (in, out time.Duration, ok bool) {
		l, ok1 := find(ms, "docket", w, "always")
		r, ok2 := find(ms, Remote, w, "always")
		if !ok1 || !ok2 || l.TasksPerSec <= 0 || r.TasksPerSec <= 0 || l.Producers <= 0 || r.Producers <= 0 {
			return 0, 0, false
		}
		in = time.Duration(float64(l.Producers) / l.TasksPerSec * float64(time.Second))
		out = time.Duration(float64(r.Producers) / r.TasksPerSec * float64(time.Second))
		return in, out, true
	}
	if in, out, ok := round("W1"); ok {
		fmt.Fprintf(tw, "W1 always, a call\tin process %s, remote %s (%s); the bare call adds %s\n", dur(in), dur(out), signed(out-in), signed(f.Added))
	}
	if in, out, ok := round("W2"); ok {
		fmt.Fprintf(tw, "W2 always, a producer's round\tin process %s, remote %s (%s)\n", dur(in), dur(out), signed(out-in))
		fmt.Fprintf(tw, "W2 always at 80%%: a round may add\t%s; the bare call adds %s\n", dur(in/4), signed(f.Added))
	}
	return tw.Flush()
}
