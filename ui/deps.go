package ui

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/docketdb/docket/engine"
)

// depView is what the task page shows of a task's dependencies: the tasks
// it still waits for, what it does if one of them fails, and the waiting
// tasks that wait for it. Long lists show their first ids only.
type depView struct {
	WaitsFor       []uint64
	WaitsForMore   int // ids of WaitingOn not shown
	Policy         string
	Dependents     []uint64
	DependentsMore int    // ids of Dependents not shown
	DependentsNote string // "at least" when the engine capped the list
}

// depShown bounds the ids a list of dependencies links to.
const depShown = 200

func depViewOf(t engine.TaskInfo) depView {
	var v depView
	v.WaitsFor, v.WaitsForMore = head(t.WaitingOn)
	v.Dependents, v.DependentsMore = head(t.Dependents)
	if len(t.Dependents) >= engine.MaxBatch {
		v.DependentsNote = "at least"
	}
	if t.State == engine.Waiting || t.OnParentFailure != engine.CancelOnFailure {
		v.Policy = map[engine.DependencyPolicy]string{
			engine.CancelOnFailure: "cancel this task (and what waits for it)",
			engine.WaitOnFailure:   "keep waiting for a redrive",
			engine.RunOnFailure:    "run anyway",
		}[t.OnParentFailure]
	}
	return v
}

func head(ids []uint64) ([]uint64, int) {
	if len(ids) > depShown {
		return ids[:depShown], len(ids) - depShown
	}
	return ids, 0
}

// depLookups bounds the tasks one dependency view looks up for their
// states; the rest are listed as links.
const depLookups = 24

// finder looks tasks of a namespace up by id, trying the queue the page is
// about first and then the namespace's other queues (dependencies may sit
// on any of them). Every lookup is counted against a budget.
type finder struct {
	rq     *request
	ref    queueRef
	queues []string // the namespace's other queues, listed once
	listed bool
	budget int
}

// find returns the task id, ok false when it is gone (completed and not
// retained, or cancelled) or the budget is spent.
func (f *finder) find(id uint64) (engine.TaskInfo, bool, error) {
	if f.budget <= 0 {
		return engine.TaskInfo{}, false, nil
	}
	f.budget--
	t, err := f.rq.api.Queue(f.ref.NS, f.ref.Name).Get(f.rq.ctx(), id)
	if err == nil {
		return t, true, nil
	}
	if !errors.Is(err, engine.ErrNotFound) {
		return t, false, err
	}
	if !f.listed {
		f.listed = true
		qs, err := f.rq.api.Queues(f.rq.ctx())
		if err != nil {
			return t, false, err
		}
		for _, q := range qs {
			if q.Namespace == f.ref.NS && q.Name != f.ref.Name {
				f.queues = append(f.queues, q.Name)
			}
		}
	}
	for _, name := range f.queues {
		t, err := f.rq.api.Queue(f.ref.NS, name).Get(f.rq.ctx(), id)
		if err == nil {
			return t, true, nil
		}
		if !errors.Is(err, engine.ErrNotFound) {
			return t, false, err
		}
	}
	return engine.TaskInfo{}, false, nil
}

// depNode is one task of a dependency tree.
type depNode struct {
	ID    uint64
	Known bool // looked up: State, Kind and Queue are set
	Gone  bool // looked up and not found: completed (not retained) or cancelled
	State engine.State
	Kind  string
	Queue string
	// Below are the node's own parents (for an ancestor) or dependents
	// (for a dependent), one level further; More counts those not shown.
	Below []depNode
	More  int
}

// depTree is the task page's dependency tree: what the task waits for,
// each with what it waits for in turn, and what waits for the task, each
// with what waits for it in turn.
type depTree struct {
	Parents, Dependents         []depNode
	MoreParents, MoreDependents int
	Any                         bool
}

// depTreeOf looks up the task's parents and dependents, two levels each
// way, at most depLookups lookups in all.
func (rq *request) depTreeOf(ref queueRef, t engine.TaskInfo) (depTree, error) {
	f := &finder{rq: rq, ref: ref, budget: depLookups}
	var level func(ids []uint64, up bool, depth, each int) ([]depNode, int, error)
	level = func(ids []uint64, up bool, depth, each int) ([]depNode, int, error) {
		var out []depNode
		for i, id := range ids {
			if i == each {
				return out, len(ids) - each, nil
			}
			n := depNode{ID: id}
			info, ok, err := f.find(id)
			switch {
			case err != nil:
				return nil, 0, err
			case ok:
				n.Known, n.State, n.Kind, n.Queue = true, info.State, info.Kind, info.Queue
				if depth > 0 {
					next := info.Dependents
					if up {
						next = info.WaitingOn
					}
					if n.Below, n.More, err = level(next, up, depth-1, 4); err != nil {
						return nil, 0, err
					}
				}
			case f.budget > 0:
				n.Gone = true
			}
			out = append(out, n)
		}
		return out, 0, nil
	}
	var tr depTree
	var err error
	if tr.Parents, tr.MoreParents, err = level(t.WaitingOn, true, 1, 8); err != nil {
		return tr, err
	}
	if tr.Dependents, tr.MoreDependents, err = level(t.Dependents, false, 1, 8); err != nil {
		return tr, err
	}
	tr.Any = len(tr.Parents)+len(tr.Dependents) > 0
	return tr, nil
}

// waitingFor returns the waiting tasks of q that wait for task on (found
// on any queue of the namespace), matching f, at most limit: one lookup
// of on, and one of each of its dependents until limit are found. The
// engine lists at most MaxBatch dependents of a task.
func (rq *request) waitingFor(q engine.Queue, ref queueRef, on uint64, f filter, limit int) ([]engine.TaskInfo, string, error) {
	fd := &finder{rq: rq, ref: ref, budget: 1}
	parent, ok, err := fd.find(on)
	if err != nil {
		return nil, "", err
	}
	if !ok {
		return nil, fmt.Sprintf("no task %d in %s: none waits for it", on, ref.NS), nil
	}
	var out []engine.TaskInfo
	looked := 0
	for _, id := range parent.Dependents {
		if len(out) == limit {
			break
		}
		looked++
		t, err := q.Get(rq.ctx(), id)
		if errors.Is(err, engine.ErrNotFound) {
			continue // a dependent on another queue
		}
		if err != nil {
			return nil, "", err
		}
		if f.match(t) {
			out = append(out, t)
		}
	}
	note := fmt.Sprintf("task %d is %s; %s of the namespace wait for it", on, parent.State,
		group(strconv.Itoa(len(parent.Dependents))))
	if len(parent.Dependents) >= engine.MaxBatch {
		note = fmt.Sprintf("task %d is %s; at least %s of the namespace wait for it, the first %s looked at", on, parent.State,
			group(strconv.Itoa(len(parent.Dependents))), group(strconv.Itoa(looked)))
	}
	return out, note, nil
}

// depList is one level of a dependency tree, as its template takes it.
type depList struct {
	Prefix string
	Ref    queueRef
	Nodes  []depNode
	More   int
	Rel    string
}
