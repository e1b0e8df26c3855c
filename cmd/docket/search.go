package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/docketdb/docket/engine"
)

// filterFlags are the flags of a search filter (engine.Filter), shared by
// search and bulk.
type filterFlags struct {
	states, retrying, kind, errText, part, header, older, newer *string
	min, max                                                    *uint64
}

func addFilterFlags(fs *flag.FlagSet) *filterFlags {
	return &filterFlags{
		states:   fs.String("state", "", "states, comma separated (ready, scheduled, in-flight, dead, completed, waiting); default every state"),
		retrying: fs.String("retrying", "", "only: only retries in backoff; not: every task but those"),
		kind:     fs.String("kind", "", "only tasks of this kind"),
		errText:  fs.String("error", "", "only tasks whose last error contains this text (ignoring case)"),
		part:     fs.String("partition", "", "only tasks of this partition"),
		header:   fs.String("header", "", "only tasks with this header: KEY or KEY=VALUE"),
		older:    fs.String("older", "", "only tasks enqueued at least this long ago (a duration: 90s, 15m, 2h)"),
		newer:    fs.String("newer", "", "only tasks enqueued at most this long ago"),
		min:      fs.Uint64("min", 0, "only ids from this one on"),
		max:      fs.Uint64("max", 0, "only ids up to this one"),
	}
}

// filter is the engine's filter the flags say, with ages counted from now.
func (ff *filterFlags) filter(now time.Time) (engine.Filter, error) {
	f := engine.Filter{Kind: *ff.kind, Error: *ff.errText, Partition: *ff.part, MinID: *ff.min, MaxID: *ff.max}
	if *ff.states != "" {
		for _, s := range strings.Split(*ff.states, ",") {
			st, err := parseState(strings.TrimSpace(s))
			if err != nil {
				return f, usageError{err.Error()}
			}
			f.States = append(f.States, st)
		}
	}
	switch *ff.retrying {
	case "":
	case "only":
		f.Retrying = engine.OnlyRetrying
	case "not":
		f.Retrying = engine.NotRetrying
	default:
		return f, usageError{fmt.Sprintf("-retrying %q is not only or not", *ff.retrying)}
	}
	if *ff.header != "" {
		f.HeaderKey, f.HeaderValue, _ = strings.Cut(*ff.header, "=")
		if f.HeaderKey == "" {
			return f, usageError{fmt.Sprintf("-header %q names no key (KEY or KEY=VALUE)", *ff.header)}
		}
	}
	for _, a := range []struct {
		name, text string
		to         *time.Time
	}{{"older", *ff.older, &f.EnqueuedBefore}, {"newer", *ff.newer, &f.EnqueuedSince}} {
		if a.text == "" {
			continue
		}
		d, err := time.ParseDuration(a.text)
		if err != nil || d < 0 {
			return f, usageError{fmt.Sprintf("-%s %q is not a duration such as 90s, 15m or 2h", a.name, a.text)}
		}
		*a.to = now.Add(-d)
	}
	if err := f.Validate(); err != nil {
		return f, usageError{message(err)}
	}
	return f, nil
}

const searchAbout = `
Searches a whole queue on the engine (or the server): the tasks that every
filter flag given selects, oldest first (-newest: newest first), a page at
a time; -count also counts every match.`

type searchJSON struct {
	Tasks []taskJSON `json:"tasks"`
	Next  string     `json:"next,omitempty"`
	Count *int       `json:"count,omitempty"`
	MaxID uint64     `json:"max_id,omitempty"`
}

