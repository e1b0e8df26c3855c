package client

import (
	"context"
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
