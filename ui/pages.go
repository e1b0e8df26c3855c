package ui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docketdb/docket/engine"
)

// request is one request being served, with the API view of its caller.
type request struct {
	d   *Dashboard
	w   http.ResponseWriter
	r   *http.Request
	api engine.API
	who string
}

func (rq *request) ctx() context.Context { return rq.r.Context() }

func (rq *request) render(name, heading, nav string, data any) {
	rq.d.renderAs(rq.w, rq.r, http.StatusOK, name, heading, nav, rq.who, rq.d.opts.Refresh, data)
}

func (rq *request) renderStill(status int, name, heading, nav string, data any) {
	rq.d.renderAs(rq.w, rq.r, status, name, heading, nav, rq.who, 0, data)
}

// fail shows err with the status that fits it.
func (rq *request) fail(err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, engine.ErrInvalid), errors.Is(err, errBadInput):
		status = http.StatusBadRequest
	case errors.Is(err, engine.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, engine.ErrPermission):
		status = http.StatusForbidden
	case errors.Is(err, engine.ErrConflict):
		status = http.StatusConflict
	}
	rq.d.fail(rq.w, rq.r, status, err)
}

var errBadInput = errors.New("bad input")

func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadInput, fmt.Sprintf(format, args...))
}

// queueRef names a queue in URLs: p (project), s (scope), q (name).
type queueRef struct {
	NS   engine.Namespace
	Name string
}

// Query is the queue's part of a query string, already encoded.
func (q queueRef) Query() template.URL {
	v := url.Values{"p": {q.NS.Project}, "s": {q.NS.Scope}, "q": {q.Name}}
	return template.URL(v.Encode())
}

func (q queueRef) String() string { return q.NS.String() + " · " + q.Name }

func refOf(v url.Values) (queueRef, error) {
	q := queueRef{NS: engine.NS(v.Get("p"), v.Get("s")), Name: v.Get("q")}
	if q.Name == "" {
		return q, badInput("no queue named (parameter q)")
	}
	return q, nil
}

var states = []engine.State{engine.Ready, engine.Scheduled, engine.InFlight, engine.Dead, engine.Completed}

func parseState(s string) (engine.State, error) {
	if s == "" {
		return engine.Ready, nil
	}
	for _, st := range states {
		if st.String() == s {
			return st, nil
		}
	}
	return 0, badInput("unknown state %q", s)
}

// overviewRow is one queue on the overview.
type overviewRow struct {
	Ref         queueRef
	Counts      engine.Counts
	Total       int
	OldestReady time.Duration
	HasOldest   bool
	Rates       rates
	Pausable    bool
}

func (rq *request) overview() {
	now := rq.api.Clock().Now()
	if rq.d.rates.due(now) {
		rq.d.sample(rq.ctx(), rq.api)
	}
	qs, err := rq.api.Queues(rq.ctx())
	if err != nil {
		rq.fail(err)
		return
	}
	rows := make([]overviewRow, 0, len(qs))
	var sum engine.Counts
	for _, q := range qs {
		c := q.Counts
		row := overviewRow{Ref: queueRef{q.Namespace, q.Name}, Counts: c,
			Total: c.Ready + c.Scheduled + c.InFlight + c.Dead + c.Completed,
			Rates: rq.d.rates.rates(q.Namespace, q.Name)}
		if !q.OldestReady.IsZero() {
			row.HasOldest, row.OldestReady = true, max(0, now.Sub(q.OldestReady))
		}
		_, row.Pausable = rq.api.Queue(q.Namespace, q.Name).(pauser)
		rows = append(rows, row)
		sum.Ready += c.Ready
		sum.Scheduled += c.Scheduled
		sum.InFlight += c.InFlight
		sum.Dead += c.Dead
		sum.Completed += c.Completed
	}
	rq.render("overview", "Queues", "overview", map[string]any{"Rows": rows, "Sum": sum, "Now": now,
		"Window": rq.d.opts.SampleEvery * time.Duration(rq.d.opts.Samples)})
}

// filter selects tasks on the queue page.
type filter struct {
	Kind, Err string
	Sort      string
}

func (f filter) active() bool { return f.Kind != "" || f.Err != "" }

func (f filter) match(t engine.TaskInfo) bool {
	if f.Kind != "" && t.Kind != f.Kind {
		return false
	}
	if f.Err != "" && !strings.Contains(strings.ToLower(t.LastError), strings.ToLower(f.Err)) {
		return false
	}
	return true
}

var sorts = []string{"", "priority", "due", "age"}

func sortTasks(ts []engine.TaskInfo, by string) {
	switch by {
	case "priority":
		slices.SortStableFunc(ts, func(a, b engine.TaskInfo) int { return cmp.Compare(b.Priority, a.Priority) })
	case "due":
		slices.SortStableFunc(ts, func(a, b engine.TaskInfo) int { return a.NotBefore.Compare(b.NotBefore) })
	case "age":
		slices.SortStableFunc(ts, func(a, b engine.TaskInfo) int { return a.CreatedAt.Compare(b.CreatedAt) })
	}
}

