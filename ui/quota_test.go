package ui

import (
	"net/http"
	"net/url"
	"strings"
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

// TestQuotaFromTheQueuePage: the queue page shows its namespace's usage
// and quota; an admin sets the quota with its form, and empty fields
// remove it; bad input and a missing CSRF token change nothing; a reader
// sees the quota without the form and is refused the action.
func TestQuotaFromTheQueuePage(t *testing.T) {
	e, who, q := rolesEnv(t)
	adm := e.db.As(engine.Caller{ID: "admin"})
	e.enqueue(q, engine.Task{})
	page := "/docket/queue?p=acme&s=prod&q=jobs"
	*who = "admin"
	mustContain(t, e.mustGet(page), `id="quota"`, `1 tasks`, `no quota`, `value="set-quota"`)
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf": {e.csrf()}, "op": {"set-quota"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "confirm": {"yes"}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	for _, bad := range []url.Values{
		form("max_tasks", "many"),
		form("max_tasks", "-1"),
		form("max_bytes", "lots"),
		form("max_bytes", "-5MiB"),
	} {
		if st, body := e.post("/docket/action", bad); st != http.StatusBadRequest || !strings.Contains(body, "Nothing changed") {
			t.Errorf("%v: %d\n%.300s", bad, st, body)
		}
	}
	noCSRF := form("max_tasks", "5")
	noCSRF.Del("csrf")
	if st, _ := e.post("/docket/action", noCSRF); st == http.StatusOK {
		t.Error("an action without its CSRF token was taken")
	}
	if got, _, err := adm.Quota(ctx, ns); err != nil || got != (engine.Quota{}) {
		t.Fatalf("refused forms set a quota: %+v %v", got, err)
	}
	mustContain(t, e.mustGetPost(form("max_tasks", "1000", "max_bytes", "64MiB")),
		"Set the quota of namespace acme/prod: at most 1,000 tasks, at most 64.0 MiB.")
	if got, _, err := adm.Quota(ctx, ns); err != nil || got != (engine.Quota{MaxTasks: 1000, MaxBytes: 64 << 20}) {
		t.Fatalf("after the form: %+v %v", got, err)
	}
	// The form shows the quota as it posts it back.
	mustContain(t, e.mustGet(page), `name="max_tasks" value="1000"`, `name="max_bytes" value="64MiB"`, `of 1,000 tasks, 64.0 MiB`)
	*who = "reader"
	body := e.mustGet(page)
	mustContain(t, body, `id="quota"`, `of 1,000 tasks, 64.0 MiB`)
	mustNotContain(t, body, `value="set-quota"`)
	if st, _ := e.post("/docket/action", form("max_tasks", "1")); st != http.StatusForbidden {
		t.Fatalf("a reader set a quota: %d", st)
	}
	*who = "admin"
	mustContain(t, e.mustGetPost(form()), "Removed the quota of namespace acme/prod.")
	if got, _, err := adm.Quota(ctx, ns); err != nil || got != (engine.Quota{}) {
		t.Fatalf("after an empty form: %+v %v", got, err)
	}
}

// TestOverviewShowsQuotasToACaller: a signed-in caller's view has no
// memory figures of the whole state, but the overview still lists the
// namespaces it may read with what each holds and its quota.
func TestOverviewShowsQuotasToACaller(t *testing.T) {
	e, who, q := rolesEnv(t)
	e.enqueue(q, engine.Task{})
	if err := e.db.As(engine.Caller{ID: "admin"}).SetQuota(ctx, ns, engine.Quota{MaxTasks: 50}); err != nil {
		t.Fatal(err)
	}
	*who = "reader"
	body := e.mustGet("/docket/")
	mustContain(t, body, `id="memory"`, `<th scope="row">acme/prod</th><td class="num">1</td>`, `<td class="num quota">50 tasks</td>`)
	mustNotContain(t, body, `class="card mem`)
}

// TestQuotaWithoutQuotas: a dashboard over an API that keeps no quotas
// shows no quota panel and refuses the action, changing nothing.
func TestQuotaWithoutQuotas(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	e.enqueue(e.queue("jobs"), engine.Task{})
	e.serve(struct{ engine.API }{e.db}, Options{AllowActions: true})
	mustNotContain(t, e.mustGet("/docket/queue?p=acme&s=prod&q=jobs"), `id="quota"`)
	form := url.Values{"csrf": {e.csrf()}, "op": {"set-quota"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "confirm": {"yes"}, "max_tasks": {"5"}}
	if st, body := e.post("/docket/action", form); st != http.StatusBadRequest || !strings.Contains(body, "keeps no quotas") {
		t.Fatalf("set-quota without quotas: %d\n%.300s", st, body)
	}
	if q, _, err := e.db.Quota(ctx, ns); err != nil || q != (engine.Quota{}) {
		t.Fatalf("a refused action set a quota: %+v %v", q, err)
	}
}
