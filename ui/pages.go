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
	c   context.Context // the request's, with stale reads on a follower
	// follower is set on a node of a cluster that is not the leader.
	follower *follower
	// ns is the namespace the page is about, once known: its actions show
	// only to a caller who may take them.
	ns *engine.Namespace
}

func (rq *request) ctx() context.Context { return rq.c }

func (rq *request) render(name, heading, nav string, data any) {
	rq.d.renderAs(rq.w, rq.r, http.StatusOK, name, heading, nav, rq.chrome(rq.d.opts.Refresh), data)
}

func (rq *request) renderStill(status int, name, heading, nav string, data any) {
	rq.d.renderAs(rq.w, rq.r, status, name, heading, nav, rq.chrome(0), data)
}

// about records the namespace the page shows.
func (rq *request) about(ns engine.Namespace) { rq.ns = &ns }

// chrome is what the request's page shows around its content: actions only
// where the dashboard allows them, on the leader, to a caller who may.
func (rq *request) chrome(refresh time.Duration) chrome {
	c := chrome{who: rq.who, refresh: refresh, follower: rq.follower}
	switch {
	case !rq.d.opts.AllowActions:
		c.readOnly = rq.d.readOnly()
	case rq.follower != nil:
		c.readOnly = "This node is not the leader: actions are taken on the leader's dashboard"
	case rq.ns != nil && !rq.may(*rq.ns):
		c.readOnly = fmt.Sprintf("You may not act on %s: that needs the admin permission", rq.ns)
	default:
		c.actions = true
	}
	return c
}

// may reports whether the caller may take actions on ns, as far as the
// API's view tells (engine.DB.Permissions); a view that cannot tell is
// assumed to, and the engine decides when the action runs.
func (rq *request) may(ns engine.Namespace) bool {
	if p, ok := rq.api.(interface {
		Permissions(engine.Namespace) engine.Perm
	}); ok {
		return p.Permissions(ns)&engine.PermAdmin != 0
	}
	return true
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
	rq.failWith(status, err)
}

func (rq *request) failWith(status int, err error) {
	rq.d.failAs(rq.w, rq.r, status, err, rq.chrome(0))
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

// NSQuery is the namespace's part of a query string.
func (q queueRef) NSQuery() template.URL {
	return template.URL(url.Values{"p": {q.NS.Project}, "s": {q.NS.Scope}}.Encode())
}

func (q queueRef) String() string { return q.NS.String() + " · " + q.Name }

func refOf(v url.Values) (queueRef, error) {
	q := queueRef{NS: engine.NS(v.Get("p"), v.Get("s")), Name: v.Get("q")}
	if q.Name == "" {
		return q, badInput("no queue named (parameter q)")
	}
	return q, nil
}

var states = []engine.State{engine.Ready, engine.Scheduled, engine.InFlight, engine.Dead, engine.Completed, engine.Waiting}

// retryingTab is the queue page's tab of the scheduled tasks that wait out
// a backoff after a failed attempt; the scheduled tab shows the others.
const retryingTab = "retrying"

// stateTab is one tab of the queue page.
type stateTab struct {
	Key   string // the state parameter
	N     string // its count as shown
	Title string // what the count means, when it is not exact
}

// tabsOf returns the queue page's tabs. The engine counts scheduled tasks
// as one; when counted, the retries among them were counted over the
// first window read (capped when more were left unread). Otherwise the
// scheduled tab counts both, and the retrying tab has no count.
func tabsOf(c engine.Counts, retries int, counted, capped bool, window int) []stateTab {
	var out []stateTab
	for _, st := range states {
		t := stateTab{Key: st.String(), N: group(strconv.Itoa(countOf(c, st)))}
		if st == engine.Scheduled {
			r := stateTab{Key: retryingTab}
			switch {
			case c.Scheduled == 0:
				r.N = "0"
			case !counted:
				t.Title = "Timers and retries; open a tab to count each"
			default:
				t.N, r.N = group(strconv.Itoa(c.Scheduled-retries)), group(strconv.Itoa(retries))
				if capped {
					t.N, r.N = "≤"+t.N, "≥"+r.N
					note := fmt.Sprintf("Counted over the first %s scheduled tasks", group(strconv.Itoa(window)))
					t.Title, r.Title = note, note
				}
			}
			out = append(out, t, r)
			continue
		}
		out = append(out, t)
	}
	return out
}

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

func parseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, badInput("task id %q is not a number", s)
	}
	return id, nil
}

