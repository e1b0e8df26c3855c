package ui

import (
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docketdb/docket/engine"
)

// search is the part of the queue page's filter that the engine runs over
// the whole queue (engine.Queue.Search): the fields as the form sent them,
// so that pages, the bulk form and its confirmation carry them unchanged.
type search struct {
	Tab    string // the state tab: a state, or retrying
	Kind   string
	Err    string
	Part   string
	Header string // key or key=value
	MinID  string
	MaxID  string
	Older  string // enqueued at least this long before At (a duration)
	Newer  string // enqueued at most this long before At
	// At is when Older and Newer count from (Unix micros): the page's
	// now, carried by its bulk form, so that the confirmation and the
	// action select what the page counted.
	At string
	// Upto bounds the ids a bulk action takes: the highest id counted
	// when the page showed the count, so that tasks enqueued since are
	// left out.
	Upto string
}

// searchOf reads the search fields of a query or form.
func searchOf(v url.Values, tab string) search {
	g := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	return search{Tab: tab, Kind: g("kind"), Err: v.Get("err"), Part: g("part"), Header: g("header"),
		MinID: g("min"), MaxID: g("max"), Older: g("older"), Newer: g("newer"), At: g("at"), Upto: g("upto")}
}

// active is whether a field beyond the state is set.
func (s search) active() bool {
	return s.Kind != "" || s.Err != "" || s.Part != "" || s.Header != "" || s.MinID != "" || s.MaxID != "" ||
		s.Older != "" || s.Newer != ""
}

