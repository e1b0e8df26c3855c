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

// Wiring a Collector: Open makes it the engine's observer and the DB it
// reads at scrape time; Instrument adds its middleware to a Worker.
func Example() {
	c := metrics.New(metrics.Options{})
	db, err := c.Open("/var/lib/app/docket", engine.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	prometheus.MustRegister(c)

	w := worker.New(db, worker.Options{})
	c.Instrument(w)
	w.HandleFunc(engine.NS("shop", "prod"), "emails", func(ctx context.Context, t *worker.Task) error {
		return nil
	}, worker.QueueOptions{Concurrency: 8})

	http.Handle("/metrics", promhttp.Handler())
	go http.ListenAndServe(":9090", nil)
	w.Run(context.Background())
}