// scanned is a bounded read of one state of a queue.
type scanned struct {
	Tasks   []engine.TaskInfo
	Next    string
	Scanned int
	Capped  bool // the scan window ran out before the page filled
}

// scan reads tasks in state from cursor until limit match f, the queue
// ends, or window tasks were read: the work is bounded whatever the queue's
// size. Pages are the engine's, so the returned cursor continues exactly
// after the last task read.
func scan(ctx context.Context, q engine.Queue, st engine.State, cursor string, f filter, limit, window int) (scanned, error) {
	var out scanned
	if !f.active() {
		p, err := q.List(ctx, engine.ListOptions{State: st, Limit: limit, Cursor: cursor})
		if err != nil {
			return out, err
		}
		return scanned{Tasks: p.Tasks, Next: p.Next, Scanned: len(p.Tasks)}, nil
	}
	for {
		n := min(max(limit, 100), window-out.Scanned)
		p, err := q.List(ctx, engine.ListOptions{State: st, Limit: n, Cursor: cursor})
		if err != nil {
			return out, err
		}
		out.Scanned += len(p.Tasks)
		for _, t := range p.Tasks {
			if f.match(t) {
				out.Tasks = append(out.Tasks, t)
			}
		}
		out.Next, cursor = p.Next, p.Next
		if p.Next == "" || len(out.Tasks) >= limit {
			return out, nil
		}
		if out.Scanned >= window {
			out.Capped = true
			return out, nil
		}
	}
}

func (rq *request) queue() {
	v := rq.r.URL.Query()
	ref, err := refOf(v)
	if err != nil {
		rq.fail(err)
		return
	}
	st, err := parseState(v.Get("state"))
	if err != nil {
		rq.fail(err)
		return
	}
	f := filter{Kind: v.Get("kind"), Err: v.Get("err"), Sort: v.Get("sort")}
	if !slices.Contains(sorts, f.Sort) {
		rq.fail(badInput("unknown sort %q (priority, due or age)", f.Sort))
		return
	}
	q := rq.api.Queue(ref.NS, ref.Name)
	counts, err := q.Counts(rq.ctx())
	if err != nil {
		rq.fail(err)
		return
	}
	var res scanned
	idText := strings.TrimSpace(v.Get("id"))
	if idText != "" {
		id, err := strconv.ParseUint(idText, 10, 64)
		if err != nil {
			rq.fail(badInput("task id %q is not a number", idText))
			return
		}
		t, err := q.Get(rq.ctx(), id)
		switch {
		case errors.Is(err, engine.ErrNotFound):
		case err != nil:
			rq.fail(err)
			return
		default:
			res.Tasks = []engine.TaskInfo{t}
		}
	} else {
		res, err = scan(rq.ctx(), q, st, v.Get("cursor"), f, rq.d.opts.PageSize, rq.d.opts.ScanWindow)
		if err != nil {
			rq.fail(err)
			return
		}
	}
	sortTasks(res.Tasks, f.Sort)
	var next template.URL
	if res.Next != "" {
		nv := url.Values{}
		for k, vs := range v {
			nv[k] = vs
		}
		nv.Set("cursor", res.Next)
		nv.Set("state", st.String())
		next = template.URL(nv.Encode())
	}
	_, canRunNow := q.(runNower)
	_, canPause := q.(pauser)
	rq.render("queue", ref.String(), "queue", map[string]any{
		"Ref": ref, "State": st, "States": states, "Counts": counts, "Filter": f, "ID": idText,
		"Res": res, "Next": next, "First": v.Get("cursor") == "", "Sorts": sorts[1:],
		"RunNow": canRunNow && st == engine.Scheduled, "Pause": canPause, "Now": rq.api.Clock().Now(),
	})
}

// timelineEntry is one line of a task's history.
type timelineEntry struct {
	At   time.Time
	What string
}

func timeline(t engine.TaskInfo) []timelineEntry {
	var out []timelineEntry
	if !t.CreatedAt.IsZero() {
		out = append(out, timelineEntry{t.CreatedAt, "enqueued"})
	}
	for _, e := range t.Errors {
		out = append(out, timelineEntry{e.At, fmt.Sprintf("attempt %d failed", e.Attempt)})
	}
	switch t.State {
	case engine.Scheduled:
		out = append(out, timelineEntry{t.NotBefore, "due"})
	case engine.InFlight:
		out = append(out, timelineEntry{t.UpdatedAt, fmt.Sprintf("leased to %s (attempt %d)", t.Owner, t.Attempts)})
		out = append(out, timelineEntry{t.LeaseUntil, "lease ends"})
	case engine.Dead:
		out = append(out, timelineEntry{t.UpdatedAt, "dead-lettered"})
	case engine.Completed:
		out = append(out, timelineEntry{t.UpdatedAt, "completed"})
	case engine.Ready:
		out = append(out, timelineEntry{latest(t.NotBefore, t.UpdatedAt, t.CreatedAt), "ready"})
	}
	slices.SortStableFunc(out, func(a, b timelineEntry) int { return a.At.Compare(b.At) })
	return out
}

