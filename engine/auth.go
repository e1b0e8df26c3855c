package engine

import (
	"fmt"
	"strings"
)

type denyAll struct{}

func (denyAll) Allowed(Caller, Namespace, Perm) Perm { return 0 }

// authorize checks that the DB view may use perms on ns, and counts a
// refusal; the engine itself (no caller) may do anything unless the DB is
// secure.
func (d *DB) authorize(ns Namespace, perms Perm) error {
	return d.authorizeAny(ns, perms, 0)
}

// authorizeAny is authorize for a call that needs every permission of all
// and, when oneOf is not zero, at least one permission of oneOf.
func (d *DB) authorizeAny(ns Namespace, all, oneOf Perm) error {
	if d.bad != nil {
		return d.bad
	}
	err := d.permitAny(ns, all, oneOf)
	if err != nil {
		d.denied(ns)
	}
	return err
}

// denied counts a refusal and reports it to the Observer.
func (d *DB) denied(ns Namespace) {
	d.c.countDenied()
	if obs := d.c.opts.Observer; obs != nil {
		obs.TaskEvents([]TaskEvent{{Kind: EvDenied, Namespace: ns}})
	}
}

// permit is authorize without the accounting.
func (d *DB) permit(ns Namespace, perms Perm) error { return d.permitAny(ns, perms, 0) }

func (d *DB) permitAny(ns Namespace, all, oneOf Perm) error {
	if d.bad != nil {
		return d.bad
	}
	want := all | oneOf
	if d.caller == nil {
		if d.c.opts.Secure {
			return fmt.Errorf("%w: a caller is required in secure mode (%s on %s)", ErrPermission, want, ns)
		}
		return nil
	}
	have := d.c.opts.Authorizer.Allowed(*d.caller, ns, want)
	if missing := all &^ have; missing != 0 {
		return fmt.Errorf("%w: caller %q lacks %s on %s", ErrPermission, d.caller.ID, missing, ns)
	}
	if oneOf != 0 && have&oneOf == 0 {
		return fmt.Errorf("%w: caller %q lacks %s on %s (one of them is needed)", ErrPermission, d.caller.ID, strings.ReplaceAll(oneOf.String(), "+", " or "), ns)
	}
	return nil
}

// owner refuses process-level calls (Close, Checkpoint, Verify) made through
// a caller view: they concern every namespace, so only the embedding program
// may make them. A refusal is counted like any other.
func (d *DB) owner(call string) error {
	if d.bad != nil {
		return d.bad
	}
	if d.caller != nil {
		d.denied(Namespace{})
		return fmt.Errorf("%w: %s is for the program that opened the DB, not caller %q", ErrPermission, call, d.caller.ID)
	}
	return nil
}

// As returns a view of the same DB whose calls run for caller and are
// checked against Options.Authorizer.
//
// A view keeps its identity: As on a view returns a view whose every call
// fails with ErrPermission, so code handed a view cannot act as another
// caller. An invalid caller id (empty, over MaxNameBytes, not UTF-8, or
// holding control characters) gives a view whose every call fails with
// ErrInvalid.
func (d *DB) As(caller Caller) *DB {
	if d.caller != nil {
		return &DB{c: d.c, caller: d.caller, bad: fmt.Errorf(
			"%w: a view of caller %q cannot act as another caller (As is for the program that opened the DB)",
			ErrPermission, d.caller.ID)}
	}
	if err := caller.Validate(); err != nil {
		return &DB{c: d.c, caller: &Caller{}, bad: err}
	}
	return &DB{c: d.c, caller: &caller}
}