// values are the fields as query parameters (without the queue).
func (s search) values() url.Values {
	v := url.Values{}
	for _, kv := range [...][2]string{{"state", s.Tab}, {"kind", s.Kind}, {"err", s.Err}, {"part", s.Part},
		{"header", s.Header}, {"min", s.MinID}, {"max", s.MaxID}, {"older", s.Older}, {"newer", s.Newer},
		{"at", s.At}, {"upto", s.Upto}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	return v
}

// Hidden are the fields as hidden inputs of a form.
func (s search) Hidden() template.HTML {
	var b strings.Builder
	v := s.values()
	for _, k := range slices.Sorted(maps.Keys(v)) {
		fmt.Fprintf(&b, `<input type="hidden" name="%s" value="%s">`, template.HTMLEscapeString(k), template.HTMLEscapeString(v.Get(k)))
	}
	return template.HTML(b.String())
}

// Query is the filter's part of a query string (without the state and
// the bounds of a count), already encoded: "" or "&"-prefixed.
func (s search) Query() template.URL {
	v := s.values()
	v.Del("state")
	v.Del("at")
	v.Del("upto")
	if len(v) == 0 {
		return ""
	}
	return template.URL("&" + v.Encode())
}

// Words describe the filter for a confirmation.
func (s search) Words() string {
	var w []string
	add := func(name, v string) {
		if v != "" {
			w = append(w, name+" "+strconv.Quote(v))
		}
	}
	add("kind", s.Kind)
	add("last error containing", s.Err)
	add("partition", s.Part)
	add("header", s.Header)
	if s.MinID != "" || s.MaxID != "" {
		w = append(w, fmt.Sprintf("id %s..%s", s.MinID, s.MaxID))
	}
	if s.Older != "" {
		w = append(w, "enqueued over "+s.Older+" ago")
	}
	if s.Newer != "" {
		w = append(w, "enqueued within "+s.Newer)
	}
	if len(w) == 0 {
		return "every " + s.Tab + " task"
	}
	return s.Tab + " tasks with " + strings.Join(w, ", ")
}

// filter is the engine's filter for s at now (when s carries no At).
func (s search) filter(now time.Time) (engine.Filter, error) {
	f := engine.Filter{Kind: s.Kind, Error: s.Err, Partition: s.Part}
	switch s.Tab {
	case retryingTab:
		f.States, f.Retrying = []engine.State{engine.Scheduled}, engine.OnlyRetrying
	case engine.Scheduled.String():
		f.States, f.Retrying = []engine.State{engine.Scheduled}, engine.NotRetrying
	default:
		st, err := parseState(s.Tab)
		if err != nil {
			return f, err
		}
		f.States = []engine.State{st}
	}
	if s.Header != "" {
		f.HeaderKey, f.HeaderValue, _ = strings.Cut(s.Header, "=")
		if f.HeaderKey == "" {
			return f, badInput("header %q names no key (key or key=value)", s.Header)
		}
	}
	var err error
	for _, b := range []struct {
		text string
		to   *uint64
	}{{s.MinID, &f.MinID}, {s.MaxID, &f.MaxID}} {
		if b.text != "" {
			if *b.to, err = parseID(b.text); err != nil {
				return f, err
			}
		}
	}
	if s.Upto != "" {
		upto, err := parseID(s.Upto)
		if err != nil {
			return f, err
		}
		if upto == 0 || upto < f.MinID {
			return f, badInput("no task matched when the page counted them: nothing to do")
		}
		if f.MaxID == 0 || upto < f.MaxID {
			f.MaxID = upto
		}
	}
	if s.At != "" {
		at, err := strconv.ParseInt(s.At, 10, 64)
		if err != nil {
			return f, badInput("time %q is not a number of microseconds", s.At)
		}
		now = time.UnixMicro(at)
	}
	for _, a := range []struct {
		name, text string
		to         *time.Time
	}{{"older than", s.Older, &f.EnqueuedBefore}, {"newer than", s.Newer, &f.EnqueuedSince}} {
		if a.text == "" {
			continue
		}
		d, err := time.ParseDuration(a.text)
		if err != nil || d < 0 {
			return f, badInput("%s %q is not a duration such as 90s, 15m or 2h", a.name, a.text)
		}
		*a.to = now.Add(-d)
	}
	if err := f.Validate(); err != nil {
		return f, err
	}
	return f, nil
}

// bulkOps are the queue page's actions on every task a filter selects,
// by the op names of the action form.
var bulkOps = map[string]engine.BulkAction{
	"bulk-retry": engine.BulkRetry, "bulk-cancel": engine.BulkCancel,
	"bulk-run-now": engine.BulkRunNow, "bulk-delete": engine.BulkDelete,
}

// bulkButton is one bulk action offered for a tab.
type bulkButton struct {
	Op, Label string
	Danger    bool
}

// bulkButtons are the bulk actions that can change tasks of tab.
func bulkButtons(tab string) []bulkButton {
	var out []bulkButton
	switch tab {
	case engine.Dead.String(), engine.Scheduled.String(), retryingTab:
		out = append(out, bulkButton{"bulk-retry", "Retry", false})
	}
	switch tab {
	case engine.Scheduled.String(), retryingTab:
		out = append(out, bulkButton{"bulk-run-now", "Run now", false})
	}
	if tab != engine.Completed.String() {
		out = append(out, bulkButton{"bulk-cancel", "Cancel", true})
	}
	switch tab {
	case engine.Dead.String(), engine.Completed.String():
		out = append(out, bulkButton{"bulk-delete", "Delete", true})
	}
	return out
}

// bulkVerb is the report's verb for a bulk action.
func bulkVerb(a engine.BulkAction) string {
	switch a {
	case engine.BulkRetry:
		return "Retried"
	case engine.BulkCancel:
		return "Cancelled"
	case engine.BulkRunNow:
		return "Made due"
	}
	return "Deleted"
}

// bulkTitle is the confirmation's verb for a bulk action.
func bulkTitle(a engine.BulkAction) string {
	switch a {
	case engine.BulkRetry:
		return "Retry"
	case engine.BulkCancel:
		return "Cancel"
	case engine.BulkRunNow:
		return "Run now"
	}
	return "Delete"
}

// bulkWhat says what confirming a bulk action does, state by state.
func bulkWhat(a engine.BulkAction) string {
	switch a {
	case engine.BulkRetry:
		return "dead tasks become ready with a fresh attempt budget; scheduled ones become due now"
	case engine.BulkCancel:
		return "the tasks are deleted whatever their state; a worker holding one loses its lease"
	case engine.BulkRunNow:
		return "scheduled tasks become due now"
	}
	return "dead and completed tasks are deleted; tasks still to run are left"
}

// matchInfo is the part of f beyond the state, kind and error text (which
// the window's filter checks itself) over a task as read: for the views
// that sort a window rather than search.
func matchInfo(f *engine.Filter, t engine.TaskInfo) bool {
	v, has := t.Headers[f.HeaderKey]
	return (f.Partition == "" || t.Partition == f.Partition) &&
		(f.HeaderKey == "" || has && (f.HeaderValue == "" || v == f.HeaderValue)) &&
		t.ID >= f.MinID && (f.MaxID == 0 || t.ID <= f.MaxID) &&
		(f.EnqueuedSince.IsZero() || !t.CreatedAt.Before(f.EnqueuedSince)) &&
		(f.EnqueuedBefore.IsZero() || t.CreatedAt.Before(f.EnqueuedBefore))
}

// bulkConfirm is what the confirmation of a bulk action shows.
type bulkConfirm struct {
	Op     string
	Title  string // "Cancel"
	What   string
	Ref    queueRef
	Search search
	Count  int
	Back   string
}

// bulkReport is what the report of a bulk action shows.
type bulkReport struct {
	Ref     queueRef
	Summary string
	Skipped []engine.BulkSkip
	Back    string
	Err     string
}

// bulk confirms, then takes, a bulk action on the tasks the form's
// filter selects. The confirmation counts them again, bounded as the
// queue page counted them (Search.Upto and Search.At), and states the
// count; the action then takes exactly those that still qualify.
func (rq *request) bulk(o op, ref queueRef, form url.Values) {
	a := bulkOps[o.Name]
	s := searchOf(form, form.Get("state"))
	if s.Tab == "" {
		s.Tab = engine.Ready.String()
	}
	if s.Upto == "" || s.At == "" {
		rq.fail(badInput("a bulk action needs the bounds of the count it confirms (upto and at): start it from the queue page"))
		return
	}
	f, err := s.filter(rq.api.Clock().Now())
	if err != nil {
		rq.fail(fmt.Errorf("%w. Nothing changed.", err))
		return
	}
	back := rq.d.opts.Prefix + "queue?" + string(ref.Query()) + string(s.Query()) + "&state=" + url.QueryEscape(s.Tab)
	q := rq.api.Queue(ref.NS, ref.Name)
	ctx := rq.ctx()
	if form.Get("confirm") != "yes" {
		res, err := q.Search(ctx, engine.SearchOptions{Filter: f, Limit: 1, Count: true})
		if err != nil {
			rq.fail(err)
			return
		}
		c := bulkConfirm{Op: o.Name, Title: bulkTitle(a), What: bulkWhat(a), Ref: ref, Search: s, Count: res.Count, Back: back}
		rq.renderStill(http.StatusOK, "bulk", fmt.Sprintf("Confirm: %s %d tasks", strings.ToLower(c.Title), res.Count), "queue", c)
		return
	}
	res, err := q.Bulk(ctx, f, a)
	rep := bulkReport{Ref: ref, Back: back, Skipped: res.Skipped}
	rep.Summary = fmt.Sprintf("%s %s %s.", bulkVerb(a), group(strconv.Itoa(res.Done)), plural(res.Done, "task", "tasks"))
	if n := res.SkippedTotal(); n > 0 {
		rep.Summary += fmt.Sprintf(" Left %s as %s:", group(strconv.Itoa(n)), plural(n, "it was", "they were"))
	}
	rq.d.opts.Logger.Info("docket ui: action", "caller", rq.who, "op", o.Name, "queue", ref.String(),
		"filter", s.Words(), "done", res.Done, "skipped", res.SkippedTotal(), "err", err)
	if err != nil {
		if res.Done == 0 && errors.Is(err, engine.ErrPermission) {
			rq.failWith(http.StatusForbidden, fmt.Errorf("%w. Nothing changed.", err))
			return
		}
		rep.Err = err.Error()
		if res.Done > 0 {
			rep.Err += " — the tasks counted above were done; run it again to finish the rest."
		}
		rq.renderStill(http.StatusConflict, "bulkreport", "Failed: "+o.Name, "queue", rep)
		return
	}
	rq.renderStill(http.StatusOK, "bulkreport", "Done: "+o.Name, "queue", rep)
}
