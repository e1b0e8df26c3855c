package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/docketdb/docket/internal/taskaction"
)

// byHand are the task actions of engine.Queue (taskaction) that a
// hand-written command takes, with that command: the others each get a
// command of their own (taskActionCommands).
var byHand = map[string]string{
	"Cancel":  "cancel",
	"Redrive": "dead -redrive",
	"RunNow":  "run-now",
}

// taskActionCommands returns a command for each task action of
// engine.Queue without a hand-written one: named after the method in kebab
// case, with the target flags, a flag per field of its options and the
// task ids as arguments.
func taskActionCommands(actions []*taskaction.Action) []command {
	var cmds []command
	for _, a := range actions {
		if _, ok := byHand[a.Method]; ok {
			continue
		}
		line := "[-dir DIR | -server URL] [-ns P/S] [-queue Q]"
		var flags []string
		for i := range a.Fields {
			f := &a.Fields[i]
			if p := f.Placeholder(); p != "" {
				line += fmt.Sprintf(" [-%s %s]", fieldFlag(f), p)
			} else {
				line += fmt.Sprintf(" [-%s]", fieldFlag(f))
			}
			flags = append(flags, "-"+fieldFlag(f))
		}
		summary := fmt.Sprintf("%s tasks by id (Queue.%s)", strings.ToLower(a.Title()), a.Method)
		if len(flags) > 0 {
			summary = fmt.Sprintf("%s tasks by id, setting %s (Queue.%s)", strings.ToLower(a.Title()), andOrList(flags), a.Method)
		}
		cmds = append(cmds, command{a.Name, line + " ID...", summary, runTaskAction(a)})
	}
	return cmds
}

// targetFlagNames are the flags of addTargetFlags (oneQueue) and -h: a
// field of the same name is set by -set-NAME (fieldFlag).
var targetFlagNames = map[string]bool{"dir": true, "server": true, "token": true, "json": true, "ns": true, "queue": true, "h": true, "help": true}

// fieldFlag is the flag of a field of a task action's options.
func fieldFlag(f *taskaction.Field) string {
	if targetFlagNames[f.Flag] {
		return "set-" + f.Flag
	}
	return f.Flag
}

// andOrList joins names as "a", "a and/or b", "a, b and/or c".
func andOrList(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and/or " + names[len(names)-1]
}

// fieldUsage is the -h line of a field's flag; the backquoted word names
// its value.
func fieldUsage(a *taskaction.Action, f *taskaction.Field) string {
	field := a.Opts + "." + f.Name
	switch f.Kind {
	case taskaction.Time:
		return field + ": an RFC 3339 `TIME` (2006-01-02T15:04:05Z), or how long from now by the DB's clock (10m, +2h, 0 for now)"
	case taskaction.Duration:
		return field + ": a `DUR`ation (10s, 5m, 2h)"
	case taskaction.Int:
		return field + ": a whole number `N`"
	case taskaction.OptInt:
		return field + ": a whole number `N` (unset keeps it)"
	case taskaction.String:
		return field + ": `TEXT`"
	}
	return field + ": true when given"
}

// runTaskAction returns the command of the task action a: it reads the
// flags before opening anything (a mistake is a usage error and changes
// nothing), then runs the action on each task, the times from now counted
// from the DB's clock.
func runTaskAction(a *taskaction.Action) func(ctx context.Context, c cli, args []string) error {
	return func(ctx context.Context, c cli, args []string) error {
		tf := addTargetFlags(c, newFlagsFor(c, a.Name, commandArgs(a.Name), wrapText(a.Doc, 76)), oneQueue)
		given := map[string]string{}
		for i := range a.Fields {
			f := &a.Fields[i]
			name := fieldFlag(f)
			set := func(s string) error { given[name] = s; return nil }
			if f.Kind == taskaction.Bool {
				tf.fs.BoolFunc(name, fieldUsage(a, f), set)
			} else {
				tf.fs.Func(name, fieldUsage(a, f), set)
			}
		}
		pos, err := tf.parse(args, 1, -1)
		if err != nil {
			return err
		}
		ids, err := parseIDs(pos)
		if err != nil {
			return err
		}
		in, err := a.Parse(func(f *taskaction.Field) (string, bool) { s, ok := given[fieldFlag(f)]; return s, ok })
		var bad *taskaction.Error
		if errors.As(err, &bad) {
			if bad.Field == nil {
				var flags []string
				for i := range a.Fields {
					flags = append(flags, "-"+fieldFlag(&a.Fields[i]))
				}
				return usageError{fmt.Sprintf("%s: %s: give %s", a.Name, bad.Why, taskaction.OrList(flags))}
			}
			return usageError{fmt.Sprintf("%s: -%s %q: %s", a.Name, fieldFlag(bad.Field), bad.Value, bad.Why)}
		} else if err != nil {
			return err
		}
		t, err := tf.open(ctx, true)
		if err != nil {
			return err
		}
		defer t.Close()
		if err := t.mustExist(ctx); err != nil {
			return err
		}
		q, now := t.Queue(), t.api.Clock().Now()
		return eachTask(c, *tf.json, ids, a.Past(), func(id uint64) error { return in.Call(ctx, q, id, now) })
	}
}

// wrapText breaks text into lines of at most width columns at its spaces
// (a word longer than width has a line of its own).
func wrapText(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(text) {
		switch {
		case n == 0:
		case n+1+len(w) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
