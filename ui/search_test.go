package ui

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)

// bulkForm reads the queue page's bulk form: its hidden fields.
func bulkForm(t *testing.T, body string) url.Values {
	t.Helper()
	i := strings.Index(body, `id="bulk-form"`)
	if i < 0 {
		t.Fatalf("no bulk form on the page:\n%s", body)
	}
	end := strings.Index(body[i:], "</form>")
	f := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(body[i:i+end], -1) {
		f.Set(m[1], html.UnescapeString(m[2]))
	}
	return f
}

// TestBulkActionConfirmsTheCount: a filter beyond the scan window counts
// every match; the bulk action's confirmation states that count, and the
// action takes exactly those tasks: one enqueued after the count, or not
// matching, is left.
func TestBulkActionConfirmsTheCount(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true, ScanWindow: 10, PageSize: 5})
	q := e.queue("jobs")
	var want []uint64
	for i := range 60 {
		tk := engine.Task{Kind: "other", Headers: map[string]string{"tenant": "b"}}
		if i%3 == 0 {
			tk.Kind, tk.Headers["tenant"] = "mail", "a"
		}
		id := e.enqueue(q, tk)
		if i%3 == 0 {
			want = append(want, id)
		}
	}
	body := e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&kind=mail&header=tenant%3Da")
	mustContain(t, body, "20 tasks match in the whole queue", `value="bulk-cancel"`, "Cancel 20</button>")
	mustNotContain(t, body, `value="bulk-retry"`, `value="bulk-delete"`) // nothing on the ready tab to retry or delete
	form := bulkForm(t, body)
	form.Set("op", "bulk-cancel")
	late := e.enqueue(q, engine.Task{Kind: "mail", Headers: map[string]string{"tenant": "a"}})
	st, confirm := e.post("/docket/action", form)
	if st != http.StatusOK {
		t.Fatalf("confirm: %d\n%s", st, confirm)
	}
	mustContain(t, confirm, "Cancel 20 tasks?", `name="confirm" value="yes"`, "ready tasks with kind &#34;mail&#34;, header &#34;tenant=a&#34;")
	if c, _ := q.Counts(ctx); c.Ready != 61 {
		t.Fatalf("the confirmation changed something: %+v", c)
	}
	form.Set("confirm", "yes")
	st, rep := e.post("/docket/action", form)
	if st != http.StatusOK {
		t.Fatalf("bulk: %d\n%s", st, rep)
	}
	mustContain(t, rep, "Cancelled 20 tasks.")
	for _, id := range want {
		if s := e.state(q, id); !strings.Contains(s, "not found") {
			t.Fatalf("task %d is %s after the bulk cancel", id, s)
		}
	}
	if c, _ := q.Counts(ctx); c.Ready != 41 || e.state(q, late) != "ready" {
		t.Fatalf("after: %+v, the late task %s", c, e.state(q, late))
	}
}

// TestBulkActionSkipsWithReasons: a bulk delete on the dead tab deletes
// them; a retry on the scheduled tab makes timers due; a read-only
// dashboard offers no bulk form and refuses one.
func TestBulkActionSkipsWithReasons(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	for range 3 {
		e.kill(q, "smtp timeout")
	}
	e.kill(q, "bad payload")
	body := e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=dead&err=TIMEOUT")
	mustContain(t, body, "3 tasks match in the whole queue", "Retry 3</button>", "Delete 3</button>")
	form := bulkForm(t, body)
	form.Set("op", "bulk-delete")
	form.Set("confirm", "yes")
	if st, rep := e.post("/docket/action", form); st != http.StatusOK || !strings.Contains(rep, "Deleted 3 tasks.") {
		t.Fatalf("bulk delete: %d\n%s", st, rep)
	}
	if c, _ := q.Counts(ctx); c.Dead != 1 {
		t.Fatalf("after: %+v", c)
	}
	e.enqueue(q, engine.Task{Kind: "timer", Delay: time.Hour})
	body = e.mustGet("/docket/queue?p=acme&s=prod&q=jobs&state=scheduled&kind=timer")
	form = bulkForm(t, body)
	form.Set("op", "bulk-run-now")
	form.Set("confirm", "yes")
	if st, rep := e.post("/docket/action", form); st != http.StatusOK || !strings.Contains(rep, "Made due 1 task.") {
		t.Fatalf("bulk run now: %d\n%s", st, rep)
	}
}

// TestBulkActionRefusesBadInput: a bad filter or a form without the
// count's bounds is refused with a message, and nothing changes.
func TestBulkActionRefusesBadInput(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	e.enqueue(q, engine.Task{Kind: "mail"})
	tok := e.csrf()
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"older": {"soon"}, "upto": {"1"}, "at": {"1"}}, "older than &#34;soon&#34; is not a duration"},
		{url.Values{"min": {"9"}, "max": {"3"}, "upto": {"9"}, "at": {"1"}}, "id range 9..3 is empty"},
		{url.Values{"kind": {"mail"}}, "needs the bounds of the count"},
		{url.Values{"kind": {"mail"}, "upto": {"0"}, "at": {"1"}}, "no task matched"},
		{url.Values{"header": {"=v"}, "upto": {"1"}, "at": {"1"}}, "names no key"},
	} {
		f := c.form
		f.Set("csrf", tok)
		f.Set("op", "bulk-cancel")
		f.Set("confirm", "yes")
		f.Set("p", "acme")
		f.Set("s", "prod")
		f.Set("q", "jobs")
		st, body := e.post("/docket/action", f)
		if st != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%v: %d, want 400 saying %q\n%s", c.form, st, c.want, body)
		}
	}
	if st, _ := e.get("/docket/queue?p=acme&s=prod&q=jobs&newer=yesterday"); st != http.StatusBadRequest {
		t.Errorf("a bad age on the queue page: %d", st)
	}
	if c, _ := q.Counts(ctx); c.Ready != 1 {
		t.Fatalf("a refused action changed the queue: %+v", c)
	}
	ro := newEnv(t, Options{})
	ro.enqueue(ro.queue("jobs"), engine.Task{Kind: "mail"})
	mustNotContain(t, ro.mustGet("/docket/queue?p=acme&s=prod&q=jobs&kind=mail"), `id="bulk-form"`)
}
