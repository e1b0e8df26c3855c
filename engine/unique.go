package engine

import (
	"github.com/docketdb/docket/dockettype"
)

// UniqueKey returns the idempotency key Unique derives from a task's kind
// and payload (see dockettype.UniqueKey).
func UniqueKey(kind string, payload []byte) (string, error) {
	return dockettype.UniqueKey(kind, payload)
}

// CanonicalJSON returns the canonical form of the JSON value b that
// unique-by-content keys are derived from (see dockettype.CanonicalJSON).
func CanonicalJSON(b []byte) ([]byte, error) { return dockettype.CanonicalJSON(b) }
