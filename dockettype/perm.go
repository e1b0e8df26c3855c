package dockettype

import (
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
