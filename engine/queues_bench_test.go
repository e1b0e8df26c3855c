package engine

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// benchTenants fills a DB with n queues of other tenants, spread over
// spaces namespaces, and one namespace, acme/prod, of 10 queues that
// caller "alice" may read.
func benchTenants(tb testing.TB, db *DB, n, spaces int) {
	tb.Helper()
	for i := range n {
		q := db.Queue(NS("other", fmt.Sprintf("s%06d", i%spaces)), fmt.Sprintf("q%06d", i))
		if _, err := q.Enqueue(ctx, Task{}); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range 10 {
		if _, err := db.Queue(ns, fmt.Sprintf("mine%d", i)).Enqueue(ctx, Task{}); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkQueuesOtherTenants: DB.Queues by a caller who may read one
// namespace among 50,000 queues of others, and the p99 of another
// tenant's KV.Get while it runs.
func BenchmarkQueuesOtherTenants(b *testing.B) {
	for _, layout := range []struct {
		name   string
		spaces int
	}{{"50000_queues_in_100_namespaces", 100}, {"50000_queues_in_50000_namespaces", 50_000}} {
		for _, auth := range []struct {
			name string
			a    Authorizer
		}{
			{"policy", Policy{"alice": {{Project: "acme", Scope: "prod", Perms: PermRead}}, "bob": {{Project: "*", Scope: "*", Perms: PermAll}}}},
			{"opaque", opaque{Policy{"alice": {{Project: "acme", Scope: "prod", Perms: PermRead}}, "bob": {{Project: "*", Scope: "*", Perms: PermAll}}}}},
		} {
			b.Run(layout.name+"/"+auth.name, func(b *testing.B) {
				db, err := OpenInMemory(Options{Authorizer: auth.a})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				benchTenants(b, db, 50_000, layout.spaces)
				alice, bob := db.As(Caller{ID: "alice"}), db.As(Caller{ID: "bob"}).KV(NS("other", "s000001"))
				if _, err := bob.Commit(ctx, Set("k", []byte("v"))); err != nil {
					b.Fatal(err)
				}
				stop := make(chan struct{})
				var lat []time.Duration
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						t0 := time.Now()
						if _, err := bob.Get(ctx, "k"); err != nil {
							panic(err)
						}
						lat = append(lat, time.Since(t0))
						time.Sleep(100 * time.Microsecond) // paced, as a tenant's calls are
					}
				}()
				b.ResetTimer()
				for b.Loop() {
					qs, err := alice.Queues(ctx)
					if err != nil || len(qs) != 10 {
						b.Fatal(len(qs), err)
					}
				}
				b.StopTimer()
				close(stop)
				wg.Wait()
				slices.Sort(lat)
				if len(lat) > 0 {
					b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "kvget-p99-µs")
					b.ReportMetric(float64(lat[len(lat)-1])/1e3, "kvget-max-µs")
				}
			})
		}
	}
}

// opaque is an Authorizer that cannot list grants.
type opaque struct{ p Policy }

func (o opaque) Allowed(c Caller, ns Namespace, want Perm) Perm { return o.p.Allowed(c, ns, want) }
