package wire

import (
	"math"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// taskDeps copies a task's dependencies from pb into t; a policy outside
// the enum's range is ErrInvalid (the engine refuses unknown values within
// it).
func taskDeps(pb *v1.Task, t *engine.Task) error {
	t.DependsOn = pb.GetDependsOn()
	if sibs := pb.GetDependsOnSibling(); len(sibs) > 0 {
		t.DependsOnSibling = make([]int, len(sibs))
		for i, s := range sibs {
			t.DependsOnSibling[i] = int(s)
		}
	}
	p := pb.GetOnParentFailure()
	if p < 0 || p > math.MaxUint8 {
		return Invalid("dependency policy %d", p)
	}
	t.OnParentFailure = engine.DependencyPolicy(p)
	return nil
}

// pbTaskDeps copies t's dependencies into pb.
func pbTaskDeps(t engine.Task, pb *v1.Task) {
	pb.DependsOn = t.DependsOn
	if len(t.DependsOnSibling) > 0 {
		pb.DependsOnSibling = make([]int32, len(t.DependsOnSibling))
		for i, s := range t.DependsOnSibling {
			pb.DependsOnSibling[i] = clampInt32(s)
		}
	}
	pb.OnParentFailure = v1.DependencyPolicy(t.OnParentFailure)
}
