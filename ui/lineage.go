package ui

import "reflect"

// lineage is where a task came from and what it started: the task whose
// completion enqueued it as a follow-up, and the follow-ups its own
// completion enqueued.
type lineage struct {
	Parent    uint64
	FollowUps []uint64
}

// lineageOf reads the Parent and FollowUps fields of a task (an
// engine.TaskInfo) by name, so the dashboard builds and works against
// engines whose TaskInfo has them and those whose TaskInfo does not; for
// the latter it reports no lineage. Fields of another type are ignored.
func lineageOf(task any) lineage {
	var l lineage
	v := reflect.ValueOf(task)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return l
	}
	if f := v.FieldByName("Parent"); f.IsValid() && f.Kind() == reflect.Uint64 {
		l.Parent = f.Uint()
	}
	if f := v.FieldByName("FollowUps"); f.IsValid() && f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Uint64 {
		l.FollowUps = make([]uint64, f.Len())
		for i := range l.FollowUps {
			l.FollowUps[i] = f.Index(i).Uint()
		}
	}
	return l
}
