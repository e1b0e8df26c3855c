//go:build unix

package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/proccpu"
	"github.com/docketdb/docket/internal/session"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// The benchmarks of a session against unary calls, on loopback, on a DB
// in memory (no fsync: the transport and the server's work per call):
// one call at a time, and 1,024 in flight. ns/op is per call; allocs/op
// counts both sides, which share the process, and so does cpu-µs/call
// (the process's user and system time per call: the firmer figure on a
// loaded machine).

// reportCPU reports the CPU time per call since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(proccpu.Used()-start)/float64(b.N)/1e3, "cpu-µs/call")
}

func benchServer(b *testing.B) string {
	b.Helper()
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	s := New(db, Options{Logger: slog.New(slog.DiscardHandler), MaxCalls: 4096})
	addr, _ := serveSessions(b, s)
	return addr
}

func BenchmarkSessionLone(b *testing.B) { benchSession(b, 1) }

func BenchmarkSessionInFlight1024(b *testing.B) { benchSession(b, 1024) }

func benchSession(b *testing.B, inFlight int) {
	addr := benchServer(b)
	ts, _ := dialSession(b, addr, "")
	w := session.NewWriter(ts.conn)
	window := make(chan struct{}, inFlight)
	done := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := proccpu.Used()
	defer reportCPU(b, cpu)
	go func() {
		for range b.N {
			r, err := ts.recv()
			if err == nil && r.GetEnqueue() == nil {
				err = fmt.Errorf("reply %v", r)
			}
			if err != nil {
				done <- err
				return
			}
			<-window
		}
		done <- nil
	}()
	for i := range b.N {
		window <- struct{}{}
		if err := w.Send(enqueueCall(uint64(i+1), "bench")); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func BenchmarkUnaryLone(b *testing.B) { benchUnary(b, 1) }

func BenchmarkUnaryInFlight1024(b *testing.B) { benchUnary(b, 1024) }

func benchUnary(b *testing.B, inFlight int) {
	addr := benchServer(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: inFlight, MaxConnsPerHost: inFlight}}
	q := docketv1connect.NewQueuesClient(hc, "http://"+addr)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := proccpu.Used()
	defer reportCPU(b, cpu)
	var wg sync.WaitGroup
	var next sync.Mutex
	n := 0
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				if n >= b.N {
					next.Unlock()
					return
				}
				n++
				next.Unlock()
				_, err := q.Enqueue(context.Background(), connect.NewRequest(enqueueCall(0, "bench").GetEnqueue()))
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
