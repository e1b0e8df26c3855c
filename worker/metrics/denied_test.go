package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/docketdb/docket/engine"
)

// TestInventedNamespacesLeaveNoState: 50,000 refused calls, each naming a
// namespace a caller made up, leave the Collector with no state per name
// and one series for all of them; refusals in a namespace with queues keep
// their own series, which goes with the namespace's last queue.
func TestInventedNamespacesLeaveNoState(t *testing.T) {
	const invented = 50_000
	bg := context.Background()
	c := New(Options{Logger: slog.New(slog.DiscardHandler)})
	db, err := c.OpenInMemory(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	acme := engine.NS("acme", "prod")
	if _, err := db.Queue(acme, "orders").Enqueue(bg, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	eve := db.As(engine.Caller{ID: "eve"})
	if _, err := eve.Queue(acme, "orders").Enqueue(bg, engine.Task{}); !errors.Is(err, engine.ErrPermission) {
		t.Fatalf("denied enqueue: %v", err)
	}
	for i := range invented {
		ns := engine.NS(fmt.Sprintf("p%d", i), fmt.Sprintf("s%d", i))
		if _, err := eve.Queue(ns, "q").Enqueue(bg, engine.Task{}); !errors.Is(err, engine.ErrPermission) {
			t.Fatalf("enqueue %d: %v", i, err)
		}
	}

	denied := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "docket_calls_denied_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				var l [2]string
				for _, lp := range m.GetLabel() {
					switch lp.GetName() {
					case "project":
						l[0] = lp.GetValue()
					case "scope":
						l[1] = lp.GetValue()
					}
				}
				out[l[0]+"/"+l[1]] = m.GetCounter().GetValue()
			}
		}
		return out
	}
	if got := denied(); len(got) != 2 || got["acme/prod"] != 1 || got["/"] != invented {
		t.Fatalf("denied series %v, want acme/prod 1 and one series of %d", got, invented)
	}
	c.mu.RLock()
	state := fmt.Sprintf("%d denied counters, %d namespaces, %d queues", len(c.denied), len(c.nsQueues), len(c.queues))
	c.mu.RUnlock()
	if state != "1 denied counters, 1 namespaces, 1 queues" {
		t.Fatalf("the Collector keeps %s after %d invented names", state, invented)
	}

	// The namespace's last queue goes: so does its series, and a later
	// refusal there counts with the others.
	ls, err := db.Queue(acme, "orders").Claim(bg, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	if _, err := db.Queue(acme, "orders").Complete(bg, ls[0], engine.Done{}); err != nil {
		t.Fatal(err)
	}
	denied() // the scrape that saw the events of the queue keeps it
	denied() // the next one, with no event and no queue listed, drops it
	if _, err := eve.Queue(acme, "orders").Enqueue(bg, engine.Task{}); !errors.Is(err, engine.ErrPermission) {
		t.Fatalf("denied enqueue: %v", err)
	}
	if got := denied(); len(got) != 1 || got["/"] != invented+1 {
		t.Fatalf("denied series %v after the namespace's queues went", got)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.denied) != 0 || len(c.nsQueues) != 0 || len(c.queues) != 0 {
		t.Fatalf("state left: %d denied, %d namespaces, %d queues", len(c.denied), len(c.nsQueues), len(c.queues))
	}
}
