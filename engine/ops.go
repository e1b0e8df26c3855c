package engine

import (
	"github.com/docketdb/docket/dockettype"
)

// Op is one part of a transaction (see dockettype.Op).
type Op = dockettype.Op

// Set writes value under key.
func Set(key string, value []byte) Op { return dockettype.Set(key, value) }

// Delete removes key (deleting an absent key is not an error).
func Delete(key string) Op { return dockettype.Delete(key) }

// IfVersion asserts that key exists with exactly version.
func IfVersion(key string, version uint64) Op { return dockettype.IfVersion(key, version) }

// IfExists asserts that key exists.
func IfExists(key string) Op { return dockettype.IfExists(key) }

// IfAbsent asserts that key does not exist.
func IfAbsent(key string) Op { return dockettype.IfAbsent(key) }

// Enqueue enqueues t on queue as part of the transaction.
func Enqueue(queue string, t Task) Op { return dockettype.Enqueue(queue, t) }
