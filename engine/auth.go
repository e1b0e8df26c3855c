package engine

import (
	"fmt"
	"strings"
)

// Perm is a set of permissions on a namespace.
type Perm uint16

// Permissions. A call needs every permission its parts need: an enqueue with
// KV mutations needs PermEnqueue and PermKVWrite.
const (
	PermEnqueue Perm = 1 << iota // enqueue tasks
	PermWork                     // claim, complete, fail, heartbeat, snooze
	PermRead                     // get, list, counts
	PermAdmin                    // cancel, redrive
	PermKVRead                   // KV get and scan, and KV assertions
	PermKVWrite                  // KV set and delete

	PermAll = PermEnqueue | PermWork | PermRead | PermAdmin | PermKVRead | PermKVWrite
)

var permNames = [...]string{"enqueue", "work", "read", "admin", "kv-read", "kv-write"}

func (p Perm) String() string {
	var parts []string
	for i, name := range permNames {
		if p&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// Caller is the identity a call runs for. What it may do is decided by the
// Options.Authorizer.
type Caller struct {
	ID string
}

// Authorizer decides whether a caller holds permissions on a namespace.
// Implementations map the application's own users or tokens; they must be
// safe for concurrent use and must not call back into the DB.
type Authorizer interface {
	// Allowed returns the subset of want that caller holds on ns.
	Allowed(caller Caller, ns Namespace, want Perm) Perm
}

// Grant gives permissions on namespaces matching Project and Scope, where
// "*" matches any value.
type Grant struct {
	Project, Scope string
	Perms          Perm
}

// Policy is a static Authorizer: caller id to grants. Anything not granted
// is denied.
type Policy map[string][]Grant

// Allowed implements Authorizer.
func (p Policy) Allowed(caller Caller, ns Namespace, want Perm) Perm {
	var have Perm
	for _, g := range p[caller.ID] {
		if (g.Project == "*" || g.Project == ns.Project) && (g.Scope == "*" || g.Scope == ns.Scope) {
			have |= g.Perms
		}
	}
	return have & want
}

type denyAll struct{}

func (denyAll) Allowed(Caller, Namespace, Perm) Perm { return 0 }

// authorize checks that the DB view may use perms on ns, and counts a
// refusal; the engine itself (no caller) may do anything unless the DB is
// secure.
func (d *DB) authorize(ns Namespace, perms Perm) error {
	err := d.permit(ns, perms)
	if err != nil {
		d.c.countDenied()
		if obs := d.c.opts.Observer; obs != nil {
			obs.TaskEvents([]TaskEvent{{Kind: EvDenied, Namespace: ns}})
		}
	}
	return err
}

func (d *DB) permit(ns Namespace, perms Perm) error {
	if d.caller == nil {
		if d.c.opts.Secure {
			return fmt.Errorf("%w: a caller is required in secure mode (%s on %s)", ErrPermission, perms, ns)
		}
		return nil
	}
	have := d.c.opts.Authorizer.Allowed(*d.caller, ns, perms)
	if missing := perms &^ have; missing != 0 {
		return fmt.Errorf("%w: caller %q lacks %s on %s", ErrPermission, d.caller.ID, missing, ns)
	}
	return nil
}

// owner refuses process-level calls (Close, Checkpoint, Verify) made through
// a caller view: they concern every namespace, so only the embedding program
// may make them.
func (d *DB) owner(call string) error {
	if d.caller != nil {
		return fmt.Errorf("%w: %s is for the program that opened the DB, not caller %q", ErrPermission, call, d.caller.ID)
	}
	return nil
}

// As returns a view of the same DB whose calls run for caller and are
// checked against Options.Authorizer.
func (d *DB) As(caller Caller) *DB {
	return &DB{c: d.c, caller: &caller}
}
