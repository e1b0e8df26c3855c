package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// TestRescheduleFromTheTaskPage: a scheduled task's page offers the
// reschedule form; posting it moves the task's due time and priority; bad
// input and a missing CSRF token change nothing; a dead task's page does
// not offer it, and posting for one reports the conflict.
func TestRescheduleFromTheTaskPage(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	id := e.enqueue(q, engine.Task{Delay: time.Hour})
	dead := e.kill(q, "boom")
	page := fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", id)
	mustContain(t, e.mustGet(page), `value="reschedule"`, `name="priority"`)
	if body := e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", dead)); strings.Contains(body, `value="reschedule"`) {
		t.Fatal("a dead task's page offers reschedule")
	}
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf": {e.csrf()}, "op": {"reschedule"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "id": {fmt.Sprint(id)}, "confirm": {"yes"}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	for _, bad := range []url.Values{
		form(),
		form("in", "soon"),
		form("in", "-1h"),
		form("priority", "high"),
	} {
		if st, body := e.post("/docket/action", bad); st != http.StatusBadRequest || !strings.Contains(body, "Nothing changed") {
			t.Errorf("%v: %d\n%.300s", bad, st, body)
		}
	}
	noCSRF := form("in", "2h")
	noCSRF.Del("csrf")
	if st, _ := e.post("/docket/action", noCSRF); st == http.StatusOK {
		t.Error("an action without its CSRF token was taken")
	}
	if info, _ := q.Get(context.Background(), id); !info.NotBefore.Equal(t0.Add(time.Hour)) || info.Priority != 0 {
		t.Fatalf("refused forms changed the task: %+v", info)
	}
	mustContain(t, e.mustGetPost(form("in", "2h", "priority", "7")), "Rescheduled 1 of 1 task.")
	info, err := q.Get(context.Background(), id)
	if err != nil || !info.NotBefore.Equal(t0.Add(2*time.Hour)) || info.Priority != 7 || info.State != engine.Scheduled {
		t.Fatalf("after reschedule: %+v %v", info, err)
	}
	deadForm := form("in", "0")
	deadForm.Set("id", fmt.Sprint(dead))
	if st, body := e.post("/docket/action", deadForm); st != http.StatusConflict || !strings.Contains(body, "dead") {
		t.Fatalf("reschedule of a dead task: %d\n%.300s", st, body)
	}
}
