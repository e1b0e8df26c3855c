package engine

import (
	"time"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// checkUnique validates t's Unique and fills in the spec's derived key,
// states and window.
func checkUnique(t *Task, s *spec) error {
	u := t.Unique
	if t.IdempotencyKey != "" {
		return invalid("a task is unique by content or has an idempotency key, not both")
	}
	if err := checkDuration("unique window", u.Window, false); err != nil {
		return err
	}
	if u.Window < time.Microsecond {
		return invalid("unique window %v is under a microsecond", u.Window)
	}
	if len(u.States) > index.NumStates-1 {
		return invalid("%d unique states: there are %d", len(u.States), index.NumStates-1)
	}
	mask := uint8(validate.UniqueDefault)
	if len(u.States) > 0 {
		mask = 0
		for _, st := range u.States {
			if !index.TaskState(st).Valid() {
				return invalid("unique state %d", st)
			}
			if st != Waiting { // blocks anyway (see blocks)
				mask |= 1 << st
			}
		}
		if err := validate.UniqueStates(mask); err != nil {
			return err
		}
	}
	key, err := UniqueKey(t.Kind, t.Payload)
	if err != nil {
		return err
	}
	s.Idem, s.Uniq, s.Window = key, mask, u.Window.Microseconds()
	return nil
}

// UniqueKey returns the idempotency key Unique derives from a task's kind
// and payload (see dockettype.UniqueKey).
func UniqueKey(kind string, payload []byte) (string, error) {
	return dockettype.UniqueKey(kind, payload)
}

// CanonicalJSON returns the canonical form of the JSON value b that
// unique-by-content keys are derived from (see dockettype.CanonicalJSON).
func CanonicalJSON(b []byte) ([]byte, error) { return dockettype.CanonicalJSON(b) }
