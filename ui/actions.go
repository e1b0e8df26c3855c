package ui

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/taskaction"
)

// op is an action the dashboard can take.
type op struct {
	Name  string
	Verb  string // past tense, for the report
	What  string // what confirming will do
	All   bool   // acts on a whole state of the queue, not on ids
	ByErr bool   // acts on the dead tasks whose last error is the form's err
	Queue bool   // acts on the queue itself
	// Schedule acts on the periodic schedule the form's schedule names,
	// of the queue (see scheduleAction).
	Schedule bool
	Bulk     bool // acts on every task a filter selects (search.go)
	// Task is the form of a task action of engine.Queue that no op takes
	// by hand (taskactions.go), which the op runs on each task.
	Task *taskForm
}

var ops = map[string]op{
	"redrive":              {Name: "redrive", Verb: "Redrove", What: "make these dead tasks ready again with a fresh attempt budget"},
	"redrive-all":          {Name: "redrive-all", Verb: "Redrove", What: "make every dead task of the queue ready again", All: true},
	"redrive-error":        {Name: "redrive-error", Verb: "Redrove", What: "make every dead task of the queue whose last error has this shape ready again", ByErr: true},
	"delete-error":         {Name: "delete-error", Verb: "Deleted", What: "delete every dead task of the queue whose last error has this shape", ByErr: true},
	"delete-dead-all":      {Name: "delete-dead-all", Verb: "Deleted", What: "delete every dead task of the queue", All: true},
	"cancel":               {Name: "cancel", Verb: "Cancelled", What: "delete these tasks whatever their state; a worker holding one loses its lease"},
	"run-now":              {Name: "run-now", Verb: "Made due", What: "make these scheduled tasks due now"},
	"delete-completed":     {Name: "delete-completed", Verb: "Deleted", What: "delete these retained completed tasks and their results"},
	"delete-completed-all": {Name: "delete-completed-all", Verb: "Deleted", What: "delete every retained completed task of the queue", All: true},
	"pause":                {Name: "pause", Verb: "Paused", What: "stop workers from claiming tasks of this queue", Queue: true},
	"resume":               {Name: "resume", Verb: "Resumed", What: "let workers claim tasks of this queue again", Queue: true},
	"set-limits":           {Name: "set-limits", Verb: "Set the limits of", What: "replace the queue's limits", Queue: true},
	"set-quota":            {Name: "set-quota", Verb: "Set the quota of the namespace of", What: "replace the namespace's quota", Queue: true},
	"schedule-pause":       {Name: "schedule-pause", Verb: "Paused", What: "skip the schedule's ticks until it is resumed", Schedule: true},
	"schedule-resume":      {Name: "schedule-resume", Verb: "Resumed", What: "enqueue the schedule's ticks again", Schedule: true},
	"schedule-run":         {Name: "schedule-run", Verb: "Asked to run", What: "enqueue the schedule's task once, now", Schedule: true},
	"bulk-retry":           {Name: "bulk-retry", Bulk: true},
	"bulk-cancel":          {Name: "bulk-cancel", Bulk: true},
	"bulk-run-now":         {Name: "bulk-run-now", Bulk: true},
	"bulk-delete":          {Name: "bulk-delete", Bulk: true},
}

// maxBulk bounds the tasks one "every completed task" or "every dead task
// with this error" action reads; the report says when more remain.
const maxBulk = 100_000

// report is the outcome of an action.
type report struct {
	Op      op
	Ref     queueRef
	Done    int
	Asked   int
	Errors  []string
	More    bool
	Back    string
	Summary string
	Err     string // the error text of a ByErr action
	// Refused is whether an error was the engine's refusal (ErrPermission).
	Refused bool
	// Limits are the limits a set-limits action set, or the quota a
	// set-quota action set, in words.
	Limits string
}

