package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestMeasureHTTPFloor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := MeasureHTTPFloor(context.Background(), dir, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if f.Calls < 1 || f.Sync.Count != uint64(f.Calls) || f.Call.Count != uint64(f.Calls) {
		t.Fatalf("%d calls, %d syncs and %d calls timed: each call is timed beside one sync", f.Calls, f.Sync.Count, f.Call.Count)
	}
	if f.SyncMean <= 0 || f.CallMean <= 0 || f.Added != f.CallMean-f.SyncMean {
		t.Fatalf("means %v and %v, added %v", f.SyncMean, f.CallMean, f.Added)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left %d files in the directory", len(left))
	}
	// The handler syncs on every call: one sync in process and one in the
	// handler for each call timed, and one for the unmeasured first call.
	var syncs atomic.Int32
	f, err = measureHTTPFloor(context.Background(), 10*time.Millisecond, func() error {
		syncs.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load(); int(n) != 2*f.Calls+1 {
		t.Fatalf("%d syncs for %d calls timed, want %d", n, f.Calls, 2*f.Calls+1)
	}
}

func TestMeasureHTTPFloorFails(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := MeasureHTTPFloor(context.Background(), missing, time.Millisecond); err == nil {
		t.Fatal("a directory that does not exist measured")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("the failed measurement made the directory: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	if _, err := MeasureHTTPFloor(ctx, dir, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("with its context ended: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left %d files in the directory", len(left))
	}
}

// TestMeasureHTTPFloorSyncFails: a failed append or fsync ends the
// measurement with its error, in process or in the server's handler.
func TestMeasureHTTPFloorSyncFails(t *testing.T) {
	t.Parallel()
	errSync := errors.New("sync failed")
	// The calls alternate after the first, the handler's: in process (2),
	// handler (3), in process (4)...
	for _, fail := range []int{1, 2, 3, 4} {
		var n atomic.Int32
		_, err := measureHTTPFloor(context.Background(), time.Second, func() error {
			if n.Add(1) == int32(fail) {
				return errSync
			}
			return nil
		})
		if !errors.Is(err, errSync) {
			t.Errorf("failing call %d: %v", fail, err)
		}
	}
}

func TestWriteFloor(t *testing.T) {
	t.Parallel()
	f := HTTPFloor{Calls: 10, SyncMean: 200 * time.Microsecond, CallMean: 390 * time.Microsecond, Added: 190 * time.Microsecond}
	w2 := func(system string, perSec float64) Result {
		return Result{System: system, Workload: "W2", Mode: "always", TasksPerSec: perSec, Producers: 16}
	}
	var b strings.Builder
	// 16 producers at 50,000 tasks/s: a round of 320µs, of which 80µs may
	// be added; at 20,000 tasks/s through the server, 800µs.
	if err := WriteFloor(&b, f, []Result{w2("docket", 50000), w2(Remote, 20000)}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the floor of a durable call over HTTP/1.1", "+190.0µs (10 calls)", "in process 320.0µs, remote 800.0µs (+480.0µs)",
		"80.0µs; the bare call adds +190.0µs"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	b.Reset()
	w1 := func(system string, perSec float64) Result {
		return Result{System: system, Workload: "W1", Mode: "always", TasksPerSec: perSec, Producers: 1}
	}
	if err := WriteFloor(&b, f, []Result{w2("docket", 50000), w1("docket", 5000), w1(Remote, 2000)}); err != nil {
		t.Fatal(err)
	}
	// A call of 200µs in process, of 500µs through the server.
	if !strings.Contains(b.String(), "in process 200.0µs, remote 500.0µs (+300.0µs); the bare call adds +190.0µs") || strings.Contains(b.String(), "W2 always") {
		t.Fatalf("with W1 and no remote W2:\n%s", b.String())
	}
}

func TestMedianFloor(t *testing.T) {
	t.Parallel()
	f := func(us int) HTTPFloor { return HTTPFloor{CallMean: time.Duration(us) * time.Microsecond, Calls: us} }
	for _, c := range []struct {
		in   []HTTPFloor
		want int
	}{
		{[]HTTPFloor{f(5)}, 5},
		{[]HTTPFloor{f(9), f(3), f(5)}, 5},
		{[]HTTPFloor{f(9), f(3), f(5), f(7)}, 5}, // the lower of the middle two
	} {
		in := slices.Clone(c.in)
		if got := MedianFloor(c.in); got.Calls != c.want {
			t.Errorf("median of %v: %v", c.in, got)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("MedianFloor reordered its argument: %v", c.in)
		}
	}
}
