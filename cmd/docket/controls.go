package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docketdb/docket/engine"
)

// The queue controls: pause, resume and limits.

type limitsJSON struct {
	MaxInFlight          int    `json:"max_in_flight"`
	Rate                 int    `json:"rate"`
	Per                  string `json:"per,omitempty"`
	Burst                int    `json:"burst"`
	PartitionMaxInFlight int    `json:"partition_max_in_flight,omitempty"`
	PartitionRate        int    `json:"partition_rate,omitempty"`
	PartitionPer         string `json:"partition_per,omitempty"`
	PartitionBurst       int    `json:"partition_burst,omitempty"`
}

func limitsOf(l engine.Limits) *limitsJSON {
	if l == (engine.Limits{}) {
		return nil
	}
	out := &limitsJSON{MaxInFlight: l.MaxInFlight, Rate: l.Rate, Burst: l.Burst, PartitionMaxInFlight: l.PartitionMaxInFlight}
	if l.Per != 0 {
		out.Per = l.Per.String()
	}
	if l.PartitionRate != 0 {
		out.PartitionRate, out.PartitionPer, out.PartitionBurst = l.PartitionRate, l.PartitionPer.String(), l.PartitionBurst
	}
	return out
}

type settingsJSON struct {
	Namespace nsJSON      `json:"namespace"`
	Queue     string      `json:"queue"`
	Paused    bool        `json:"paused"`
	Limits    *limitsJSON `json:"limits,omitempty"`
}

// printSettings prints the settings of the target's queue.
func printSettings(c cli, t *target, asJSON bool, s engine.QueueSettings) error {
	if asJSON {
		return writeJSON(c.stdout, settingsJSON{Namespace: nsOf(t.ns), Queue: t.queue, Paused: s.Paused, Limits: limitsOf(s.Limits)})
	}
	state := "running"
	if s.Paused {
		state = "paused"
	}
	limits := s.Limits.String()
	if limits == "" {
		limits = "no limits"
	}
	fmt.Fprintf(c.stdout, "queue %s %s: %s, %s\n", t.ns, t.queue, state, limits)
	return nil
}

const pauseAbout = `
Pauses a queue: its tasks are claimed by nobody (workers wait) until
'docket resume'. Enqueues and every other call go on. The pause is kept in
the data directory, also while the queue holds no task.`

const resumeAbout = `
Resumes a paused queue: waiting workers claim its tasks at once.`

func runPause(ctx context.Context, c cli, args []string) error { return setPaused(ctx, c, args, true) }

func runResume(ctx context.Context, c cli, args []string) error {
	return setPaused(ctx, c, args, false)
}

func setPaused(ctx context.Context, c cli, args []string, paused bool) error {
	name, about := "resume", resumeAbout
	if paused {
		name, about = "pause", pauseAbout
	}
	tf := addTargetFlags(c, newFlagsFor(c, name, "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-json]", about), oneQueue)
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	t, err := tf.open(ctx, true)
	if err != nil {
		return err
	}
	defer t.Close()
	q := t.Queue()
	if paused {
		err = q.Pause(ctx)
	} else {
		err = q.Resume(ctx)
	}
	if err != nil {
		return err
	}
	s, err := q.Settings(ctx)
	if err != nil {
		return err
	}
	return printSettings(c, t, *tf.json, s)
}

const limitsAbout = `
Shows a queue's pause state and limits, or changes its limits: the flags
given replace those limits, the others stay as they are; -clear removes
every limit. The limits hold across every worker of every process:

  -max-in-flight N        at most N of the queue's tasks in flight at once
  -rate N -per D          at most N tasks claimed per D on average
  -burst N                ... and at most N at once after a quiet spell (default: the rate)
  -partition-max-in-flight N
                          at most N tasks of each partition in flight at once
                          (see enqueue -partition; tasks without one are a partition)
  -partition-rate N -partition-per D [-partition-burst N]
                          at most N tasks of each partition claimed per D on average,
                          and at most -partition-burst at once (default: the rate)

  docket limits -server http://127.0.0.1:7070 -ns acme/prod -queue emails -max-in-flight 10 -rate 100 -per 1m
  docket limits -dir data -queue reports -partition-max-in-flight 2
  docket limits -dir data -queue reports -partition-rate 10 -partition-per 1m -partition-burst 20
  docket limits -dir data -queue emails -clear`

