package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/docketdb/docket/engine"
)

func runReschedule(ctx context.Context, c cli, args []string) error {
	tf := newTargetFlags(c, "reschedule", oneQueue)
	at := tf.fs.String("at", "", "the new time the tasks become claimable (RFC 3339)")
	in := tf.fs.Duration("in", 0, "the new time the tasks become claimable, this long from now (instead of -at)")
	var prio *int
	tf.fs.Func("priority", "the tasks' new priority (higher is claimed first)", func(s string) error {
		p, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		prio = &p
		return nil
	})
	pos, err := tf.parse(args, 1, -1)
	if err != nil {
		return err
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	inSet := false
	tf.fs.Visit(func(f *flag.Flag) { inSet = inSet || f.Name == "in" })
	var r engine.Reschedule
	r.Priority = prio
	switch {
	case *at != "" && inSet:
		return usageError{"reschedule: -at and -in exclude each other"}
	case *at != "":
		if r.At, err = time.Parse(time.RFC3339Nano, *at); err != nil {
			return usageError{fmt.Sprintf("reschedule: -at %q: want a time like 2006-01-02T15:04:05Z", *at)}
		}
	case !inSet && prio == nil:
		return usageError{"reschedule: nothing to change: give -at, -in or -priority"}
	}
	t, err := tf.open(ctx, true)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.mustExist(ctx); err != nil {
		return err
	}
	if inSet {
		r.At = t.api.Clock().Now().Add(*in)
	}
	q := t.Queue()
	return eachTask(c, *tf.json, ids, "rescheduled", func(id uint64) error { return q.Reschedule(ctx, id, r) })
}