// overviewRow is one queue on the overview.
type overviewRow struct {
	Ref         queueRef
	Counts      engine.Counts
	Total       int
	Bar         []barPart
	OldestReady time.Duration
	HasOldest   bool
	Rates       rates
	Paused      bool
	Limits      string // the queue's limits in words, "" for none
}

// barPart is one state's share of a queue, for the stacked bar.
type barPart struct {
	State  string
	N      int
	X, Len float64 // percent of the bar
}

// liveStates are the states of tasks still to be done or looked at; the
// retained completions are history and left out of the bar.
var liveStates = []engine.State{engine.Waiting, engine.Ready, engine.Scheduled, engine.InFlight, engine.Dead}

func stateBar(c engine.Counts) []barPart {
	total := 0
	for _, st := range liveStates {
		total += countOf(c, st)
	}
	if total == 0 {
		return nil
	}
	var out []barPart
	x := 0.0
	for _, st := range liveStates {
		n := countOf(c, st)
		if n == 0 {
			continue
		}
		w := float64(n) * 100 / float64(total)
		out = append(out, barPart{State: st.String(), N: n, X: x, Len: w})
		x += w
	}
	return out
}

func (rq *request) overview() {
	now := rq.api.Clock().Now()
	rq.sampleIfDue()
	qs, err := rq.api.Queues(rq.ctx())
	if err != nil {
		rq.fail(err)
		return
	}
	rows := make([]overviewRow, 0, len(qs))
	var sum engine.Counts
	var flow rates
	oldest, hasOldest := time.Duration(0), false
	for _, q := range qs {
		c := q.Counts
		row := overviewRow{Ref: queueRef{q.Namespace, q.Name}, Counts: c, Bar: stateBar(c),
			Total: c.Ready + c.Scheduled + c.InFlight + c.Dead + c.Completed + c.Waiting,
			Rates: rq.d.rates.rates(q.Namespace, q.Name)}
		if !q.OldestReady.IsZero() {
			row.HasOldest, row.OldestReady = true, max(0, now.Sub(q.OldestReady))
			hasOldest, oldest = true, max(oldest, row.OldestReady)
		}
		row.Paused, row.Limits = q.Paused, q.Limits.String()
		rows = append(rows, row)
		sum.Ready += c.Ready
		sum.Scheduled += c.Scheduled
		sum.InFlight += c.InFlight
		sum.Dead += c.Dead
		sum.Completed += c.Completed
		sum.Waiting += c.Waiting
		if row.Rates.Known {
			flow.Known = true
			flow.Enqueued += row.Rates.Enqueued
			flow.Completed += row.Rates.Completed
			flow.Errors += row.Rates.Errors
			flow.Dead += row.Rates.Dead
		}
	}
	flow.ErrorShare = errorShare(flow.Completed, flow.Errors)
	_, untracked := rq.d.rates.tracked(engine.Namespace{}, "")
	mem := memoryOf(rq.ctx(), rq.api)
	if !mem.Known {
		mem = quotasOf(rq.ctx(), rq.api, qs)
	}
	rq.render("overview", "Queues", "overview", map[string]any{"Rows": rows, "Sum": sum, "Flow": flow, "Now": now, "Memory": mem,
		"Window": recent, "Oldest": oldest, "HasOldest": hasOldest, "Untracked": untracked,
		"MaxTracked": rq.d.opts.MaxTrackedQueues, "SampleEvery": rq.d.opts.SampleEvery})
}

// filter selects tasks on the queue page.
type filter struct {
	Kind, Err string
	// Group is the shape of the last error (errKey), "" for any.
	Group string
	// Retry keeps only the scheduled tasks that wait out a backoff after
	// a failed attempt (retrying), or only the others (timers).
	Retry retrySel
	// search is the rest of the page's filter (partition, header, ids,
	// age), for the views that read a window rather than search.
	search *engine.Filter
}

