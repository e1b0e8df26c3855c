package ui

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/docketdb/docket/engine"
)

// The Workers and Periodic pages read engine.Presence: the worker
// processes and the periodic schedules reported into each namespace the
// caller may read (those that hold queues, and the one the query names).

// presenceOf returns the API's presence, nil if it keeps none.
func presenceOf(api engine.API) engine.Presence {
	p, _ := api.(engine.Presence)
	return p
}

// namespaces lists the namespaces the pages look in: those with queues
// the caller sees, and the one named by the query (p and s).
func (rq *request) namespaces() ([]engine.Namespace, error) {
	var out []engine.Namespace
	v := rq.r.URL.Query()
	if v.Get("p") != "" || v.Get("s") != "" {
		out = append(out, engine.NS(v.Get("p"), v.Get("s")))
	}
	qs, err := rq.api.Queues(rq.ctx())
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		if !slices.Contains(out, q.Namespace) {
			out = append(out, q.Namespace)
		}
	}
	return out, nil
}

// workerRow is a worker process on the Workers page.
type workerRow struct {
	NS engine.Namespace
	engine.WorkerPresence
	Busy, Slots int
	Running     []runningRow
}

type runningRow struct {
	engine.RunningTask
	For time.Duration // how long it has run
}

type workersPage struct {
	Now        time.Time
	Rows       []workerRow
	Busy       int
	Slots      int
	Errors     []string
	NoPresence bool
}

func (rq *request) workers() {
	data := workersPage{Now: rq.api.Clock().Now()}
	p := presenceOf(rq.api)
	if p == nil {
		data.NoPresence = true
		rq.render("workers", "Workers", "workers", data)
		return
	}
	nss, err := rq.namespaces()
	if err != nil {
		rq.fail(err)
		return
	}
	for _, ns := range nss {
		ws, err := p.Workers(rq.ctx(), ns)
		if err != nil {
			if errors.Is(err, engine.ErrPermission) {
				continue
			}
			data.Errors = append(data.Errors, fmt.Sprintf("%s: %v", ns, err))
			continue
		}
		for _, w := range ws {
			r := workerRow{NS: ns, WorkerPresence: w, Busy: len(w.Running)}
			for _, q := range w.Queues {
				r.Slots += q.Concurrency
			}
			for _, t := range w.Running {
				r.Running = append(r.Running, runningRow{RunningTask: t, For: max(0, data.Now.Sub(t.Started))})
			}
			data.Busy += r.Busy
			data.Slots += r.Slots
			data.Rows = append(data.Rows, r)
		}
	}
	slices.SortFunc(data.Rows, func(a, b workerRow) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.ID, b.ID), cmp.Compare(a.NS.String(), b.NS.String()))
	})
	rq.render("workers", "Workers", "workers", data)
}

// scheduleRow is a periodic schedule on the Periodic page.
type scheduleRow struct {
	NS engine.Namespace
	engine.ScheduleInfo
	Ref     queueRef
	Actions bool // the caller may pause, resume and run it
}

type periodicPage struct {
	Now        time.Time
	Rows       []scheduleRow
	Errors     []string
	NoPresence bool
}

func (rq *request) periodic() {
	data := periodicPage{Now: rq.api.Clock().Now()}
	p := presenceOf(rq.api)
	if p == nil {
		data.NoPresence = true
		rq.render("periodic", "Periodic tasks", "periodic", data)
		return
	}
	nss, err := rq.namespaces()
	if err != nil {
		rq.fail(err)
		return
	}
	for _, ns := range nss {
		ss, err := p.Schedules(rq.ctx(), ns)
		if err != nil {
			if errors.Is(err, engine.ErrPermission) {
				continue
			}
			data.Errors = append(data.Errors, fmt.Sprintf("%s: %v", ns, err))
			continue
		}
		for _, s := range ss {
			data.Rows = append(data.Rows, scheduleRow{NS: ns, ScheduleInfo: s, Ref: queueRef{NS: ns, Name: s.Queue},
				Actions: rq.may(ns)})
		}
	}
	if len(data.Rows) > 0 && !slices.ContainsFunc(data.Rows, func(r scheduleRow) bool { return r.Actions }) {
		rq.about(data.Rows[0].NS) // no button anywhere: the page says why
	}
	rq.render("periodic", "Periodic tasks", "periodic", data)
}

// scheduleAction pauses, resumes or runs one schedule, then returns to
// the Periodic page. The button is its own confirmation: each is undone
// by another button (run now enqueues one task).
func (rq *request) scheduleAction(o op, ref queueRef) {
	name := rq.r.PostForm.Get("schedule")
	if name == "" {
		rq.fail(badInput("no schedule named (parameter schedule)"))
		return
	}
	p := presenceOf(rq.api)
	if p == nil {
		rq.fail(badInput("this dashboard's API keeps no periodic schedules"))
		return
	}
	ctx := rq.ctx()
	var err error
	switch o.Name {
	case "schedule-pause":
		err = p.PauseSchedule(ctx, ref.NS, ref.Name, name)
	case "schedule-resume":
		err = p.ResumeSchedule(ctx, ref.NS, ref.Name, name)
	case "schedule-run":
		err = p.RunSchedule(ctx, ref.NS, ref.Name, name)
	}
	if err != nil {
		rq.fail(fmt.Errorf("%w. Nothing changed.", err))
		return
	}
	rq.d.opts.Logger.Info("docket ui: action", "caller", rq.who, "op", o.Name, "queue", ref.String(), "schedule", name)
	http.Redirect(rq.w, rq.r, rq.d.opts.Prefix+"periodic", http.StatusSeeOther)
}
