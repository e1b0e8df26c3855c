package dockettype

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Perm is a set of permissions on a namespace.
type Perm uint16

// Permissions. A call needs every permission its parts need: an enqueue with
// KV mutations needs PermEnqueue and PermKVWrite.
const (
	PermEnqueue Perm = 1 << iota // enqueue tasks
	PermWork                     // claim, complete, fail, heartbeat, snooze
	PermRead                     // get, list, counts
	PermAdmin                    // cancel, redrive, run now, reschedule
	PermKVRead                   // KV get and scan, and KV assertions
	PermKVWrite                  // KV set and delete
	// PermSystem reads and writes the namespace's system area (SystemKV):
	// state the worker runtime keeps for itself, such as the last tick of
	// each periodic schedule. PermKVWrite does not reach it.
	PermSystem

	PermAll = PermEnqueue | PermWork | PermRead | PermAdmin | PermKVRead | PermKVWrite | PermSystem
)

var permNames = [...]string{"enqueue", "work", "read", "admin", "kv-read", "kv-write", "system"}

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

// GrantLister is an Authorizer that can list a caller's grants, as Policy
// does. DB.Queues then asks about, and visits, only the namespaces a
// caller's grants with PermRead match, instead of every namespace. The
// grants must cover every namespace on which Allowed gives the caller
// PermRead; Allowed still decides for each namespace they match.
type GrantLister interface {
	Authorizer
	// Grants returns caller's grants. The DB does not keep or change the
	// slice.
	Grants(caller Caller) []Grant
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

// Grants implements GrantLister.
func (p Policy) Grants(caller Caller) []Grant { return p[caller.ID] }

// Validate reports whether c.ID is an id As accepts: non-empty, at most
// MaxNameBytes, valid UTF-8 without control characters. The error wraps
// ErrInvalid and never repeats the id. Programs that store caller ids (a
// tokens file, say) call it where the id is written, so that an id the
// engine would refuse on every call is refused once, up front.
func (c Caller) Validate() error {
	id := c.ID
	switch {
	case id == "":
		return invalid("caller id is empty")
	case len(id) > MaxNameBytes:
		return invalid("caller id is %d bytes, over the limit of %d", len(id), MaxNameBytes)
	case !utf8.ValidString(id):
		return invalid("caller id is not valid UTF-8")
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return invalid("caller id contains a control character")
	}
	return nil
}