type retrySel int

const (
	anyTask retrySel = iota
	onlyRetries
	noRetries
)

// retrying reports whether t waits out its backoff after a failed
// attempt: scheduled, with an attempt spent and its error recorded.
func retrying(t engine.TaskInfo) bool {
	return t.State == engine.Scheduled && t.Attempts > 0 && t.LastError != ""
}

// active is whether the user's filter selects among the tasks.
func (f filter) active() bool { return f.Kind != "" || f.Err != "" || f.Group != "" }

func (f filter) match(t engine.TaskInfo) bool {
	if f.Kind != "" && t.Kind != f.Kind {
		return false
	}
	if f.Err != "" && !strings.Contains(strings.ToLower(t.LastError), strings.ToLower(f.Err)) {
		return false
	}
	if f.Group != "" && errKey(t.LastError) != f.Group {
		return false
	}
	if f.search != nil && !matchInfo(f.search, t) {
		return false
	}
	switch f.Retry {
	case onlyRetries:
		return retrying(t)
	case noRetries:
		return !retrying(t)
	}
	return true
}

// A sort is one of the orders the queue page offers.
type sortOpt struct {
	Key, Label string
}

var sorts = []sortOpt{
	{"priority", "priority, highest first"},
	{"due", "due time, soonest first"},
	{"age", "age, oldest first"},
	{"newest", "age, newest first"},
}

// engineOrder is the sort the engine's listing of st already is: those
// pages come straight from the engine's cursor, the others are sorted
// within a bounded window.
func engineOrder(st engine.State) string {
	switch st {
	case engine.Ready:
		return "priority" // then FIFO, which is age
	case engine.Scheduled:
		return "due"
	case engine.Dead, engine.Completed, engine.Waiting:
		return "age" // ids increase with creation
	}
	return "" // in flight: by the end of the lease
}

func engineOrderLabel(st engine.State) string {
	switch st {
	case engine.Ready:
		return "priority, then oldest"
	case engine.Scheduled:
		return "due time"
	case engine.InFlight:
		return "lease end"
	}
	return "oldest first"
}

func sortTasks(ts []engine.TaskInfo, by string) {
	switch by {
	case "priority":
		slices.SortStableFunc(ts, func(a, b engine.TaskInfo) int {
			return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.ID, b.ID))
		})
	case "due":
		slices.SortStableFunc(ts, func(a, b engine.TaskInfo) int {
			return cmp.Or(a.NotBefore.Compare(b.NotBefore), cmp.Compare(a.ID, b.ID))
		})
	case "age":
		slices.SortStableFunc(ts, func(a, b engine.TaskInfo) int {
			return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
		})
	}
}

// scanned is a bounded read of one state of a queue.
type scanned struct {
	Tasks   []engine.TaskInfo
	Next    string
	Scanned int
	Capped  bool // the window ran out before limit tasks matched
}

