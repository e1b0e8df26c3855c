package ui

import (
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
)

// TestOverviewShowsMemory: the overview shows the state's memory against
// its budget, alarmed past 80%, and the namespaces that hold most; a
// caller's view shows neither.
func TestOverviewShowsMemory(t *testing.T) {
	e := newEnv(t, Options{}, func(o *engine.Options) { o.MaxMemory = 64 << 10 })
	payload := []byte(`"` + strings.Repeat("x", 1022) + `"`)
	for range 20 {
		e.enqueue(e.queue("big"), engine.Task{Payload: payload})
	}
	e.enqueue(e.db.Queue(engine.NS("acme", "small"), "q"), engine.Task{})
	body := e.mustGet("/docket/")
	mustContain(t, body, `class="card mem opt"`, "of 64.0 KiB", "Memory by namespace", "acme/prod", "acme/small")
	if strings.Index(body, "acme/prod") > strings.Index(body, "acme/small</th>") {
		t.Fatal("the namespaces are not listed largest first")
	}
	for range 30 {
		if _, err := e.queue("big").Enqueue(ctx, engine.Task{Payload: payload}); err != nil {
			break
		}
	}
	mustContain(t, e.mustGet("/docket/"), `class="card mem opt alarm"`)

	e.serve(e.db.As(engine.Caller{ID: "viewer"}), Options{})
	mustNotContain(t, e.mustGet("/docket/"), "Memory by namespace", `class="card mem`)
}
