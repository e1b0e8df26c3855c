package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// killMany dead-letters one task per message, in few commits.
func (e *env) killMany(q engine.Queue, msgs []string) []uint64 {
	e.t.Helper()
	tasks := make([]engine.Task, len(msgs))
	for i := range tasks {
		tasks[i] = engine.Task{Kind: "k", MaxAttempts: 1, Payload: []byte(`{}`)}
	}
	var ids []uint64
	for lo := 0; lo < len(tasks); lo += engine.MaxBatch {
		hi := min(lo+engine.MaxBatch, len(tasks))
		rs, err := q.EnqueueBatch(ctx, tasks[lo:hi])
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
	}
	byID := map[uint64]string{}
	for i, id := range ids {
		byID[id] = msgs[i]
	}
	for done := 0; done < len(ids); {
		ls, err := q.Claim(ctx, "w", time.Minute, engine.MaxBatch)
		if err != nil || len(ls) == 0 {
			e.t.Fatalf("claim: %d %v", len(ls), err)
		}
		for _, l := range ls {
			if err := q.Fail(ctx, l, engine.Failure{Err: byID[l.ID], Permanent: true}); err != nil {
				e.t.Fatal(err)
			}
		}
		done += len(ls)
	}
	return ids
}

// idErrors are n failures of five causes whose texts carry ids, numbers,
// addresses and quoted values, as real failures do.
func idErrors(n int) []string {
	out := make([]string, n)
	for i := range out {
		switch i % 5 {
		case 0:
			out[i] = fmt.Sprintf("POST https://hooks.example.com/orders/%d: 503 Service Unavailable", 10000+i)
		case 1:
			out[i] = fmt.Sprintf("order %d: customer %08x-1c2d-4e5f-8a9b-%012x not found", i, i*7919, i*104729)
		case 2:
			out[i] = fmt.Sprintf("dial tcp 203.0.113.%d:443: i/o timeout after %dms", i%250, 3000+i)
		case 3:
			out[i] = fmt.Sprintf("json: cannot unmarshal %q into Go value of type int\ngoroutine %d [running]:\nmain.handle(0x%x)", fmt.Sprint("v", i), i, 0xc000010000+i)
		case 4:
			out[i] = fmt.Sprintf("lock 'tenant-%d' held by worker-%d since 2026-12-01T09:%02d:00Z", i, i%17, i%60)
		}
	}
	return out
}

// TestDeadPageStaysSmall: 2,000 failures whose texts carry ids make a
// handful of groups, and the dead-letter page, which refreshes itself, stays
// small.
func TestDeadPageStaysSmall(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	e.killMany(e.queue("hooks"), idErrors(2000))
	body := e.mustGet("/docket/dead?p=acme&s=prod&q=hooks")
	t.Logf("dead-letter page with 2,000 dead tasks: %d bytes", len(body))
	if len(body) > 64<<10 {
		t.Fatalf("the dead-letter page is %d bytes", len(body))
	}
}

func TestErrKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"boom", "boom"},
		{"x failed, then y", "x failed, then y"},
		{"POST https://hooks.example.com/orders/10042: 503 Service Unavailable", "POST https://hooks.example.com/orders/<n>: <n> Service Unavailable"},
		{"customer 3fa85f64-5717-4562-b3fc-2c963f66afa6 not found", "customer <uuid> not found"},
		{"bad pointer 0xc000012345 in frame deadbeef0042", "bad pointer <hex> in frame <hex>"},
		{"trace 4bf92f3577b34da6a3ce929d0e0e4736 lost", "trace <hex> lost"},
		{"a facade decade", "a facade decade"}, // words of the letters a to f stay
		{`json: cannot unmarshal "v12" into Go value of type int`, `json: cannot unmarshal "…" into Go value of type int`},
		{`key "a \"quoted\" b" missing`, `key "…" missing`},
		{"lock 'tenant-7' held since 2026-12-01T09:05:00Z", `lock "…" held since <time>`},
		{"can't reach the server's port 443", "can't reach the server's port <n>"},
		{"dial tcp 203.0.113.9:443: i/o timeout after 3001ms", "dial tcp <n>:<n>: i/o timeout after <n>ms"},
		{"sha256 mismatch", "sha256 mismatch"},
		{"panic: boom\ngoroutine 7 [running]:\nmain.f(0x1)", "panic: boom"},
		{"  spaced   out\t", "spaced out"},
		{"run `make 12` first", `run "…" first`},
		{"", ""},
	} {
		got := errKey(c.in)
		if got != c.want {
			t.Errorf("errKey(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := errKey(got); again != got {
			t.Errorf("errKey is not idempotent on %q: %q", got, again)
		}
	}
	long := strings.Repeat("word ", 200)
	if k := errKey(long); len([]rune(k)) != maxErrKey+1 || !strings.HasSuffix(k, "…") {
		t.Errorf("a long message's key has %d runes", len([]rune(k)))
	}
}

