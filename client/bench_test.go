package client

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/proccpu"
	"github.com/docketdb/docket/server"
)

// BenchmarkCall measures one call through the client to a server on
// loopback (in memory, so the network and the codecs are what is timed),
// beside the same call in process.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	payload := []byte(`{"to":"a@b","n":42}`)
	for _, remote := range []bool{false, true} {
		name := "in-process"
		if remote {
			name = "remote"
		}
		b.Run(name+"/enqueue", func(b *testing.B) {
			api := benchAPI(b, remote)
			q := api.Queue(ns, "bench")
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := q.Enqueue(ctx, engine.Task{Payload: payload}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
		b.Run(name+"/claim100+completebatch", func(b *testing.B) {
			api := benchAPI(b, remote)
			q := api.Queue(ns, "bench")
			tasks := make([]engine.Task, 100)
			for i := range tasks {
				tasks[i].Payload = payload
			}
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				if _, err := q.EnqueueBatch(ctx, tasks); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				ls, err := q.Claim(ctx, "w", time.Minute, 100)
				if err != nil || len(ls) != 100 {
					b.Fatal(len(ls), err)
				}
				if _, err := q.CompleteBatch(ctx, ls); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

func benchAPI(b *testing.B, remote bool) engine.API {
	db, err := engine.OpenInMemory(engine.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if !remote {
		return db
	}
	srv := serve(b, db, "127.0.0.1:0", server.Options{}, nil)
	c, err := Dial(context.Background(), srv.url, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkTransport compares the transports a client could use, with 16
// callers on one client to a server on loopback (in memory): net/http's
// HTTP/1.1 transport as it is ("plain"), through oneWrite as Dial sets it
// up ("onewrite"), and HTTP/2 without TLS ("h2c"). cpu-µs/op is the CPU
// time of the whole process (client and server) per call or round trip,
// which moves less than ns/op on a shared machine.
func BenchmarkTransport(b *testing.B) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	payload := []byte(`{"to":"a@b","n":42,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	httpClient := func(kind string) *http.Client {
		tr := &http.Transport{MaxIdleConnsPerHost: 256}
		switch kind {
		case "h2c":
			var p http.Protocols
			p.SetUnencryptedHTTP2(true)
			tr.Protocols = &p
		case "onewrite":
			return &http.Client{Transport: oneWrite{tr}}
		}
		return &http.Client{Transport: tr}
	}
	queue := func(b *testing.B, kind string) engine.Queue {
		db, err := engine.OpenInMemory(engine.Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		srv := serve(b, db, "127.0.0.1:0", server.Options{MaxCalls: 10_000}, nil)
		c, err := Dial(ctx, srv.url, Options{HTTPClient: httpClient(kind)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c.Queue(ns, "bench")
	}
	parallel := func(b *testing.B, call func() error) {
		b.ReportAllocs()
		b.SetParallelism(8) // 16 callers on 2 cores
		c0 := proccpu.Used()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(proccpu.Used()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	}
	for _, kind := range []string{"plain", "onewrite", "h2c"} {
		b.Run(kind+"/enqueue", func(b *testing.B) {
			q := queue(b, kind)
			parallel(b, func() error {
				_, err := q.Enqueue(ctx, engine.Task{Payload: payload})
				return err
			})
		})
		b.Run(kind+"/claim100+completebatch", func(b *testing.B) {
			q := queue(b, kind)
			tasks := make([]engine.Task, 1000)
			for i := range tasks {
				tasks[i].Payload = payload
			}
			for n := 0; n < 100*(b.N+16); n += len(tasks) {
				if _, err := q.EnqueueBatch(ctx, tasks); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			parallel(b, func() error {
				ls, err := q.Claim(ctx, "w", time.Minute, 100)
				if err == nil {
					_, err = q.CompleteBatch(ctx, ls)
				}
				return err
			})
		})
	}
}

// BenchmarkSession compares the two transports of a client to a server on
// loopback (in memory, so the network and the codecs are what is timed):
// "lone" is one caller making one Enqueue at a time (p50-µs is the median
// call); "async1024" keeps 1,024 enqueues in flight, from one goroutine
// through EnqueueAsync on the session, and from 1,024 goroutines on the
// unary transport, whose EnqueueAsync is synchronous. cpu-µs/op is the
// CPU of the whole process (client and server) per enqueue.
func BenchmarkSession(b *testing.B) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	payload := []byte(`{"to":"a@b","n":42,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	const inflight = 1024
	for _, tr := range []struct {
		name string
		t    Transport
	}{{"session", TransportSession}, {"unary", TransportUnary}} {
		queue := func(b *testing.B) (engine.Queue, *Client) {
			db, err := engine.OpenInMemory(engine.Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			srv := serve(b, db, "127.0.0.1:0", server.Options{MaxCalls: 2 * inflight}, nil)
			c, err := Dial(ctx, srv.url, Options{Transport: tr.t})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			q := c.Queue(ns, "bench")
			if _, err := q.Enqueue(ctx, engine.Task{}); err != nil { // the session opened
				b.Fatal(err)
			}
			return q, c
		}
		b.Run(tr.name+"/lone", func(b *testing.B) {
			q, _ := queue(b)
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			c0 := proccpu.Used()
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				if _, err := q.Enqueue(ctx, engine.Task{Payload: payload}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			b.ReportMetric(float64(proccpu.Used()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/float64(time.Microsecond), "p50-µs")
		})
		b.Run(tr.name+"/async1024", func(b *testing.B) {
			q, _ := queue(b)
			b.ReportAllocs()
			c0 := proccpu.Used()
			b.ResetTimer()
			if tr.t == TransportSession {
				ring := make([]*engine.Pending, 0, inflight)
				wait := func(p *engine.Pending) {
					if _, err := p.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				for i := range b.N {
					if len(ring) == inflight {
						wait(ring[i%inflight])
						ring[i%inflight] = q.EnqueueAsync(ctx, engine.Task{Payload: payload})
						continue
					}
					ring = append(ring, q.EnqueueAsync(ctx, engine.Task{Payload: payload}))
				}
				for _, p := range ring {
					wait(p)
				}
			} else {
				var next atomic.Int64
				var wg sync.WaitGroup
				for range inflight {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if _, err := q.EnqueueAsync(ctx, engine.Task{Payload: payload}).Wait(ctx); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
			b.StopTimer()
			b.ReportMetric(float64(proccpu.Used()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}

// BenchmarkSessionDisk is the session transport to a server whose DB is on
// disk, as `docket serve` runs: "nosync" (SyncNever: each batch of calls
// writes the log, no fsync) and "sync" (SyncAlways). "lone" is one caller
// making one Enqueue at a time (p50-µs its median call), "callers16"
// sixteen callers doing so at once (W2's shape), "async1024" 1,024
// EnqueueAsync in flight from one goroutine (W1P's). cpu-µs/op is the
// CPU of the whole process (client and server) per enqueue.
func BenchmarkSessionDisk(b *testing.B) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	payload := []byte(`{"to":"a@b","n":42,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	for _, mode := range []struct {
		name string
		d    engine.Durability
	}{{"nosync", engine.SyncNever}, {"sync", engine.SyncAlways}} {
		var db *engine.DB
		queue := func(b *testing.B) engine.Queue {
			var err error
			db, err = engine.Open(b.TempDir(), engine.Options{Logger: quiet, Durability: mode.d})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			srv := serve(b, db, "127.0.0.1:0", server.Options{MaxCalls: 4096}, nil)
			c, err := Dial(ctx, srv.url, Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			q := c.Queue(ns, "bench")
			if _, err := q.Enqueue(ctx, engine.Task{}); err != nil { // the session opened
				b.Fatal(err)
			}
			return q
		}
		b.Run(mode.name+"/lone", func(b *testing.B) {
			q := queue(b)
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			c0 := proccpu.Used()
			r0, w0 := processIO()
			s0 := db.Stats().LogSyncs
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				if _, err := q.Enqueue(ctx, engine.Task{Payload: payload}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			b.ReportMetric(float64(proccpu.Used()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
			r1, w1 := processIO()
			b.ReportMetric(float64(r1-r0)/float64(b.N), "reads/op")
			b.ReportMetric(float64(w1-w0)/float64(b.N), "writes/op")
			if mode.d == engine.SyncAlways {
				b.ReportMetric(float64(db.Stats().LogSyncs-s0)/float64(b.N), "fsyncs/op")
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/float64(time.Microsecond), "p50-µs")
		})
		b.Run(mode.name+"/callers16", func(b *testing.B) {
			q := queue(b)
			b.ReportAllocs()
			c0 := proccpu.Used()
			r0, w0 := processIO()
			s0 := db.Stats().LogSyncs
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := q.Enqueue(ctx, engine.Task{Payload: payload}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(proccpu.Used()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
			r1, w1 := processIO()
			b.ReportMetric(float64(r1-r0)/float64(b.N), "reads/op")
			b.ReportMetric(float64(w1-w0)/float64(b.N), "writes/op")
			if mode.d == engine.SyncAlways {
				b.ReportMetric(float64(db.Stats().LogSyncs-s0)/float64(b.N), "fsyncs/op")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
		b.Run(mode.name+"/async1024", func(b *testing.B) {
			q := queue(b)
			const inflight = 1024
			b.ReportAllocs()
			c0 := proccpu.Used()
			r0, w0 := processIO()
			s0 := db.Stats().LogSyncs
			b.ResetTimer()
			ring := make([]*engine.Pending, 0, inflight)
			wait := func(p *engine.Pending) {
				if _, err := p.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			for i := range b.N {
				if len(ring) == inflight {
					wait(ring[i%inflight])
					ring[i%inflight] = q.EnqueueAsync(ctx, engine.Task{Payload: payload})
					continue
				}
				ring = append(ring, q.EnqueueAsync(ctx, engine.Task{Payload: payload}))
			}
			for _, p := range ring {
				wait(p)
			}
			b.StopTimer()
			b.ReportMetric(float64(proccpu.Used()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
			r1, w1 := processIO()
			b.ReportMetric(float64(r1-r0)/float64(b.N), "reads/op")
			b.ReportMetric(float64(w1-w0)/float64(b.N), "writes/op")
			if mode.d == engine.SyncAlways {
				b.ReportMetric(float64(db.Stats().LogSyncs-s0)/float64(b.N), "fsyncs/op")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
