package ui

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/taskaction"
)

// taskForm is the form of a task action of engine.Queue without a
// hand-written op (taskaction): the task page offers it on a task in a
// state that is not final, and action takes it as any op, behind the CSRF
// token and the admin check.
type taskForm struct {
	Name   string // the op: the action's name ("reschedule")
	Title  string // "Reschedule"
	About  string // the first sentence of the method's documentation, if any
	Fields []formField
	a      *taskaction.Action
}

// formField is an input of a taskForm.
type formField struct {
	Name        string // the input's name
	Label       string
	Placeholder string
	Hint        string // what it takes, under the input
	Numeric     bool
	Check       bool // a checkbox (a bool field)
	f           *taskaction.Field
}

// taskForms are the forms of the task actions of engine.Queue that no op of
// ops takes by hand (redrive, cancel and run-now do), each also in ops.
var taskForms []*taskForm

// formNames are the names the task forms' hidden inputs take: a field of
// the same name is posted as set-NAME.
var formNames = map[string]bool{"csrf": true, "op": true, "p": true, "s": true, "q": true, "id": true, "confirm": true, "back": true}

func init() {
	for _, a := range taskaction.Actions() {
		if _, byHand := ops[a.Name]; byHand {
			continue
		}
		tf := newTaskForm(a)
		taskForms = append(taskForms, tf)
		ops[a.Name] = op{Name: a.Name, Verb: capitalise(a.Past()), What: fmt.Sprintf("%s these tasks (Queue.%s)", a.Name, a.Method), Task: tf}
	}
}

// newTaskForm returns the form of the task action a: an input per field of
// its options.
func newTaskForm(a *taskaction.Action) *taskForm {
	tf := &taskForm{Name: a.Name, Title: a.Title(), About: a.Summary(), a: a}
	for i := range a.Fields {
		f := &a.Fields[i]
		ff := formField{Name: f.Flag, Label: f.Label, f: f}
		if formNames[ff.Name] {
			ff.Name = "set-" + ff.Name
		}
		switch f.Kind {
		case taskaction.Time:
			ff.Placeholder, ff.Hint = "keep", "due in (0, 10m, 2h) or at a time (2006-01-02T15:04:05Z)"
		case taskaction.Duration:
			ff.Placeholder, ff.Hint = "0", "a duration (10s, 5m, 2h)"
		case taskaction.Int:
			ff.Placeholder, ff.Numeric = "0", true
		case taskaction.OptInt:
			ff.Placeholder, ff.Numeric = "keep", true
		case taskaction.Bool:
			ff.Check = true
		}
		tf.Fields = append(tf.Fields, ff)
	}
	return tf
}

// taskFormsFor returns the task forms a task in state st is offered: every
// one unless the task is dead or completed. The engine refuses an action in
// a state it does not take, and the report says so.
func taskFormsFor(st engine.State) []*taskForm {
	if st == engine.Dead || st == engine.Completed {
		return nil
	}
	return taskForms
}

// parse reads the form's fields; bad input names the field, in the form's
// words.
func (tf *taskForm) parse(v url.Values) (taskaction.Input, error) {
	in, err := tf.a.Parse(func(f *taskaction.Field) (string, bool) {
		for _, ff := range tf.Fields {
			if ff.f == f {
				return v.Get(ff.Name), v.Has(ff.Name)
			}
		}
		return "", false
	})
	var bad *taskaction.Error
	switch {
	case errors.As(err, &bad) && bad.Field == nil:
		labels := make([]string, len(tf.Fields))
		for i, ff := range tf.Fields {
			labels[i] = ff.Label
		}
		return in, badInput("%s: %s: give %s", tf.Title, bad.Why, taskaction.OrList(labels))
	case errors.As(err, &bad):
		return in, badInput("%s: %s %q: %s", tf.Title, bad.Field.Label, bad.Value, bad.Why)
	}
	return in, err
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