// TestErrorGroupsStayGroups: 2,000 failures with ids in their texts make
// five groups, paged; the group's redrive and its "more" link act on the
// whole group, whose messages differ.
func TestErrorGroupsStayGroups(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("hooks")
	ids := e.killMany(q, idErrors(2000))
	groups := groupErrors(func() []engine.TaskInfo {
		p, err := q.List(ctx, engine.ListOptions{State: engine.Dead, Limit: engine.MaxBatch})
		if err != nil {
			t.Fatal(err)
		}
		return p.Tasks
	}())
	if len(groups) != 5 {
		for _, g := range groups {
			t.Logf("%d %q", g.Count, g.Key)
		}
		t.Fatalf("%d groups, want 5", len(groups))
	}
	body := e.mustGet("/docket/dead?p=acme&s=prod&q=hooks")
	mustContain(t, body, "in 5 groups by the shape of their last error", "100 or more distinct messages",
		`<pre class="err shape">order &lt;n&gt;: customer &lt;uuid&gt; not found</pre>`)
	// The group's "more" link lists its tasks.
	key := "order <n>: customer <uuid> not found"
	list := e.mustGet("/docket/queue?p=acme&s=prod&q=hooks&state=dead&group=" + url.QueryEscape(key))
	mustContain(t, list, " tasks, 50 matching.", "order 1: customer")
	// Redriving the group redrives its 400 tasks, and no other.
	form := url.Values{"csrf": {e.csrf()}, "op": {"redrive-error"}, "p": {"acme"}, "s": {"prod"}, "q": {"hooks"}, "err": {key}, "confirm": {"yes"}}
	mustContain(t, e.mustGetPost(form), "Redrove 400 tasks.")
	if s := e.state(q, ids[1]); s != "ready" {
		t.Fatalf("task of the group: %s", s)
	}
	if s := e.state(q, ids[0]); s != "dead" {
		t.Fatalf("task of another group: %s", s)
	}
	// Groups are paged.
	var many []string
	for i := range 45 {
		many = append(many, fmt.Sprintf("cause %c%c failed", 'a'+i%26, 'a'+i/26))
	}
	e.killMany(e.queue("many"), many)
	page1 := e.mustGet("/docket/dead?p=acme&s=prod&q=many")
	mustContain(t, page1, "in 45 groups", "Groups 1–20, largest first.", `dead?g=20&amp;p=acme&amp;q=many&amp;s=prod" rel="next"`)
	page3 := e.mustGet("/docket/dead?p=acme&s=prod&q=many&g=40")
	mustContain(t, page3, "Groups 41–45", `rel="prev"`)
	mustNotContain(t, page3, `rel="next"`)
	if n := strings.Count(page3, `<article class="group panel">`); n != 5 {
		t.Fatalf("%d groups on the last page", n)
	}
	if st, body := e.get("/docket/dead?p=acme&s=prod&q=many&g=7"); st != http.StatusBadRequest || !strings.Contains(body, "not a multiple of 20") {
		t.Fatalf("a bad offset: %d", st)
	}
}

// TestDeleteAllDead: the dead-letter page's "Delete all" confirms with the
// count, then deletes every dead task of the queue and nothing else, in
// one commit (the engine's bulk delete), not one commit a task.
func TestDeleteAllDead(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	dead := e.killMany(q, idErrors(7))
	ready := e.enqueue(q, engine.Task{})
	mustContain(t, e.mustGet("/docket/dead?p=acme&s=prod&q=jobs"), `value="delete-dead-all" class="danger">Delete all 7</button>`)
	form := url.Values{"csrf": {e.csrf()}, "op": {"delete-dead-all"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}}
	mustContain(t, e.mustGetPost(form), "delete every dead task of the queue (acme/prod · jobs): 7 tasks now.")
	if s := e.state(q, dead[0]); s != "dead" {
		t.Fatalf("the confirmation deleted: %s", s)
	}
	form.Set("confirm", "yes")
	commits := e.db.Stats().Commits
	mustContain(t, e.mustGetPost(form), "Deleted 7 tasks.")
	if n := e.db.Stats().Commits - commits; n != 1 {
		t.Fatalf("deleting 7 dead tasks took %d commits, want 1", n)
	}
	c, _ := q.Counts(ctx)
	if c.Dead != 0 || e.state(q, ready) != "ready" {
		t.Fatalf("after: %+v, ready task %s", c, e.state(q, ready))
	}
}
