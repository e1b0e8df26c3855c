package client

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
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
		c0 := processCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(processCPU()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
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

// BenchmarkCoalesce measures 16 callers enqueueing through one client to
// a server on loopback, and one caller ("lone"), with coalescing
// ("coalesce") and without ("single"), in memory and at SyncAlways:
// cpu-µs/op is the CPU of the whole process per enqueue, requests/op the
// HTTP requests per enqueue.
func BenchmarkCoalesce(b *testing.B) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	payload := []byte(`{"to":"a@b","n":42,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	for _, tc := range []struct{ disk, lone bool }{{false, false}, {true, false}, {false, true}} {
		disk := tc.disk
		for _, single := range []bool{true, false} {
			name := "memory"
			if disk {
				name = "always"
			}
			if tc.lone {
				name += "/lone"
			}
			if single {
				name += "/single"
			} else {
				name += "/coalesce"
			}
			b.Run(name, func(b *testing.B) {
				var db *engine.DB
				var err error
				if disk {
					db, err = engine.Open(b.TempDir(), engine.Options{Logger: quiet})
				} else {
					db, err = engine.OpenInMemory(engine.Options{Logger: quiet})
				}
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Close() })
				var requests atomic.Int64
				srv := serve(b, db, "127.0.0.1:0", server.Options{}, func(next http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						requests.Add(1)
						next.ServeHTTP(w, r)
					})
				})
				c, err := Dial(ctx, srv.url, Options{Transport: map[bool]Transport{true: TransportUnary}[single]})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.Close() })
				q := c.Queue(ns, "bench")
				b.ReportAllocs()
				if tc.lone {
					b.SetParallelism(1)
				} else {
					b.SetParallelism(8) // 16 callers on 2 cores
				}
				c0, r0 := processCPU(), requests.Load()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := q.Enqueue(ctx, engine.Task{Payload: payload}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(processCPU()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
				b.ReportMetric(float64(requests.Load()-r0)/float64(b.N), "requests/op")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			})
		}
	}
}