func runSearch(ctx context.Context, c cli, args []string) error {
	tf := addTargetFlags(c, newFlagsFor(c, "search", commandArgs("search"), searchAbout), oneQueue)
	ff := addFilterFlags(tf.fs)
	newest := tf.fs.Bool("newest", false, "newest first")
	count := tf.fs.Bool("count", false, "count every match too")
	limit := tf.fs.Int("limit", 20, "tasks per page")
	cursor := tf.fs.String("cursor", "", "continue after a previous page")
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
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	p, err := t.Queue().Search(ctx, engine.SearchOptions{Filter: f, Newest: *newest, Limit: *limit, Cursor: *cursor, Count: *count})
	if err != nil {
		return err
	}
	if *tf.json {
		out := searchJSON{Tasks: []taskJSON{}, Next: p.Next}
		for _, ti := range p.Tasks {
			out.Tasks = append(out.Tasks, taskOf(ti))
		}
		if *count {
			out.Count, out.MaxID = &p.Count, p.MaxID
		}
		return writeJSON(c.stdout, out)
	}
	printTasks(c.stdout, p.Tasks)
	if p.Next != "" {
		fmt.Fprintf(c.stdout, "more: -cursor %s\n", shellQuote(p.Next))
	}
	if *count {
		fmt.Fprintf(c.stdout, "%d %s match\n", p.Count, plural(p.Count, "task", "tasks"))
	}
	return nil
}

const bulkAbout = `
Retries, cancels, runs now or deletes every task of a queue that the filter
flags select, over the whole queue, in commits of a bounded size:

  retry    dead tasks are redriven; scheduled ones are due now
  cancel   tasks in every state but completed are deleted (a worker
           holding one loses its lease)
  run-now  scheduled tasks are due now
  delete   dead and completed tasks are deleted

Without -yes it only counts the tasks it would act on, and prints the -max
that bounds the action to them. With -yes it acts, and says how many tasks
it acted on and which it left, and why. Running it again finishes what an
interrupted run left.`

type bulkJSON struct {
	Action  string         `json:"action"`
	Matches *int           `json:"matches,omitempty"`
	MaxID   uint64         `json:"max_id,omitempty"`
	Done    *int           `json:"done,omitempty"`
	Skipped []bulkSkipJSON `json:"skipped,omitempty"`
}

type bulkSkipJSON struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

func runBulk(ctx context.Context, c cli, args []string) error {
	tf := addTargetFlags(c, newFlagsFor(c, "bulk", commandArgs("bulk"), bulkAbout), oneQueue)
	ff := addFilterFlags(tf.fs)
	action := tf.fs.String("action", "", "retry, cancel, run-now or delete (required)")
	yes := tf.fs.Bool("yes", false, "act; without it, only count")
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	if *action == "" {
		return usageError{"bulk: -action retry, cancel, run-now or delete is required"}
	}
	a, err := engine.ParseBulkAction(*action)
	if err != nil {
		return usageError{message(err)}
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	t, err := tf.open(ctx, *yes)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.mustExist(ctx); err != nil {
		return err
	}
	q := t.Queue()
	out := bulkJSON{Action: a.String()}
	if !*yes {
		p, err := q.Search(ctx, engine.SearchOptions{Filter: f, Limit: 1, Count: true})
		if err != nil {
			return err
		}
		if *tf.json {
			out.Matches, out.MaxID = &p.Count, p.MaxID
			return writeJSON(c.stdout, out)
		}
		fmt.Fprintf(c.stdout, "%d %s match", p.Count, plural(p.Count, "task", "tasks"))
		if p.Count > 0 {
			fmt.Fprintf(c.stdout, " (ids up to %d); add -yes -max %d to %s them", p.MaxID, p.MaxID, a)
		}
		fmt.Fprintln(c.stdout)
		return nil
	}
	r, err := q.Bulk(ctx, f, a)
	if err != nil {
		if r.Done > 0 {
			fmt.Fprintf(c.stderr, "docket: acted on %d tasks before the error; run it again to finish\n", r.Done)
		}
		return err
	}
	if *tf.json {
		out.Done = &r.Done
		for _, s := range r.Skipped {
			out.Skipped = append(out.Skipped, bulkSkipJSON{s.Reason, s.Count})
		}
		return writeJSON(c.stdout, out)
	}
	fmt.Fprintf(c.stdout, "%s: %d %s\n", a, r.Done, plural(r.Done, "task", "tasks"))
	for _, s := range r.Skipped {
		fmt.Fprintf(c.stdout, "skipped %d: %s\n", s.Count, s.Reason)
	}
	return nil
}
