package ui

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/taskaction"
)

// TestRescheduleFromTheTaskPage: a scheduled task's page offers the
// generated reschedule form (due in or at, priority), labelled; posting it
// moves the task's due time (from the DB's clock) and priority; bad input
// and a missing CSRF token change nothing; a dead task's page does not
// offer it, and posting for one reports the engine's conflict.
func TestRescheduleFromTheTaskPage(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	id := e.enqueue(q, engine.Task{Delay: time.Hour})
	dead := e.kill(q, "boom")
	page := fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", id)
	mustContain(t, e.mustGet(page), `value="reschedule"`, `<label>Priority <input name="priority"`, `<label>At <input name="at"`,
		`aria-label="Reschedule this task"`, "due in (0, 10m, 2h) or at a time")
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
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{form(), "Reschedule: nothing to change: give At or Priority"},
		{form("at", " ", "priority", ""), "nothing to change"},
		{form("at", "soon"), "At &#34;soon&#34;: want an RFC 3339 time"},
		{form("at", "-1h"), "At &#34;-1h&#34;: how long from now must be 0.."},
		{form("priority", "high"), "Priority &#34;high&#34;: want a whole number"},
	} {
		if st, body := e.post("/docket/action", c.form); st != http.StatusBadRequest || !strings.Contains(body, "Nothing changed") || !strings.Contains(body, c.want) {
			t.Errorf("%v: %d, want %q\n%.600s", c.form, st, c.want, body)
		}
	}
	noCSRF := form("at", "2h")
	noCSRF.Del("csrf")
	if st, _ := e.post("/docket/action", noCSRF); st == http.StatusOK {
		t.Error("an action without its CSRF token was taken")
	}
	if info, _ := q.Get(context.Background(), id); !info.NotBefore.Equal(t0.Add(time.Hour)) || info.Priority != 0 {
		t.Fatalf("refused forms changed the task: %+v", info)
	}
	mustContain(t, e.mustGetPost(form("at", "2h", "priority", "7")), "Rescheduled 1 of 1 task.")
	info, err := q.Get(context.Background(), id)
	if err != nil || !info.NotBefore.Equal(t0.Add(2*time.Hour)) || info.Priority != 7 || info.State != engine.Scheduled {
		t.Fatalf("after reschedule: %+v %v", info, err)
	}
	mustContain(t, e.mustGetPost(form("at", "2031-01-02T03:04:05Z")), "Rescheduled 1 of 1 task.")
	if info, _ := q.Get(context.Background(), id); !info.NotBefore.Equal(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)) || info.Priority != 7 {
		t.Fatalf("after reschedule at a time: %+v", info)
	}
	deadForm := form("at", "0")
	deadForm.Set("id", fmt.Sprint(dead))
	if st, body := e.post("/docket/action", deadForm); st != http.StatusConflict || !strings.Contains(body, "dead") {
		t.Fatalf("reschedule of a dead task: %d\n%.300s", st, body)
	}
}

