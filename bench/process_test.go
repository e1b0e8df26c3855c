//go:build unix

package bench

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

func TestProcCPU(t *testing.T) {
	t.Parallel()
	// The command name may hold spaces and parentheses.
	stat := "4242 (docket (x) y) S 1 4242 4242 0 -1 4194560 3309 0 0 0 173 29 0 0 20 0 9 0 1234 0 0"
	ticks, err := procCPU([]byte(stat))
	if err != nil || ticks != 202 {
		t.Fatalf("procCPU = %d, %v; want 202", ticks, err)
	}
	for _, bad := range []string{"", "4242 docket S 1", "4242 (d) S 1 2 3", "4242 (d) S 1 2 3 4 5 6 7 8 9 10 x 29 0"} {
		if _, err := procCPU([]byte(bad)); err == nil {
			t.Errorf("procCPU(%q) took it", bad)
		}
	}
}

func needSh(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs a POSIX shell")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
}

// TestProcess starts children that speak and exit, or wait to be
// stopped: a line on stdout is read, an exit nobody asked for is an error
// with the child's stderr, and Stop ends a child that runs.
func TestProcess(t *testing.T) {
	t.Parallel()
	needSh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	p, err := StartProcess("talker", "sh", "-c", "echo ready; echo something broke >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := p.Line(ctx); err != nil || l != "ready" {
		t.Fatalf("Line = %q, %v", l, err)
	}
	if _, err := p.Line(ctx); err == nil || !strings.Contains(err.Error(), "something broke") || !strings.Contains(err.Error(), "talker exited") {
		t.Fatalf("Line after exit: %v", err)
	}
	if err := p.Stop(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Stop of a child that died: %v", err)
	}

	p, err = StartProcess("sleeper", "sh", "-c", "exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = p.Line(short)
	stop()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Line of a silent child: %v", err)
	}
	if p.CPU() < 0 {
		t.Fatal("negative CPU")
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the child exited")
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	if _, err := StartProcess("missing", filepath.Join(t.TempDir(), "no-such-binary")); err == nil {
		t.Fatal("started a binary that does not exist")
	}
}

// TestStartServeFails: a binary that exits without its ready line, or
// prints one of another process, is an error and leaves nothing running.
func TestStartServeFails(t *testing.T) {
	t.Parallel()
	needSh(t)
	dir := t.TempDir()
	script := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := StartServe(ctx, script("exits", "echo 'flag provided but not defined' >&2; exit 2"), dir, "always")
	if err == nil || !strings.Contains(err.Error(), "flag provided but not defined") {
		t.Fatalf("a serve that exits: %v", err)
	}
	_, _, err = StartServe(ctx, script("liar", `echo '{"event":"ready","pid":1,"url":"http://127.0.0.1:1"}'; exec sleep 60`), dir, "always")
	if err == nil || !strings.Contains(err.Error(), "another pid") {
		t.Fatalf("a ready line of another process: %v", err)
	}
}

var (
	docketBinOnce sync.Once
	docketBin     string
	docketBinErr  error
)

// buildDocket builds the docket command once for the tests that start
// `docket serve`; they are skipped under -short.
func buildDocket(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the docket command")
	}
	docketBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bench-docket-")
		if err != nil {
			docketBinErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		docketBin, docketBinErr = GoBuild(ctx, DocketPackage, dir, "docket")
	})
	if docketBinErr != nil {
		t.Fatal(docketBinErr)
	}
	return docketBin
}

// TestServeProcess runs workloads through the client against a `docket
// serve` process at a tiny size, in both durabilities: the counters are
// the server's, its CPU is read from its process, and the process is gone
// once the run returns, also when the run fails.
func TestServeProcess(t *testing.T) {
	t.Parallel()
	bin := buildDocket(t)
	for _, dur := range []engine.Durability{engine.SyncAlways, engine.SyncNever} {
		for _, w := range []string{"W1", "W1P", "W5", "W7"} {
			t.Run(w+"/"+dur.String(), func(t *testing.T) {
				n := 200
				if w == "W7" {
					n = 10
				}
				cfg := Config{Workload: w, N: n, Durability: dur, Dir: t.TempDir(), ServeBinary: bin}
				res, err := Run(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if res.System != Serve || res.Mode != dur.String() || res.Tasks != int64(n) {
					t.Fatalf("%s %s: %d tasks", res.System, res.Mode, res.Tasks)
				}
				if w != "W7" && (!res.ServerMeasured || res.Commits == 0) {
					t.Fatalf("server CPU measured %v, %d commits", res.ServerMeasured, res.Commits)
				}
				if w == "W1" && res.Commits != uint64(n) {
					t.Fatalf("%d commits for %d enqueues", res.Commits, n)
				}
				if w == "W1" && dur == engine.SyncAlways && res.Fsyncs == 0 {
					t.Fatal("no fsync at SyncAlways")
				}
				entries, _ := os.ReadDir(cfg.Dir)
				if len(entries) != 0 {
					t.Fatalf("the run left %d entries in its directory", len(entries))
				}
			})
		}
	}
}

// TestServeProcessStopped: the process a run started is stopped at the
// end of the run, and killed if the run is cancelled.
func TestServeProcessStopped(t *testing.T) {
	t.Parallel()
	bin := buildDocket(t)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	d, err := openRemote(cctx, Config{Workload: "W1", ServeBinary: bin, Durability: engine.SyncNever}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := d.server
	if err := d.Enqueue(cctx, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("the server runs on after Close")
	}
	if err := syscall.Kill(p.PID(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d still there: %v", p.PID(), err)
	}

	// A server killed under the run fails it, and the run says so.
	d, err = openRemote(cctx, Config{Workload: "W1", ServeBinary: bin, Durability: engine.SyncNever}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d.server.cmd.Process.Kill()
	<-d.server.Exited()
	if err := d.Close(); err == nil || !strings.Contains(err.Error(), "docket serve exited") {
		t.Fatalf("Close after the server died: %v", err)
	}
}