func (rq *request) action() {
	if !rq.d.opts.AllowActions {
		rq.d.fail(rq.w, rq.r, http.StatusForbidden, errors.New("this dashboard is read-only: its program did not allow actions"))
		return
	}
	f := rq.r.PostForm
	o, ok := ops[f.Get("op")]
	if !ok {
		rq.fail(badInput("unknown action %q", f.Get("op")))
		return
	}
	ref, err := refOf(f)
	if err != nil {
		rq.fail(err)
		return
	}
	rq.about(ref.NS)
	if fl := rq.follower; fl != nil {
		msg := "this node is not the leader and no leader is known: try again once one is elected"
		if fl.Leader != "" {
			msg = fmt.Sprintf("this node is not the leader: take the action on the leader, node %s", fl.Leader)
			if fl.URL != "" {
				msg += " (" + fl.URL + ")"
			}
		}
		rq.failWith(http.StatusConflict, errors.New(msg+". Nothing changed."))
		return
	}
	if !rq.may(ref.NS) {
		rq.failWith(http.StatusForbidden, fmt.Errorf("%s lacks admin on %s, which %s needs. Nothing changed.",
			rq.callerName(), ref.NS, o.Name))
		return
	}
	if o.Schedule {
		rq.scheduleAction(o, ref)
		return
	}
	if o.Bulk {
		rq.bulk(o, ref, f)
		return
	}
	var ids []uint64
	errText := f.Get("err")
	if o.ByErr && errText == "" {
		rq.fail(badInput("no error text given (parameter err)"))
		return
	}
	if !o.All && !o.Queue && !o.ByErr {
		if len(f["id"]) > engine.MaxBatch {
			rq.fail(badInput("%d tasks selected, at most %d at once", len(f["id"]), engine.MaxBatch))
			return
		}
		for _, s := range f["id"] {
			id, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				rq.fail(badInput("task id %q is not a number", s))
				return
			}
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			rq.fail(badInput("no task selected"))
			return
		}
	}
	var limits engine.Limits
	if o.Name == "set-limits" {
		// The form on the queue page is its own confirmation.
		if limits, err = parseLimits(f); err != nil {
			rq.fail(fmt.Errorf("%w. Nothing changed.", err))
			return
		}
	}
	var quota engine.Quota
	if o.Name == "set-quota" {
		// The form on the queue page is its own confirmation.
		if quota, err = parseQuota(f); err != nil {
			rq.fail(fmt.Errorf("%w. Nothing changed.", err))
			return
		}
	}
	var input taskaction.Input
	var now time.Time // of the DB's clock, for times from now
	if o.Task != nil {
		now = rq.api.Clock().Now()
		// The form on the task page is its own confirmation.
		if input, err = o.Task.parse(f); err != nil {
			rq.fail(fmt.Errorf("%w. Nothing changed.", err))
			return
		}
	}
	back := safeBack(rq.d.opts.Prefix, f.Get("back"), ref)
	q := rq.api.Queue(ref.NS, ref.Name)
	if f.Get("confirm") != "yes" {
		c := confirmPage{Op: o, Ref: ref, IDs: ids, Back: back, Err: errText, Count: -1, Fields: carried(f)}
		if o.All {
			// Say how many the action would touch now; it may touch more.
			counts, err := q.Counts(rq.ctx())
			if err != nil {
				rq.fail(err)
				return
			}
			c.Count = counts.Completed
			if o.Name == "redrive-all" || o.Name == "delete-dead-all" {
				c.Count = counts.Dead
			}
		}
		rq.renderStill(http.StatusOK, "confirm", "Confirm: "+o.Name, "queue", c)
		return
	}
	rep := report{Op: o, Ref: ref, Back: back, Asked: len(ids), Err: errText}
	ctx := rq.ctx()
	switch o.Name {
	case "redrive-all":
		n, err := q.RedriveAll(ctx)
		rep.Done = n
		rep.addErr(err)
	case "delete-completed-all":
		rep.Done, rep.More, err = deleteAll(ctx, q, engine.Completed)
		rep.addErr(err)
	case "delete-dead-all":
		rep.Done, rep.More, err = deleteAll(ctx, q, engine.Dead)
		rep.addErr(err)
	case "redrive-error", "delete-error":
		act := q.Redrive
		if o.Name == "delete-error" {
			act = q.Cancel
		}
		rep.Done, rep.More, err = withError(ctx, q, errText, act)
		rep.addErr(err)
	case "pause":
		rep.addErr(q.Pause(ctx))
	case "resume":
		rep.addErr(q.Resume(ctx))
	case "set-limits":
		if err := q.SetLimits(ctx, limits); errors.Is(err, engine.ErrInvalid) {
			rq.fail(fmt.Errorf("%w. Nothing changed.", err))
			return
		} else {
			rep.addErr(err)
		}
		rep.Limits = limits.String()
	case "set-quota":
		qs, ok := rq.api.(engine.Quotas)
		if !ok {
			rq.fail(badInput("this dashboard's API keeps no quotas. Nothing changed."))
			return
		}
		if err := qs.SetQuota(ctx, ref.NS, quota); errors.Is(err, engine.ErrInvalid) {
			rq.fail(fmt.Errorf("%w. Nothing changed.", err))
			return
		} else {
			rep.addErr(err)
		}
		rep.Limits = quotaWords(quota)
	default:
		for _, id := range ids {
			var err error
			switch o.Name {
			case "redrive":
				err = q.Redrive(ctx, id)
			case "cancel":
				err = q.Cancel(ctx, id)
			case "run-now":
				err = q.RunNow(ctx, id)
			case "delete-completed":
				var t engine.TaskInfo
				if t, err = q.Get(ctx, id); err == nil {
					if t.State != engine.Completed {
						err = fmt.Errorf("%w: task %d is %s, not completed", engine.ErrConflict, id, t.State)
					} else {
						err = q.Cancel(ctx, id)
					}
				}
			default:
				if o.Task != nil {
					err = input.Call(ctx, q, id, now)
				}
			}
			if err != nil {
				rep.addErr(fmt.Errorf("task %d: %w", id, err))
				if errors.Is(err, engine.ErrPermission) || ctx.Err() != nil {
					break // the rest would fail the same way
				}
				continue
			}
			rep.Done++
		}
	}
	rep.Summary = summary(rep)
	rq.d.opts.Logger.Info("docket ui: action", "caller", rq.who, "op", o.Name, "queue", ref.String(),
		"done", rep.Done, "errors", len(rep.Errors))
	if len(rep.Errors) > 0 && rep.Done == 0 {
		if rep.Refused {
			// A refusal reads as one: an error page, 403.
			rq.failWith(http.StatusForbidden, fmt.Errorf("%s. Nothing changed.", strings.Join(rep.Errors, "; ")))
			return
		}
		rq.renderStill(http.StatusConflict, "report", "Failed: "+o.Name, "queue", rep)
		return
	}
	rq.renderStill(http.StatusOK, "report", "Done: "+o.Name, "queue", rep)
}

