package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/docketdb/docket/engine"
)

// op is an action the dashboard can take.
type op struct {
	Name  string
	Verb  string // past tense, for the report
	What  string // what confirming will do
	All   bool   // acts on a whole state of the queue, not on ids
	Queue bool   // acts on the queue itself
}

var ops = map[string]op{
	"redrive":              {Name: "redrive", Verb: "Redrove", What: "make these dead tasks ready again with a fresh attempt budget"},
	"redrive-all":          {Name: "redrive-all", Verb: "Redrove", What: "make every dead task of the queue ready again", All: true},
	"cancel":               {Name: "cancel", Verb: "Cancelled", What: "delete these tasks whatever their state; a worker holding one loses its lease"},
	"run-now":              {Name: "run-now", Verb: "Made due", What: "make these scheduled tasks due now"},
	"delete-completed":     {Name: "delete-completed", Verb: "Deleted", What: "delete these retained completed tasks and their results"},
	"delete-completed-all": {Name: "delete-completed-all", Verb: "Deleted", What: "delete every retained completed task of the queue", All: true},
	"pause":                {Name: "pause", Verb: "Paused", What: "stop workers from claiming tasks of this queue", Queue: true},
	"resume":               {Name: "resume", Verb: "Resumed", What: "let workers claim tasks of this queue again", Queue: true},
}

// maxDeleteAll bounds one "delete every completed task" action; the report
// says when more remain.
const maxDeleteAll = 100_000

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
	var ids []uint64
	if !o.All && !o.Queue {
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
	back := safeBack(rq.d.opts.Prefix, f.Get("back"), ref)
	q := rq.api.Queue(ref.NS, ref.Name)
	if o.Name == "run-now" {
		if _, ok := q.(runNower); !ok {
			rq.fail(badInput("this engine cannot make a task due now"))
			return
		}
	}
	if o.Queue {
		if _, ok := q.(pauser); !ok {
			rq.fail(badInput("this engine cannot pause queues"))
			return
		}
	}
	if f.Get("confirm") != "yes" {
		rq.renderStill(http.StatusOK, "confirm", "Confirm: "+o.Name, "queue", map[string]any{
			"Op": o, "Ref": ref, "IDs": ids, "Back": back})
		return
	}
	rep := report{Op: o, Ref: ref, Back: back, Asked: len(ids)}
	ctx := rq.ctx()
	switch o.Name {
	case "redrive-all":
		n, err := q.RedriveAll(ctx)
		rep.Done = n
		rep.addErr(err)
	case "delete-completed-all":
		rep.Done, rep.More, err = deleteCompleted(ctx, q)
		rep.addErr(err)
	case "pause":
		rep.addErr(q.(pauser).Pause(ctx))
	case "resume":
		rep.addErr(q.(pauser).Resume(ctx))
	default:
		for _, id := range ids {
			var err error
			switch o.Name {
			case "redrive":
				err = q.Redrive(ctx, id)
			case "cancel":
				err = q.Cancel(ctx, id)
			case "run-now":
				err = q.(runNower).RunNow(ctx, id)
			case "delete-completed":
				var t engine.TaskInfo
				if t, err = q.Get(ctx, id); err == nil {
					if t.State != engine.Completed {
						err = fmt.Errorf("%w: task %d is %s, not completed", engine.ErrConflict, id, t.State)
					} else {
						err = q.Cancel(ctx, id)
					}
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
	status := http.StatusOK
	if len(rep.Errors) > 0 && rep.Done == 0 {
		status = http.StatusConflict
		for _, e := range rep.Errors {
			if strings.Contains(e, engine.ErrPermission.Error()) {
				status = http.StatusForbidden
			}
		}
	}
	rq.d.opts.Logger.Info("docket ui: action", "caller", rq.who, "op", o.Name, "queue", ref.String(),
		"done", rep.Done, "errors", len(rep.Errors))
	rq.renderStill(status, "report", "Done: "+o.Name, "queue", rep)
}

func (r *report) addErr(err error) {
	if err == nil {
		return
	}
	if len(r.Errors) < 20 {
		r.Errors = append(r.Errors, err.Error())
	} else if len(r.Errors) == 20 {
		r.Errors = append(r.Errors, "… and more")
	}
}

func summary(r report) string {
	switch {
	case r.Op.Queue:
		if len(r.Errors) == 0 {
			return r.Op.Verb + " the queue."
		}
		return "Nothing changed."
	case r.Op.All:
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

// deleteCompleted cancels retained completed tasks, at most maxDeleteAll,
// reading them a page at a time.
func deleteCompleted(ctx context.Context, q engine.Queue) (int, bool, error) {
	n := 0
	for n < maxDeleteAll {
		p, err := q.List(ctx, engine.ListOptions{State: engine.Completed, Limit: min(1000, maxDeleteAll-n)})
		if err != nil {
			return n, false, err
		}
		if len(p.Tasks) == 0 {
			return n, false, nil
		}
		for _, t := range p.Tasks {
			if err := q.Cancel(ctx, t.ID); err != nil && !errors.Is(err, engine.ErrNotFound) {
				return n, false, err
			}
			n++
		}
		if p.Next == "" {
			return n, false, nil
		}
	}
	c, err := q.Counts(ctx)
	return n, err == nil && c.Completed > 0, err
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
