package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docketdb/docket/engine"
)

// The worker processes and periodic schedules the worker runtime reports
// (engine.Presence): the dashboard's Workers and Periodic pages.

type runningJSON struct {
	Queue   string    `json:"queue"`
	ID      uint64    `json:"id"`
	Kind    string    `json:"kind,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Started time.Time `json:"started"`
	For     string    `json:"for"`
}

type workerQueueJSON struct {
	Queue       string `json:"queue"`
	Concurrency int    `json:"concurrency"`
}

type workerJSON struct {
	Namespace nsJSON            `json:"namespace"`
	ID        string            `json:"id"`
	Host      string            `json:"host"`
	PID       int               `json:"pid"`
	Version   string            `json:"version"`
	Started   *time.Time        `json:"started,omitempty"`
	Queues    []workerQueueJSON `json:"queues"`
	Running   []runningJSON     `json:"running"`
	Draining  bool              `json:"draining"`
	Heartbeat time.Time         `json:"heartbeat"`
	Expires   time.Time         `json:"expires"`
}

type scheduleJSON struct {
	Namespace    nsJSON     `json:"namespace"`
	Queue        string     `json:"queue"`
	Name         string     `json:"name"`
	Spec         string     `json:"spec"`
	Kind         string     `json:"kind,omitempty"`
	Worker       string     `json:"worker,omitempty"`
	Next         *time.Time `json:"next,omitempty"`
	Last         *time.Time `json:"last,omitempty"`
	LastTask     uint64     `json:"last_task,omitempty"`
	Outcome      string     `json:"outcome,omitempty"`
	Paused       bool       `json:"paused"`
	RunRequested bool       `json:"run_requested"`
}

// presenceTarget opens the target and returns its presence and the
// namespaces to look in: -ns if given, else every namespace with queues.
func presenceTarget(ctx context.Context, tf *targetFlags, nsFlag string, write bool) (*target, engine.Presence, []engine.Namespace, error) {
	t, err := tf.open(ctx, write)
	if err != nil {
		return nil, nil, nil, err
	}
	p, ok := t.api.(engine.Presence)
	if !ok {
		t.Close()
		return nil, nil, nil, fmt.Errorf("%w: %s keeps no worker presence", engine.ErrInvalid, t.where)
	}
	if nsFlag != "" {
		ns, err := parseNS(nsFlag)
		if err != nil {
			t.Close()
			return nil, nil, nil, usageError{err.Error()}
		}
		return t, p, []engine.Namespace{ns}, nil
	}
	qs, err := t.api.Queues(ctx)
	if err != nil {
		t.Close()
		return nil, nil, nil, err
	}
	var nss []engine.Namespace
	for _, q := range qs {
		if !slices.Contains(nss, q.Namespace) {
			nss = append(nss, q.Namespace)
		}
	}
	return t, p, nss, nil
}

const workersAbout = `
Lists the worker processes connected to this docket, as the worker runtime
reports them every few seconds: host, pid, version, the queues each works
and with how many handlers at once, the tasks running now and for how long,
the last heartbeat, and whether the process is draining (stopping). A
process that stops reporting is gone once its time to live runs out.
Without -ns, every namespace that holds queues is listed.`

func runWorkers(ctx context.Context, c cli, args []string) error {
	fs := newFlagsFor(c, "workers", "[-dir DIR | -server URL] [-ns P/S] [-json]", workersAbout)
	tf := addTargetFlags(c, fs, wholeDB)
	nsFlag := fs.String("ns", "", "namespace PROJECT/SCOPE (default: every namespace with queues)")
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	t, p, nss, err := presenceTarget(ctx, tf, *nsFlag, false)
	if err != nil {
		return err
	}
	defer t.Close()
	now := t.api.Clock().Now()
	out := []workerJSON{}
	for _, ns := range nss {
		ws, err := p.Workers(ctx, ns)
		if err != nil {
			if errors.Is(err, engine.ErrPermission) && *nsFlag == "" {
				continue
			}
			return err
		}
		for _, w := range ws {
			j := workerJSON{Namespace: nsOf(ns), ID: w.ID, Host: w.Host, PID: w.PID, Version: w.Version, Started: timePtr(w.Started),
				Queues: []workerQueueJSON{}, Running: []runningJSON{}, Draining: w.Draining, Heartbeat: w.Heartbeat.UTC(), Expires: w.Expires.UTC()}
			for _, q := range w.Queues {
				j.Queues = append(j.Queues, workerQueueJSON{q.Queue, q.Concurrency})
			}
			for _, r := range w.Running {
				j.Running = append(j.Running, runningJSON{Queue: r.Queue, ID: r.ID, Kind: r.Kind, Attempt: r.Attempt,
					Started: r.Started.UTC(), For: max(0, now.Sub(r.Started)).Round(time.Second).String()})
			}
			out = append(out, j)
		}
	}
	if *tf.json {
		return writeJSON(c.stdout, map[string]any{"workers": out})
	}
	if len(out) == 0 {
		fmt.Fprintln(c.stdout, "no worker process is connected")
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tHOST\tPID\tVERSION\tQUEUES\tBUSY\tHEARTBEAT\tSTATE\tID")
	for _, w := range out {
		var qs []string
		slots := 0
		for _, q := range w.Queues {
			qs = append(qs, fmt.Sprintf("%s×%d", q.Queue, q.Concurrency))
			slots += q.Concurrency
		}
		state := "running"
		if w.Draining {
			state = "draining"
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%d\t%s\t%s\t%d/%d\t%s ago\t%s\t%s\n", w.Namespace.Project, w.Namespace.Scope, w.Host, w.PID,
			w.Version, strings.Join(qs, ","), len(w.Running), slots, max(0, now.Sub(w.Heartbeat)).Round(time.Second), state, w.ID)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range out {
		for _, r := range w.Running {
			fmt.Fprintf(c.stdout, "  %s: task %d %s on %s, attempt %d, running for %s\n", w.ID, r.ID, r.Kind, r.Queue, r.Attempt, r.For)
		}
	}
	return nil
}

const schedulesAbout = `
Lists the periodic schedules the worker runtime registered: spec, next and
last run, the last outcome, and whether each is paused. -pause, -resume and
-run act on the schedule named (with -queue and -ns when the name alone is
ambiguous): a paused schedule skips its ticks until resumed; -run asks its
runtime to enqueue its task once, at the runtime's next report (a few
seconds), paused or not.

  docket schedules -server http://127.0.0.1:7070
  docket schedules -server http://127.0.0.1:7070 -pause nightly-report
  docket schedules -server http://127.0.0.1:7070 -run nightly-report -queue reports`

