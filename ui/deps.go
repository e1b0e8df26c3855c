package ui

import "github.com/docketdb/docket/engine"

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