// callerName names the caller in a refusal.
func (rq *request) callerName() string {
	if rq.who == "" {
		return "this dashboard's program"
	}
	return fmt.Sprintf("caller %q", rq.who)
}

func (r *report) addErr(err error) {
	if err == nil {
		return
	}
	if errors.Is(err, engine.ErrPermission) {
		r.Refused = true
	}
	if len(r.Errors) < 20 {
		r.Errors = append(r.Errors, err.Error())
	} else if len(r.Errors) == 20 {
		r.Errors = append(r.Errors, "… and more")
	}
}

func summary(r report) string {
	switch {
	case r.Op.Name == "set-limits":
		switch {
		case len(r.Errors) > 0:
			return "Nothing changed."
		case r.Limits == "":
			return "Removed the queue's limits."
		}
		return "Set the queue's limits: " + r.Limits + "."
	case r.Op.Name == "set-quota":
		switch {
		case len(r.Errors) > 0:
			return "Nothing changed."
		case r.Limits == "":
			return "Removed the quota of namespace " + r.Ref.NS.String() + "."
		}
		return "Set the quota of namespace " + r.Ref.NS.String() + ": " + r.Limits + "."
	case r.Op.Queue:
		if len(r.Errors) == 0 {
			return r.Op.Verb + " the queue."
		}
		return "Nothing changed."
	case r.Op.All || r.Op.ByErr:
		s := fmt.Sprintf("%s %d %s.", r.Op.Verb, r.Done, plural(r.Done, "task", "tasks"))
		if r.More {
			s += " More remain: run it again."
		}
		return s
	}
	return fmt.Sprintf("%s %d of %d %s.", r.Op.Verb, r.Done, r.Asked, plural(r.Asked, "task", "tasks"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// deleteAll deletes the tasks of q in state st (retained completions or
// dead letters): the engine's bulk delete, over the whole queue, in
// commits of a bounded size. Nothing is left for another run, so more is
// always false.
func deleteAll(ctx context.Context, q engine.Queue, st engine.State) (int, bool, error) {
	r, err := q.Bulk(ctx, engine.Filter{States: []engine.State{st}}, engine.BulkDelete)
	return r.Done, false, err
}

// withError runs act (redrive or cancel) on every dead task of q whose last
// error has the shape of text (errKey), reading at most maxBulk dead tasks a page at a
// time; more is true when dead tasks remained unread. Tasks that left the
// dead state meanwhile are skipped.
func withError(ctx context.Context, q engine.Queue, text string, act func(context.Context, uint64) error) (n int, more bool, err error) {
	cursor, read, key := "", 0, errKey(text)
	for read < maxBulk {
		p, err := q.List(ctx, engine.ListOptions{State: engine.Dead, Limit: min(1000, maxBulk-read), Cursor: cursor})
		if err != nil {
			return n, false, err
		}
		read += len(p.Tasks)
		for _, t := range p.Tasks {
			if errKey(t.LastError) != key {
				continue
			}
			err := act(ctx, t.ID)
			switch {
			case err == nil:
				n++
			case errors.Is(err, engine.ErrNotFound), errors.Is(err, engine.ErrConflict):
			default:
				return n, false, err
			}
		}
		if p.Next == "" {
			return n, false, nil
		}
		cursor = p.Next
	}
	return n, true, nil
}

// confirmPage is what the confirmation template shows.
type confirmPage struct {
	Op     op
	Ref    queueRef
	IDs    []uint64
	Count  int // tasks an All action would touch now, -1 if not one
	Err    string
	Back   string
	Fields []hiddenField // the action's own inputs, posted again on confirming
}

// hiddenField is one input of a form, carried through the confirmation.
type hiddenField struct{ Name, Value string }

// confirmFields are the inputs the confirmation form writes itself.
var confirmFields = map[string]bool{"csrf": true, "op": true, "confirm": true, "p": true, "s": true, "q": true,
	"back": true, "err": true, "id": true}

// carried returns the inputs of a posted action form other than those the
// confirmation writes (a task action's options, limits, a quota), sorted,
// so that confirming posts what was asked for.
func carried(f url.Values) []hiddenField {
	var out []hiddenField
	for _, name := range slices.Sorted(maps.Keys(f)) {
		if confirmFields[name] {
			continue
		}
		for _, v := range f[name] {
			out = append(out, hiddenField{name, v})
		}
	}
	return out
}

// safeBack returns back if it is a path of this dashboard, else the queue's
// page: a form must not turn the dashboard into an open redirect.
func safeBack(prefix, back string, ref queueRef) string {
	u, err := url.Parse(back)
	if back == "" || err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(u.Path, prefix) || strings.Contains(u.Path, "..") || strings.HasPrefix(back, "//") {
		return prefix + "queue?" + string(ref.Query())
	}
	return u.String()
}