// scan reads tasks in state from cursor until limit match f, the state
// ends, or window tasks were read: the work is bounded whatever the queue's
// size. Pages are the engine's, so the returned cursor continues exactly
// after the last task read.
func scan(ctx context.Context, q engine.Queue, st engine.State, cursor string, f filter, limit, window int) (scanned, error) {
	var out scanned
	for {
		n := limit - len(out.Tasks)
		if out.Scanned > 0 {
			// Read what, at the match rate so far, fills the page: few
			// calls when matches are sparse, few extra rows when not.
			rate := float64(len(out.Tasks)+1) / float64(out.Scanned)
			n = int(float64(n)/rate) + 1
		}
		n = max(1, min(n, window-out.Scanned, engine.MaxBatch))
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

// queuePage is what the queue template shows.
type queuePage struct {
	Ref         queueRef
	State       engine.State
	Tab         string // the tab shown: a state, or retrying
	Tabs        []stateTab
	States      []engine.State
	Counts      engine.Counts
	Filter      filter
	ID          string
	Sort        string
	Sorts       []sortOpt
	EngineOrder string // label of the engine's own order for State
	Tasks       []engine.TaskInfo
	Note        string
	Next        template.URL
	First       bool
	Now         time.Time
	RunNow      bool
	Paused      bool
	Limits      string // the queue's limits in words, "" for none
	// SampleEvery is the sampling period; Tracked whether the queue's
	// samples are kept (see Options.MaxTrackedQueues).
	SampleEvery time.Duration
	Tracked     bool
	// Controls are the queue's limits as the form edits them.
	Controls limitsForm
	// Quota is the namespace's quota and usage, when the API keeps quotas
	// (HasQuota) and the caller may read them.
	Quota    nsQuota
	HasQuota bool
	// On is the task whose waiting dependents are listed ("" for none).
	On, OnNote string
	// Partitions are the first partitions of the queue (none when its
	// tasks name none), MorePartitions whether it has more.
	Partitions     []engine.PartitionInfo
	MorePartitions bool
	// Search is the filter the engine runs over the whole queue; Matched
	// says it did and Matches how many tasks it selects. Bulk carries it
	// to the bulk actions (BulkButtons), bounded by the highest id and
	// the time of the count.
	Search      search
	Matched     bool
	Matches     int
	Bulk        search
	BulkButtons []bulkButton
}

// queuePartitions is how many partitions the queue page shows.
const queuePartitions = 50

func (rq *request) queue() {
	v := rq.r.URL.Query()
	ref, err := refOf(v)
	if err != nil {
		rq.fail(err)
		return
	}
	tab := v.Get("state")
	if tab == "" {
		tab = engine.Ready.String()
	}
	f := filter{Kind: v.Get("kind"), Err: v.Get("err"), Group: v.Get("group")}
	srch := searchOf(v, tab)
	if f.Group != "" {
		f.Group = errKey(f.Group)
	}
	var st engine.State
	switch tab {
	case retryingTab:
		// Retries are scheduled tasks: the engine lists them with the timers.
		st, f.Retry = engine.Scheduled, onlyRetries
	case engine.Scheduled.String():
		st, f.Retry = engine.Scheduled, noRetries
	default:
		var err error
		if st, err = parseState(tab); err != nil {
			rq.fail(err)
			return
		}
	}
	by := v.Get("sort")
	if by != "" && !slices.ContainsFunc(sorts, func(s sortOpt) bool { return s.Key == by }) {
		rq.fail(badInput("unknown sort %q (priority, due or age)", by))
		return
	}
	window := rq.d.opts.ScanWindow
	off := 0
	if s := v.Get("off"); s != "" {
		if off, err = strconv.Atoi(s); err != nil || off < 0 || off >= window {
			rq.fail(badInput("offset %q is outside 0..%d", s, window-1))
			return
		}
	}
	rq.about(ref.NS)
	q := rq.api.Queue(ref.NS, ref.Name)
	counts, err := q.Counts(rq.ctx())
	if err != nil {
		rq.fail(err)
		return
	}
	// Retries are counted on their tab and the scheduled one only, so the
	// other tabs walk the queue only for a filter. The engine counts them
	// over the whole queue.
	retries, capped, counted := 0, false, false
	if counts.Scheduled > 0 && st == engine.Scheduled && v.Get("id") == "" && v.Get("on") == "" {
		counted = true
		res, err := q.Search(rq.ctx(), engine.SearchOptions{Limit: 1, Count: true,
			Filter: engine.Filter{States: []engine.State{engine.Scheduled}, Retrying: engine.OnlyRetrying}})
		if err != nil {
			rq.fail(err)
			return
		}
		retries = res.Count
	}
	rq.sampleIfDue()
	tracked, _ := rq.d.rates.tracked(ref.NS, ref.Name)
	pg := queuePage{Ref: ref, State: st, Tab: tab, SampleEvery: rq.d.opts.SampleEvery, Tracked: tracked, Tabs: tabsOf(counts, retries, counted, capped, window), States: states,
		Counts: counts, Filter: f, Search: srch, Sort: by, Sorts: sorts,
		EngineOrder: engineOrderLabel(st), First: v.Get("cursor") == "" && off == 0,
		Now: rq.api.Clock().Now(), RunNow: st == engine.Scheduled}
	settings, err := q.Settings(rq.ctx())
	if err != nil {
		rq.fail(err)
		return
	}
	pg.Paused, pg.Limits, pg.Controls = settings.Paused, settings.Limits.String(), formOf(settings.Limits)
	pg.Quota, pg.HasQuota = rq.quotaOf(ref.NS)
	parts, err := q.Partitions(rq.ctx(), engine.PartitionListOptions{Limit: queuePartitions})
	if err != nil {
		rq.fail(err)
		return
	}
	pg.Partitions, pg.MorePartitions = parts.Partitions, parts.Next != ""
	cursor := v.Get("cursor")
	next := func(cursor string, off int) template.URL {
		nv := url.Values{}
		for k, vs := range v {
			nv[k] = vs
		}
		nv.Set("state", tab)
		nv.Set("cursor", cursor)
		nv.Del("off")
		if off > 0 {
			nv.Set("off", strconv.Itoa(off))
		}
		return template.URL(nv.Encode())
	}
	page := rq.d.opts.PageSize
	ef, err := srch.filter(pg.Now)
	if err != nil {
		rq.fail(err)
		return
	}
	f.search = &ef
	if srch.active() && v.Get("id") == "" && v.Get("on") == "" {
		// How many match in the whole queue, and the bulk actions on them.
		res, err := q.Search(rq.ctx(), engine.SearchOptions{Filter: ef, Limit: 1, Count: true})
		if err != nil {
			rq.fail(err)
			return
		}
		pg.Matched, pg.Matches = true, res.Count
		if res.Count > 0 && rq.chrome(0).actions {
			bs := srch
			bs.At, bs.Upto = strconv.FormatInt(pg.Now.UnixMicro(), 10), strconv.FormatUint(res.MaxID, 10)
			pg.Bulk, pg.BulkButtons = bs, bulkButtons(tab)
		}
	}
	onText := strings.TrimSpace(v.Get("on"))
	switch idText := strings.TrimSpace(v.Get("id")); {
	case onText != "":
		on, err := parseID(onText)
		if err != nil {
			rq.fail(err)
			return
		}
		pg.On, pg.Tab, pg.State, pg.RunNow = onText, engine.Waiting.String(), engine.Waiting, false
		ts, note, err := rq.waitingFor(q, ref, on, f, page)
		if err != nil {
			rq.fail(err)
			return
		}
		pg.Tasks, pg.OnNote = ts, note
	case idText != "":
		pg.ID = idText
		id, err := parseID(idText)
		if err != nil {
			rq.fail(err)
			return
		}
		t, err := q.Get(rq.ctx(), id)
		switch {
		case errors.Is(err, engine.ErrNotFound):
		case err != nil:
			rq.fail(err)
			return
		default:
			pg.Tasks = []engine.TaskInfo{t}
			pg.State, pg.Tab = t.State, t.State.String()
			if retrying(t) {
				pg.Tab = retryingTab
			}
		}
	case f.Group == "" && (by == "age" || by == "newest" || srch.active() && by == ""):
		// The engine searches the whole queue, in id order.
		res, err := q.Search(rq.ctx(), engine.SearchOptions{Filter: ef, Newest: by == "newest", Limit: page, Cursor: cursor})
		if err != nil {
			rq.fail(err)
			return
		}
		pg.Tasks = res.Tasks
		if res.Next != "" {
			pg.Next = next(res.Next, 0)
		}
	case by == "" || by == engineOrder(st):
		// The engine's order: a page, or a filtered page within the window.
		res, err := scan(rq.ctx(), q, st, cursor, f, page, window)
		if err != nil {
			rq.fail(err)
			return
		}
		pg.Tasks = res.Tasks
		if res.Next != "" {
			pg.Next = next(res.Next, 0)
		}
		switch {
		case res.Capped:
			pg.Note = fmt.Sprintf("Read %d tasks (the scan window) and found %d matching; “Next page” reads on.", res.Scanned, len(res.Tasks))
		case f.active():
			pg.Note = fmt.Sprintf("Read %d tasks, %d matching.", res.Scanned, len(res.Tasks))
		}
	default:
		// Another order: sort one window of the state and page through it;
		// past the window, the next window is sorted on its own.
		res, err := scan(rq.ctx(), q, st, cursor, f, window, window)
		if err != nil {
			rq.fail(err)
			return
		}
		sortTasks(res.Tasks, by)
		lo, hi := min(off, len(res.Tasks)), min(off+page, len(res.Tasks))
		pg.Tasks = res.Tasks[lo:hi]
		switch {
		case hi < len(res.Tasks):
			pg.Next = next(cursor, hi)
		case res.Next != "":
			pg.Next = next(res.Next, 0)
		}
		if res.Next != "" || cursor != "" {
			pg.Note = fmt.Sprintf("Sorted within a window of %d tasks read (%d matching); the pages after it sort the next window.",
				res.Scanned, len(res.Tasks))
		} else if f.active() {
			pg.Note = fmt.Sprintf("Read %d tasks, %d matching.", res.Scanned, len(res.Tasks))
		}
	}
	rq.render("queue", ref.String(), "queue", pg)
}

// timelineEntry is one line of a task's history.
type timelineEntry struct {
	At    time.Time
	What  string
	Class string // the state it entered, for its marker
}

func timeline(t engine.TaskInfo) []timelineEntry {
	var out []timelineEntry
	if !t.CreatedAt.IsZero() {
		out = append(out, timelineEntry{t.CreatedAt, "enqueued", "ready"})
	}
	for _, e := range t.Errors {
		out = append(out, timelineEntry{e.At, fmt.Sprintf("attempt %d failed", e.Attempt), "dead"})
	}
	switch t.State {
	case engine.Scheduled:
		what := "due"
		if t.Attempts > 0 {
			what = fmt.Sprintf("retry due (attempt %d)", t.Attempts+1)
		}
		out = append(out, timelineEntry{t.NotBefore, what, "scheduled"})
	case engine.InFlight:
		out = append(out, timelineEntry{t.UpdatedAt, fmt.Sprintf("leased to %s (attempt %d)", t.Owner, t.Attempts), "in-flight"})
		out = append(out, timelineEntry{t.LeaseUntil, "lease ends", "in-flight"})
	case engine.Dead:
		out = append(out, timelineEntry{t.UpdatedAt, "dead-lettered", "dead"})
	case engine.Completed:
		out = append(out, timelineEntry{t.UpdatedAt, "completed", "completed"})
	case engine.Waiting:
		out = append(out, timelineEntry{t.UpdatedAt, fmt.Sprintf("waiting for %d %s", len(t.WaitingOn), plural(len(t.WaitingOn), "task", "tasks")), "waiting"})
	case engine.Ready:
		out = append(out, timelineEntry{latest(t.NotBefore, t.UpdatedAt, t.CreatedAt), "ready", "ready"})
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

// taskPage is what the task template shows.
type taskPage struct {
	Ref      queueRef
	T        engine.TaskInfo
	Headers  []string
	Timeline []timelineEntry
	Lineage  lineage
	Now      time.Time
	RunNow   bool
	// TaskForms are the forms of the task actions of engine.Queue
	// without a hand-written button the task is offered (taskactions.go).
	TaskForms []*taskForm
	Deps      depView
	Tree      depTree
}

func (rq *request) task() {
	v := rq.r.URL.Query()
	id, err := parseID(v.Get("id"))
	if err != nil {
		rq.fail(err)
		return
	}
	if v.Get("q") == "" {
		rq.findTask(id, v)
		return
	}
	ref, err := refOf(v)
	if err != nil {
		rq.fail(err)
		return
	}
	rq.about(ref.NS)
	q := rq.api.Queue(ref.NS, ref.Name)
	t, err := q.Get(rq.ctx(), id)
	if err != nil && errors.Is(err, engine.ErrCorrupt) && t.ID == id {
		// A value that cannot be read: the rest of the task is shown,
		// with the damage where the value would be.
		if t.Unreadable == "" {
			t.Unreadable = err.Error()
		}
		err = nil
	}
	if err != nil {
		rq.fail(err)
		return
	}
	headers := make([]string, 0, len(t.Headers))
	for k := range t.Headers {
		headers = append(headers, k)
	}
	slices.Sort(headers)
	tree, err := rq.depTreeOf(ref, t)
	if err != nil {
		rq.fail(err)
		return
	}
	rq.render("task", fmt.Sprintf("Task %d", t.ID), "queue", taskPage{
		Ref: ref, T: t, Headers: headers, Timeline: timeline(t), Lineage: lineage{Parent: t.Parent, FollowUps: t.FollowUps},
		Now: rq.api.Clock().Now(), RunNow: t.State == engine.Scheduled, Deps: depViewOf(t), Tree: tree,
		TaskForms: taskFormsFor(t.State),
	})
}

// findTask sends the browser to the page of task id, looked up in every
// queue the caller can see (in the namespace p/s when the query names one):
// a follow-up may sit on any queue of its namespace, and the header's
// search box knows only the id. The work is one lookup per queue.
func (rq *request) findTask(id uint64, v url.Values) {
	qs, err := rq.api.Queues(rq.ctx())
	if err != nil {
		rq.fail(err)
		return
	}
	inNS := v.Has("p") || v.Has("s")
	want := engine.NS(v.Get("p"), v.Get("s"))
	for _, qi := range qs {
		if inNS && qi.Namespace != want {
			continue
		}
		_, err := rq.api.Queue(qi.Namespace, qi.Name).Get(rq.ctx(), id)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			rq.fail(err)
			return
		}
		ref := queueRef{qi.Namespace, qi.Name}
		http.Redirect(rq.w, rq.r, fmt.Sprintf("%stask?%s&id=%d", rq.d.opts.Prefix, ref.Query(), id), http.StatusSeeOther)
		return
	}
	where := "any queue you can see"
	if inNS {
		where = "any queue of " + want.String()
	}
	rq.fail(fmt.Errorf("%w: no task %d in %s (completed tasks are kept only with RetainCompleted)", engine.ErrNotFound, id, where))
}

// deadPage is what the dead-letter template shows.
type deadPage struct {
	Ref     queueRef
	Counts  engine.Counts
	Groups  []*errorGroup // this page's
	NGroups int
	Scanned int
	Partial bool // more dead tasks than the scan window
	Off     int
	Prev    template.URL
	Next    template.URL
	Now     time.Time
}

func (rq *request) dead() {
	v := rq.r.URL.Query()
	ref, err := refOf(v)
	if err != nil {
		rq.fail(err)
		return
	}
	off := 0
	if s := v.Get("g"); s != "" {
		if off, err = strconv.Atoi(s); err != nil || off < 0 || off%groupsPage != 0 {
			rq.fail(badInput("group offset %q is not a multiple of %d", s, groupsPage))
			return
		}
	}
	rq.about(ref.NS)
	q := rq.api.Queue(ref.NS, ref.Name)
	counts, err := q.Counts(rq.ctx())
	if err != nil {
		rq.fail(err)
		return
	}
	window := rq.d.opts.ScanWindow
	res, err := scan(rq.ctx(), q, engine.Dead, "", filter{}, window, window)
	if err != nil {
		rq.fail(err)
		return
	}
	groups := groupErrors(res.Tasks)
	pg := deadPage{Ref: ref, Counts: counts, NGroups: len(groups), Scanned: len(res.Tasks), Partial: res.Next != "",
		Off: off, Now: rq.api.Clock().Now()}
	at := func(off int) template.URL {
		nv := url.Values{"p": {ref.NS.Project}, "s": {ref.NS.Scope}, "q": {ref.Name}}
		if off > 0 {
			nv.Set("g", strconv.Itoa(off))
		}
		return template.URL(nv.Encode())
	}
	if off > 0 {
		pg.Prev = at(off - groupsPage)
	}
	if off+groupsPage < len(groups) {
		pg.Next = at(off + groupsPage)
	}
	pg.Groups = groups[min(off, len(groups)):min(off+groupsPage, len(groups))]
	rq.render("dead", "Dead letters · "+ref.String(), "queue", pg)
}

const kvPage = 100

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
		es, err := rq.api.KV(ns).Scan(rq.ctx(), engine.ScanOptions{Prefix: prefix, Start: start, Limit: kvPage + 1})
		if err != nil {
			rq.fail(err)
			return
		}
		if len(es) > kvPage {
			es = es[:kvPage]
			nv := url.Values{"p": {ns.Project}, "s": {ns.Scope}, "prefix": {prefix}, "start": {es[kvPage-1].Key + "\x00"}}
			data["Next"] = template.URL(nv.Encode())
		}
		data["Entries"] = es
		data["Scanned"] = true
	}
	rq.render("kv", "Key-value entries", "kv", data)
}

// clusterPage is the cluster template's data.
type clusterPage struct {
	S       ClusterStatus
	Err     string
	MaxLag  uint64
	Voters  int
	Healthy int // members reachable and within lagWarn of the leader
}

// lagWarn is the lag, in log entries, from which a member is shown behind.
const lagWarn = 1000

func (rq *request) cluster() {
	st, err := rq.d.opts.Cluster.ClusterStatus(rq.ctx())
	p := clusterPage{S: st}
	status := http.StatusOK
	if err != nil {
		// The page still renders (and keeps refreshing) while a node
		// cannot answer, for instance during an election.
		p.Err, status = err.Error(), http.StatusServiceUnavailable
	}
	for _, m := range st.Members {
		p.MaxLag = max(p.MaxLag, m.Lag)
		if m.Voter {
			p.Voters++
		}
		if m.State != "unreachable" && m.Lag < lagWarn {
			p.Healthy++
		}
	}
	rq.d.renderAs(rq.w, rq.r, status, "cluster", "Cluster", "cluster", rq.chrome(rq.d.opts.Refresh), p)
}

// lineage is where a task came from and what it started: the task whose
// completion enqueued it, and the follow-ups its own completion enqueued
// (kept on a retained completion).
type lineage struct {
	Parent    uint64
	FollowUps []uint64
}

// memory is what the overview shows of the state's memory against its
// budget (engine.Options.MaxMemory), and the namespaces that hold most
// with their quotas (engine.Quotas).
type memory struct {
	Known        bool
	Used, Budget int64
	Percent      int64
	Top          []memRow
	Quotas       bool // some namespace of Top has a quota
	// ValueLog is the size of the value log on disk, ValueLive the bytes
	// of it that live tasks and KV entries refer to, ValueDead the rest
	// (what compaction reclaims).
	ValueLog, ValueLive, ValueDead int64
}

// memRow is a namespace's usage and its quota (zero: none).
type memRow struct {
	engine.NamespaceUsage
	Quota engine.Quota
}

// memTop is how many namespaces the overview lists by memory.
const memTop = 10

// memoryOf reads the memory of api when it is a DB the program opened
// (a caller's view, or a client, says nothing of it).
func memoryOf(ctx context.Context, api engine.API) memory {
	st, ok := api.(interface {
		Stats() engine.Stats
		Usage(max int) []engine.NamespaceUsage
	})
	if !ok {
		return memory{}
	}
	s := st.Stats()
	if s.Memory == 0 && s.MemoryBudget == 0 {
		return memory{}
	}
	m := memory{Known: true, Used: s.Memory, Budget: s.MemoryBudget,
		ValueLog: s.ValueLogBytes, ValueLive: s.ValueLiveBytes, ValueDead: max(s.ValueLogBytes-s.ValueLiveBytes, 0)}
	qs, _ := api.(engine.Quotas)
	for _, u := range st.Usage(memTop) {
		r := memRow{NamespaceUsage: u}
		if qs != nil {
			if q, _, err := qs.Quota(ctx, u.Namespace); err == nil && q != (engine.Quota{}) {
				r.Quota, m.Quotas = q, true
			}
		}
		m.Top = append(m.Top, r)
	}
	if m.Budget > 0 {
		m.Percent = m.Used * 100 / m.Budget
	}
	return m
}
