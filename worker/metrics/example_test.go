package metrics_test

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
	"github.com/docketdb/docket/worker/metrics"
)

// Wiring a Collector: as the engine's observer, as worker middleware, and
// as a Prometheus collector reading the DB at scrape time.
func Example() {
	c := metrics.New(metrics.Options{})
	db, err := engine.Open("/var/lib/app/docket", engine.Options{Observer: c})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	c.Watch(db)
	prometheus.MustRegister(c)

	w := worker.New(db, worker.Options{})
	w.Use(c.Middleware())
	w.HandleFunc(engine.NS("shop", "prod"), "emails", func(ctx context.Context, t *worker.Task) error {
		return nil
	}, worker.QueueOptions{Concurrency: 8})

	http.Handle("/metrics", promhttp.Handler())
	go http.ListenAndServe(":9090", nil)
	w.Run(context.Background())
}