func runSchedules(ctx context.Context, c cli, args []string) error {
	fs := newFlagsFor(c, "schedules", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-pause NAME | -resume NAME | -run NAME] [-json]", schedulesAbout)
	tf := addTargetFlags(c, fs, wholeDB)
	nsFlag := fs.String("ns", "", "namespace PROJECT/SCOPE (default: every namespace with queues)")
	queue := fs.String("queue", "", "the schedule's queue, when its name is not enough")
	pause := fs.String("pause", "", "pause the schedule NAME")
	resume := fs.String("resume", "", "resume the schedule NAME")
	runNow := fs.String("run", "", "run the schedule NAME now")
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	op, name := "", ""
	for _, f := range []struct{ op, v string }{{"pause", *pause}, {"resume", *resume}, {"run", *runNow}} {
		if f.v == "" {
			continue
		}
		if op != "" {
			return usageError{"schedules: -pause, -resume and -run exclude each other"}
		}
		op, name = f.op, f.v
	}
	t, p, nss, err := presenceTarget(ctx, tf, *nsFlag, op != "")
	if err != nil {
		return err
	}
	defer t.Close()
	var all []scheduleJSON
	for _, ns := range nss {
		ss, err := p.Schedules(ctx, ns)
		if err != nil {
			if errors.Is(err, engine.ErrPermission) && *nsFlag == "" {
				continue
			}
			return err
		}
		for _, s := range ss {
			if *queue != "" && s.Queue != *queue {
				continue
			}
			all = append(all, scheduleJSON{Namespace: nsOf(ns), Queue: s.Queue, Name: s.Name, Spec: s.Spec, Kind: s.Kind, Worker: s.Worker,
				Next: timePtr(s.Next), Last: timePtr(s.Last), LastTask: s.LastTask, Outcome: s.Outcome, Paused: s.Paused, RunRequested: s.RunRequested})
		}
	}
	if op != "" {
		var match []scheduleJSON
		for _, s := range all {
			if s.Name == name {
				match = append(match, s)
			}
		}
		switch {
		case len(match) == 0:
			return fmt.Errorf("%w: no periodic schedule named %q is registered%s", engine.ErrNotFound, name, where(*nsFlag, *queue))
		case len(match) > 1:
			var at []string
			for _, s := range match {
				at = append(at, s.Namespace.Project+"/"+s.Namespace.Scope+" "+s.Queue)
			}
			return usageError{fmt.Sprintf("schedules: %q names schedules on %s: say which with -ns and -queue", name, strings.Join(at, ", "))}
		}
		s := match[0]
		ns := engine.NS(s.Namespace.Project, s.Namespace.Scope)
		switch op {
		case "pause":
			err, s.Paused = p.PauseSchedule(ctx, ns, s.Queue, s.Name), true
		case "resume":
			err, s.Paused = p.ResumeSchedule(ctx, ns, s.Queue, s.Name), false
		case "run":
			err, s.RunRequested = p.RunSchedule(ctx, ns, s.Queue, s.Name), true
		}
		if err != nil {
			return err
		}
		if *tf.json {
			return writeJSON(c.stdout, s)
		}
		verb := map[string]string{"pause": "paused", "resume": "resumed", "run": "asked to run now (its runtime enqueues it at its next report)"}[op]
		fmt.Fprintf(c.stdout, "schedule %s on %s/%s %s %s\n", s.Name, s.Namespace.Project, s.Namespace.Scope, s.Queue, verb)
		return nil
	}
	if *tf.json {
		if all == nil {
			all = []scheduleJSON{}
		}
		return writeJSON(c.stdout, map[string]any{"schedules": all})
	}
	if len(all) == 0 {
		fmt.Fprintln(c.stdout, "no periodic schedule is registered")
		return nil
	}
	now := t.api.Clock().Now()
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tQUEUE\tNAME\tSPEC\tNEXT\tLAST\tOUTCOME\tSTATE")
	for _, s := range all {
		state := "active"
		if s.Paused {
			state = "paused"
		}
		if s.RunRequested {
			state += ", run requested"
		}
		next := "-"
		if s.Next != nil && !s.Paused {
			next = "in " + max(0, s.Next.Sub(now)).Round(time.Second).String()
		}
		last := "-"
		if s.Last != nil {
			last = max(0, now.Sub(*s.Last)).Round(time.Second).String() + " ago"
			if s.LastTask != 0 {
				last += fmt.Sprintf(" (task %d)", s.LastTask)
			}
		}
		outcome := s.Outcome
		if outcome == "" {
			outcome = "-"
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Namespace.Project, s.Namespace.Scope, s.Queue, s.Name, s.Spec,
			next, last, outcome, state)
	}
	return tw.Flush()
}

func where(ns, queue string) string {
	var parts []string
	if ns != "" {
		parts = append(parts, "in "+ns)
	}
	if queue != "" {
		parts = append(parts, "on queue "+queue)
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}