func latest(a time.Time, more ...time.Time) time.Time {
	for _, b := range more {
		if b.After(a) {
			a = b
		}
	}
	return a
}

func (rq *request) task() {
	v := rq.r.URL.Query()
	ref, err := refOf(v)
	if err != nil {
		rq.fail(err)
		return
	}
	id, err := strconv.ParseUint(v.Get("id"), 10, 64)
	if err != nil {
		rq.fail(badInput("task id %q is not a number", v.Get("id")))
		return
	}
	q := rq.api.Queue(ref.NS, ref.Name)
	t, err := q.Get(rq.ctx(), id)
	if err != nil {
		rq.fail(err)
		return
	}
	headers := make([]string, 0, len(t.Headers))
	for k := range t.Headers {
		headers = append(headers, k)
	}
	slices.Sort(headers)
	_, canRunNow := q.(runNower)
	rq.render("task", fmt.Sprintf("Task %d", t.ID), "queue", map[string]any{
		"Ref": ref, "T": t, "Headers": headers, "Timeline": timeline(t), "Now": rq.api.Clock().Now(),
		"RunNow": canRunNow && t.State == engine.Scheduled,
	})
}

// errorGroup is the dead tasks of a queue that share a last error.
type errorGroup struct {
	Error string
	Count int
	IDs   []uint64 // the first few, for links and for redriving the group
	Kinds []string
}

const groupIDs = 200

func (rq *request) dead() {
	v := rq.r.URL.Query()
	ref, err := refOf(v)
	if err != nil {
		rq.fail(err)
		return
	}
	q := rq.api.Queue(ref.NS, ref.Name)
	counts, err := q.Counts(rq.ctx())
	if err != nil {
		rq.fail(err)
		return
	}
	res, err := scan(rq.ctx(), q, engine.Dead, "", filter{}, min(rq.d.opts.ScanWindow, engine.MaxBatch), rq.d.opts.ScanWindow)
	if err != nil {
		rq.fail(err)
		return
	}
	byErr := map[string]*errorGroup{}
	var groups []*errorGroup
	for _, t := range res.Tasks {
		g := byErr[t.LastError]
		if g == nil {
			g = &errorGroup{Error: t.LastError}
			byErr[t.LastError] = g
			groups = append(groups, g)
		}
		g.Count++
		if len(g.IDs) < groupIDs {
			g.IDs = append(g.IDs, t.ID)
		}
		if t.Kind != "" && !slices.Contains(g.Kinds, t.Kind) && len(g.Kinds) < 5 {
			g.Kinds = append(g.Kinds, t.Kind)
		}
	}
	slices.SortStableFunc(groups, func(a, b *errorGroup) int { return cmp.Compare(b.Count, a.Count) })
	rq.render("dead", "Dead letters · "+ref.String(), "queue", map[string]any{
		"Ref": ref, "Counts": counts, "Groups": groups, "Scanned": len(res.Tasks), "Partial": res.Next != "",
	})
}

func (rq *request) kv() {
	v := rq.r.URL.Query()
	ns := engine.NS(v.Get("p"), v.Get("s"))
	prefix, start := v.Get("prefix"), v.Get("start")
	data := map[string]any{"NS": ns, "Prefix": prefix, "Start": start}
	// Namespaces that hold queues, as shortcuts; KV-only namespaces are typed in.
	if qs, err := rq.api.Queues(rq.ctx()); err == nil {
		var nss []engine.Namespace
		for _, q := range qs {
			if !slices.Contains(nss, q.Namespace) {
				nss = append(nss, q.Namespace)
			}
		}
		data["Namespaces"] = nss
	}
	if v.Has("p") {
		const limit = 100
		es, err := rq.api.KV(ns).Scan(rq.ctx(), engine.ScanOptions{Prefix: prefix, Start: start, Limit: limit + 1})
		if err != nil {
			rq.fail(err)
			return
		}
		if len(es) > limit {
			es = es[:limit]
			nv := url.Values{"p": {ns.Project}, "s": {ns.Scope}, "prefix": {prefix}, "start": {es[limit-1].Key + "\x00"}}
			data["Next"] = template.URL(nv.Encode())
		}
		data["Entries"] = es
		data["Scanned"] = true
	}
	rq.render("kv", "Key-value entries", "kv", data)
}

func (rq *request) cluster() {
	st, err := rq.d.opts.Cluster.ClusterStatus(rq.ctx())
	if err != nil {
		rq.fail(err)
		return
	}
	rq.render("cluster", "Cluster", "cluster", map[string]any{"S": st})
}