func runLimits(ctx context.Context, c cli, args []string) error {
	fs := newFlagsFor(c, "limits", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-max-in-flight N] [-rate N -per D [-burst N]] [-partition-max-in-flight N] [-partition-rate N -partition-per D [-partition-burst N]] [-clear] [-json]", limitsAbout)
	tf := addTargetFlags(c, fs, oneQueue)
	maxInFlight := fs.Int("max-in-flight", 0, "at most this many of the queue's tasks in flight at once (0: no bound)")
	rate := fs.Int("rate", 0, "at most this many tasks claimed per -per (0: no rate limit)")
	per := fs.Duration("per", 0, "the rate's interval, 1µs to 168h")
	burst := fs.Int("burst", 0, "tasks that may be claimed at once after a quiet spell (0: the rate)")
	partMax := fs.Int("partition-max-in-flight", 0, "at most this many tasks of each partition of the queue in flight at once (0: no bound)")
	partRate := fs.Int("partition-rate", 0, "at most this many tasks of each partition claimed per -partition-per (0: no partition rate limit)")
	partPer := fs.Duration("partition-per", 0, "the partition rate's interval, 1µs to 168h")
	partBurst := fs.Int("partition-burst", 0, "tasks of a partition that may be claimed at once after a quiet spell (0: the partition rate)")
	clearAll := fs.Bool("clear", false, "remove every limit")
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	changing := set["max-in-flight"] || set["rate"] || set["per"] || set["burst"] || set["partition-max-in-flight"] ||
		set["partition-rate"] || set["partition-per"] || set["partition-burst"]
	if *clearAll && changing {
		return usageError{"limits: -clear and the limit flags exclude each other"}
	}
	t, err := tf.open(ctx, changing || *clearAll)
	if err != nil {
		return err
	}
	defer t.Close()
	if !changing && !*clearAll {
		if err := t.mustExist(ctx); err != nil {
			return err
		}
	}
	q := t.Queue()
	s, err := q.Settings(ctx)
	if err != nil {
		return err
	}
	if changing || *clearAll {
		l := s.Limits
		if *clearAll {
			l = engine.Limits{}
		}
		if set["max-in-flight"] {
			l.MaxInFlight = *maxInFlight
		}
		if set["partition-max-in-flight"] {
			l.PartitionMaxInFlight = *partMax
		}
		if set["rate"] {
			l.Rate = *rate
			if *rate == 0 {
				l.Per, l.Burst = 0, 0 // -rate 0 removes the rate limit
			}
		}
		if set["per"] {
			l.Per = *per
		}
		if set["burst"] || set["rate"] && l.Burst == s.Limits.Rate {
			l.Burst = *burst // a burst that was the old rate's default follows the new rate
		}
		if set["partition-rate"] {
			l.PartitionRate = *partRate
			if *partRate == 0 {
				l.PartitionPer, l.PartitionBurst = 0, 0
			}
		}
		if set["partition-per"] {
			l.PartitionPer = *partPer
		}
		if set["partition-burst"] || set["partition-rate"] && l.PartitionBurst == s.Limits.PartitionRate {
			l.PartitionBurst = *partBurst
		}
		if err := q.SetLimits(ctx, l); err != nil {
			return err
		}
		if s, err = q.Settings(ctx); err != nil {
			return err
		}
	}
	return printSettings(c, t, *tf.json, s)
}

// uniqueFlags are enqueue's flags for a task unique by content.
type uniqueFlags struct {
	window *time.Duration
	states *string
}

func addUniqueFlags(fs *flag.FlagSet) uniqueFlags {
	return uniqueFlags{
		window: fs.Duration("unique", 0, "make the task unique by content for this long: a task of the same kind and payload (canonical JSON) enqueued meanwhile, while this one waits, runs or completed, is this one"),
		states: fs.String("unique-states", "", "with -unique, the states in which this task blocks a duplicate: ready,scheduled,in-flight (always, as is waiting for -after tasks) plus dead and/or completed (default: completed)"),
	}
}

func (u uniqueFlags) apply(t *engine.Task) error {
	if *u.window == 0 {
		if *u.states != "" {
			return usageError{"enqueue: -unique-states is for -unique"}
		}
		return nil
	}
	t.Unique = &engine.Unique{Window: *u.window}
	if *u.states != "" {
		for _, s := range strings.Split(*u.states, ",") {
			st, err := parseState(strings.TrimSpace(s))
			if err != nil {
				return usageError{"enqueue: -unique-states: " + err.Error()}
			}
			t.Unique.States = append(t.Unique.States, st)
		}
	}
	return nil
}

const partitionsAbout = `
Lists the partitions of a queue that hold a task (see enqueue -partition),
in key order, with their tasks by state; "" is the partition of the tasks
that name none. Claims take turns between the partitions with ready tasks.

  docket partitions -dir data -queue reports
  docket partitions -server http://127.0.0.1:7070 -queue reports -limit 100 -json`

type partitionJSON struct {
	Key    string     `json:"key"`
	Counts countsJSON `json:"counts"`
}

type partitionsJSON struct {
	Partitions []partitionJSON `json:"partitions"`
	Next       string          `json:"next,omitempty"`
}

func runPartitions(ctx context.Context, c cli, args []string) error {
	tf := addTargetFlags(c, newFlagsFor(c, "partitions", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-cursor C] [-limit N] [-json]", partitionsAbout), oneQueue)
	cursor := tf.fs.String("cursor", "", "continue after a previous page")
	limit := tf.fs.Int("limit", 100, "partitions per page")
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	t, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.mustExist(ctx); err != nil {
		return err
	}
	page, err := t.Queue().Partitions(ctx, engine.PartitionListOptions{Limit: *limit, Cursor: *cursor})
	if err != nil {
		return err
	}
	if *tf.json {
		out := partitionsJSON{Partitions: []partitionJSON{}, Next: page.Next}
		for _, p := range page.Partitions {
			out.Partitions = append(out.Partitions, partitionJSON{p.Key, countsOf(p.Counts)})
		}
		return writeJSON(c.stdout, out)
	}
	if len(page.Partitions) == 0 {
		fmt.Fprintf(c.stdout, "queue %s %s has no partitioned tasks\n", t.ns, t.queue)
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "partition\tready\tscheduled\tin-flight\tdead\tcompleted\twaiting")
	for _, p := range page.Partitions {
		n := p.Counts
		fmt.Fprintf(tw, "%q\t%d\t%d\t%d\t%d\t%d\t%d\n", p.Key, n.Ready, n.Scheduled, n.InFlight, n.Dead, n.Completed, n.Waiting)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(c.stdout, "more: -cursor %q\n", page.Next)
	}
	return nil
}
