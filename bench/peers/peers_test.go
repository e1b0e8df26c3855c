package main

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/docketdb/docket/bench"
	"github.com/docketdb/docket/engine"
)

// TestPeers runs the driver workloads on each peer at a tiny size, with
// no fsync so that it takes seconds.
func TestPeers(t *testing.T) {
	for name, run := range runners {
		for _, w := range bench.DriverWorkloads {
			t.Run(name+"/"+w, func(t *testing.T) {
				cfg := bench.Config{Workload: w, N: 300, Durability: engine.SyncNever, Dir: t.TempDir()}
				if w == "W6" || w == "W6R" {
					cfg.N, cfg.Duration, cfg.OfferedRate = 0, 300*time.Millisecond, 500
				}
				res, err := run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if res.System != name || res.Tasks <= 0 || res.TasksPerSec <= 0 {
					t.Fatalf("%+v", res)
				}
				if w != "W6" && w != "W6R" && res.Tasks != 300 {
					t.Fatalf("%d tasks, want 300", res.Tasks)
				}
				if w == "W6R" && (res.EndToEnd == nil || res.EndToEnd.Count == 0) {
					t.Fatalf("no end-to-end latency: %+v", res)
				}
			})
		}
	}
}

// TestNATSLoopback checks that nats-tcp reaches its server over a TCP
// connection to 127.0.0.1, and that nats connects in process.
func TestNATSLoopback(t *testing.T) {
	cfg := bench.Config{Workload: "W1", Durability: engine.SyncNever}
	for _, loopback := range []bool{true, false} {
		d, err := openNATS(context.Background(), cfg, t.TempDir(), loopback)
		if err != nil {
			t.Fatal(err)
		}
		nd := d.(*natsDriver)
		host, port, err := net.SplitHostPort(nd.nc.ConnectedAddr())
		if loopback {
			srvAddr, _ := nd.srv.Addr().(*net.TCPAddr)
			if err != nil || host != "127.0.0.1" || srvAddr == nil || port != strconv.Itoa(srvAddr.Port) {
				t.Errorf("loopback client connected to %q (%v), server at %v", nd.nc.ConnectedAddr(), err, nd.srv.Addr())
			}
		} else if err == nil || nd.srv.Addr() != nil {
			t.Errorf("in-process client connected to %q, server listening at %v", nd.nc.ConnectedAddr(), nd.srv.Addr())
		}
		if err := d.Enqueue(context.Background(), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
}

// TestBolt: the bbolt queue hands out the oldest tasks first, each once,
// refuses to complete a task twice or one it never leased, and refuses
// the in-memory mode it has no equivalent of.
func TestBolt(t *testing.T) {
	ctx := context.Background()
	if _, err := openBolt(ctx, bench.Config{InMemory: true}, t.TempDir()); err == nil {
		t.Fatal("opened in memory")
	}
	d, err := openBolt(ctx, bench.Config{Durability: engine.SyncAlways}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.EnqueueBatch(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c")}); err != nil {
		t.Fatal(err)
	}
	if err := d.Enqueue(ctx, []byte("d")); err != nil {
		t.Fatal(err)
	}
	first, err := d.Claim(ctx, 2, false)
	if err != nil || len(first) != 2 || string(d.Payload(&first[0])) != "a" || string(d.Payload(&first[1])) != "b" {
		t.Fatalf("claimed %v, %v", first, err)
	}
	rest, err := d.Claim(ctx, 10, false)
	if err != nil || len(rest) != 2 || string(d.Payload(&rest[0])) != "c" || string(d.Payload(&rest[1])) != "d" {
		t.Fatalf("claimed %v, %v", rest, err)
	}
	if none, err := d.Claim(ctx, 10, false); err != nil || len(none) != 0 {
		t.Fatalf("claimed %v from an empty queue, %v", none, err)
	}
	bd := d.(bench.BatchCompleter[boltJob])
	if err := bd.CompleteBatch(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := d.Complete(ctx, &first[0]); !errors.Is(err, errNotLeased) {
		t.Fatalf("second completion: %v", err)
	}
	// A batch with one bad job changes nothing: rest stays leased.
	if err := bd.CompleteBatch(ctx, []boltJob{rest[0], first[1]}); !errors.Is(err, errNotLeased) {
		t.Fatalf("batch with a completed job: %v", err)
	}
	if err := bd.CompleteBatch(ctx, rest); err != nil {
		t.Fatalf("completing what the failed batch left: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if js, err := d.Claim(wctx, 1, true); !errors.Is(err, context.DeadlineExceeded) || len(js) != 0 {
		t.Fatalf("waiting claim on an empty queue: %v, %v", js, err)
	}
}

// TestBoltTargets: the W3 ratio to bbolt passes at 2x, fails below, and
// is left out without both runs.
func TestBoltTargets(t *testing.T) {
	all := map[string][]bench.Result{
		"W3/docket": {{TasksPerSec: 400, Mode: "always"}},
		"W3/bbolt":  {{TasksPerSec: 200, Mode: "durable"}},
	}
	if ts := boltTargets(all); len(ts) != 1 || !ts[0].Pass || ts[0].Ratio != 2 {
		t.Fatalf("at 2x: %+v", ts)
	}
	all["W3/docket"][0].TasksPerSec = 399
	if ts := boltTargets(all); len(ts) != 1 || ts[0].Pass {
		t.Fatalf("below 2x: %+v", ts)
	}
	delete(all, "W3/bbolt")
	if ts := boltTargets(all); len(ts) != 0 {
		t.Fatalf("without bbolt: %+v", ts)
	}
}
