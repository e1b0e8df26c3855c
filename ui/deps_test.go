package ui

import (
	"fmt"
	"testing"

	"github.com/docketdb/docket/engine"
)

// A waiting task's page lists what it waits for (links that find each
// task on its queue) and its policy; its parent's page lists it as a
// dependent; the queue page has the waiting state, counted, and shows in
// the row what each task waits for; the overview counts them.
func TestDependenciesShown(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	up, down := e.queue("extract"), e.queue("merge")
	a, b := e.enqueue(up, engine.Task{}), e.enqueue(up, engine.Task{})
	m := e.enqueue(down, engine.Task{DependsOn: []uint64{a, b}, OnParentFailure: engine.WaitOnFailure, Kind: "merge"})
	page := e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=merge&id=%d", m))
	mustContain(t, page, `class="pill s-waiting">waiting</span>`, "<dt>Waits for</dt>",
		fmt.Sprintf(`<a href="/docket/task?p=acme&amp;s=prod&amp;id=%d">%d</a>`, a, a),
		fmt.Sprintf(`<a href="/docket/task?p=acme&amp;s=prod&amp;id=%d">%d</a>`, b, b),
		"<dt>If one fails</dt><dd>keep waiting for a redrive</dd>", "waiting for 2 tasks")
	mustNotContain(t, page, "<dt>Dependents</dt>")
	parent := e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=extract&id=%d", a))
	mustContain(t, parent, "<dt>Dependents</dt>", fmt.Sprintf(`<a href="/docket/task?p=acme&amp;s=prod&amp;id=%d">%d</a>`, m, m))
	mustNotContain(t, parent, "<dt>Waits for</dt>", "<dt>If one fails</dt>")
	q := e.mustGet("/docket/queue?p=acme&s=prod&q=merge&state=waiting")
	mustContain(t, q, `state=waiting" aria-current="page">waiting <span class="n">1</span>`, "<th scope=\"col\">Waits for</th>",
		fmt.Sprintf(`<a href="/docket/task?p=acme&amp;s=prod&amp;id=%d">%d</a>`, b, b))
	mustContain(t, e.mustGet("/docket/"), `<li class="card s-waiting opt"><span class="n">1</span> <span class="l">waiting on others</span>`,
		`class="f-waiting"`)
	// Released, the task shows none of it.
	ls, err := up.Claim(ctx, "w", 60e9, 2)
	if err != nil || len(ls) != 2 {
		t.Fatal(ls, err)
	}
	for _, l := range ls {
		if _, err := up.Complete(ctx, l, engine.Done{}); err != nil {
			t.Fatal(err)
		}
	}
	page = e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=merge&id=%d", m))
	mustContain(t, page, `class="pill s-ready">ready</span>`, "<dt>If one fails</dt>")
	mustNotContain(t, page, "<dt>Waits for</dt>")
	mustNotContain(t, e.mustGet("/docket/"), "waiting on others")
}
