package ui

import (
	"testing"

	"github.com/docketdb/docket/engine"
)

// TestOverviewShowsQuotas: the memory table shows each namespace's quota
// when one has a quota, "none" for the others, and no column when none
// has.
func TestOverviewShowsQuotas(t *testing.T) {
	e := newEnv(t, Options{}, func(o *engine.Options) { o.MaxMemory = 64 << 10 })
	e.enqueue(e.queue("q"), engine.Task{})
	e.enqueue(e.db.Queue(engine.NS("acme", "small"), "q"), engine.Task{})
	mustNotContain(t, e.mustGet("/docket/"), `<th scope="col" class="num">Quota</th>`)
	if err := e.db.SetQuota(ctx, engine.NS("acme", "small"), engine.Quota{MaxTasks: 1000, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, e.mustGet("/docket/"), `<th scope="col" class="num">Quota</th>`,
		`<td class="num quota">1,000 tasks, 1.0 MiB</td>`, `<td class="num quota">none</td>`)
}