// TestTaskActionFormsNeedAdmin: a reader's task page offers no task
// action's form, and a reader's post of one is refused (403, nothing
// changed), as the engine refuses it when the dashboard does not know the
// caller's permissions; an admin's is taken.
func TestTaskActionFormsNeedAdmin(t *testing.T) {
	e, who, q := rolesEnv(t)
	id := e.enqueue(q, engine.Task{Delay: time.Hour})
	page := fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", id)
	*who = "reader"
	mustNotContain(t, e.mustGet(page), `value="reschedule"`, `name="at"`)
	form := url.Values{"csrf": {e.csrf()}, "op": {"reschedule"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "id": {fmt.Sprint(id)},
		"confirm": {"yes"}, "at": {"0"}, "priority": {"9"}}
	unchanged := func(name string) {
		t.Helper()
		if info, _ := q.Get(context.Background(), id); !info.NotBefore.Equal(t0.Add(time.Hour)) || info.Priority != 0 {
			t.Fatalf("%s changed the task: %+v", name, info)
		}
	}
	if st, body := e.post("/docket/action", form); st != http.StatusForbidden || !strings.Contains(body, "lacks admin") || !strings.Contains(body, "Nothing changed.") {
		t.Fatalf("a reader's reschedule: %d\n%.500s", st, body)
	}
	unchanged("a reader's reschedule")
	e.serve(&countingAPI{API: e.db.As(engine.Caller{ID: "reader"})}, Options{AllowActions: true})
	form.Set("csrf", e.csrf())
	if st, body := e.post("/docket/action", form); st != http.StatusForbidden || !strings.Contains(body, "permission denied") {
		t.Fatalf("the engine's refusal: %d\n%.500s", st, body)
	}
	unchanged("the engine's refusal")
}

// TestTaskActionFormOnAnyLiveTask: the forms are offered on a task in
// every state that is not final, in flight too, and the engine's refusal
// there is shown (409), the task left as it was; not on a completed task.
func TestTaskActionFormOnAnyLiveTask(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	ready := e.enqueue(q, engine.Task{})
	flying := e.enqueue(q, engine.Task{})
	waiting := e.enqueue(q, engine.Task{DependsOn: []uint64{flying}})
	ls, err := q.Claim(ctx, "w", time.Minute, 2)
	if err != nil || len(ls) != 2 {
		t.Fatal(ls, err)
	}
	if err := q.Snooze(ctx, ls[0], 0); err != nil { // ready again
		t.Fatal(err)
	}
	done := e.enqueue(q, engine.Task{})
	ls, err = q.Claim(ctx, "w", time.Minute, 2)
	if err != nil || len(ls) != 2 || ls[1].ID != done {
		t.Fatal(ls, err)
	}
	if err := q.Snooze(ctx, ls[0], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Complete(ctx, ls[1], engine.Done{}); err != nil {
		t.Fatal(err)
	}
	page := func(id uint64) string { return e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", id)) }
	for _, id := range []uint64{ready, flying, waiting} {
		mustContain(t, page(id), `value="reschedule"`)
	}
	mustNotContain(t, page(done), `value="reschedule"`)
	form := url.Values{"csrf": {e.csrf()}, "op": {"reschedule"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "id": {fmt.Sprint(flying)},
		"confirm": {"yes"}, "priority": {"3"}}
	if st, body := e.post("/docket/action", form); st != http.StatusConflict || !strings.Contains(body, "in-flight") {
		t.Fatalf("reschedule of a task in flight: %d\n%.500s", st, body)
	}
	if info, _ := q.Get(ctx, flying); info.State != engine.InFlight || info.Priority != 0 {
		t.Fatalf("the refusal changed the task: %+v", info)
	}
}

// TestEveryTaskActionIsOffered: each task action of engine.Queue is an op
// of the dashboard: by hand (redrive, cancel, run-now, each a button of
// the task page) or as a generated form, which a ready task's page shows
// with an input per field of its options, each labelled.
func TestEveryTaskActionIsOffered(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	id := e.enqueue(e.queue("jobs"), engine.Task{})
	body := e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", id))
	for _, a := range taskaction.Actions() {
		o, ok := ops[a.Name]
		switch {
		case !ok:
			t.Errorf("Queue.%s is no op of the dashboard", a.Method)
		case o.Task == nil:
			if a.Name != "redrive" && a.Name != "cancel" && a.Name != "run-now" {
				t.Errorf("Queue.%s is taken by a hand-written op %+v that the task page has no button for", a.Method, o)
			}
		default:
			mustContain(t, body, fmt.Sprintf(`<button name="op" value="%s" class="primary">%s</button>`, a.Name, a.Title()))
			if a.Summary() == "" {
				t.Errorf("Queue.%s has no documentation to show", a.Method)
			}
			mustContain(t, body, `<p class="action-about">`+html.EscapeString(a.Summary())+`</p>`)
			for _, f := range o.Task.Fields {
				if f.Check {
					mustContain(t, body, fmt.Sprintf(`<label><input type="checkbox" name="%s" value="true"> %s</label>`, f.Name, f.Label))
				} else {
					mustContain(t, body, fmt.Sprintf(`<label>%s <input name="%s"`, f.Label, f.Name))
				}
			}
		}
	}
}

// tagOpts are the options of tag, a task action engine.Queue does not
// have: a field of each kind, one named as a hidden input of the form.
type tagOpts struct {
	Q      string
	Due    time.Time
	Weight *int
	Every  time.Duration
	Urgent bool
}

// taggingQueue is engine.Queue with one more task action.
type taggingQueue interface {
	engine.Queue
	Tag(ctx context.Context, id uint64, o tagOpts) error
}

type tagger struct {
	engine.Queue
	got *tagOpts
}

func (q tagger) Tag(ctx context.Context, id uint64, o tagOpts) error { *q.got = o; return nil }

// TestNewTaskActionForm: a task action engine.Queue does not have, found
// on an interface that adds it, gets its form with nothing written for
// it: an input per field, labelled (a checkbox for a bool; the field named
// as a hidden input posted as set-q), read from the post with the times
// from now by the clock given, and bad input named in the form's words.
func TestNewTaskActionForm(t *testing.T) {
	var tag *taskaction.Action
	for _, a := range taskaction.Of(reflect.TypeFor[taggingQueue]()) {
		if a.Name == "tag" {
			tag = a
		}
	}
	tf := newTaskForm(tag)
	var got []string
	for _, f := range tf.Fields {
		got = append(got, fmt.Sprintf("%s:%s:%s:%v:%v", f.Name, f.Label, f.Placeholder, f.Numeric, f.Check))
	}
	if want := "set-q:Q::false:false due:Due:keep:false:false weight:Weight:keep:true:false every:Every:0:false:false urgent:Urgent::false:true"; strings.Join(got, " ") != want || tf.Title != "Tag" {
		t.Fatalf("the form: %s %s\nwant %s", tf.Title, strings.Join(got, " "), want)
	}
	var opts tagOpts
	in, err := tf.parse(url.Values{"q": {"jobs"}, "set-q": {"blue"}, "due": {"10m"}, "weight": {""}, "every": {"1m"}, "urgent": {"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Call(ctx, tagger{got: &opts}, 1, t0); err != nil {
		t.Fatal(err)
	}
	if opts != (tagOpts{Q: "blue", Due: t0.Add(10 * time.Minute), Every: time.Minute, Urgent: true}) {
		t.Fatalf("tag: %+v", opts)
	}
	for msg, form := range map[string]url.Values{
		"Tag: nothing to change: give Q, Due, Weight, Every or Urgent": {"q": {"jobs"}, "weight": {""}},
		`Tag: Weight "x": want a whole number`:                         {"weight": {"x"}},
		`Tag: Due "soon": want an RFC 3339 time`:                       {"due": {"soon"}},
	} {
		if _, err := tf.parse(form); !errors.Is(err, errBadInput) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%v: %v, want %q", form, err, msg)
		}
	}
}

// TestConfirmCarriesTheActionsInputs: a task action posted without
// confirm=yes gets the confirmation page, whose form posts the action's
// own inputs again (and none twice): confirming does what was asked, not
// "nothing to change".
func TestConfirmCarriesTheActionsInputs(t *testing.T) {
	e := newEnv(t, Options{AllowActions: true})
	q := e.queue("jobs")
	id := e.enqueue(q, engine.Task{Delay: time.Hour})
	asked := url.Values{"csrf": {e.csrf()}, "op": {"reschedule"}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"},
		"id": {fmt.Sprint(id)}, "at": {"2h"}, "priority": {"7"}}
	page := e.mustGetPost(asked)
	if !strings.Contains(page, `id="confirm-form"`) {
		t.Fatalf("no confirmation page:\n%.600s", page)
	}
	if info, _ := q.Get(context.Background(), id); info.Priority != 0 {
		t.Fatalf("the task changed before the confirmation: %+v", info)
	}
	confirm := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(page, -1) {
		confirm.Add(m[1], html.UnescapeString(m[2]))
	}
	for _, name := range []string{"at", "priority", "id", "op", "confirm"} {
		if len(confirm[name]) != 1 {
			t.Errorf("the confirmation posts %s %d times, want once: %v", name, len(confirm[name]), confirm)
		}
	}
	mustContain(t, e.mustGetPost(confirm), "Rescheduled 1 of 1 task.")
	if info, _ := q.Get(context.Background(), id); !info.NotBefore.Equal(t0.Add(2*time.Hour)) || info.Priority != 7 {
		t.Fatalf("after confirming: %+v", info)
	}
}
