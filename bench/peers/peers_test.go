package main

import (
	"context"
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
