// Package presence holds what the engine does with the presence records
// (worker processes and periodic schedules, in the system area of each
// namespace) apart from reading and committing them: which records a
// report writes and deletes, and which are live. It is pure: the engine
// reads the entries under its lock and commits the ops.
package presence

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// Expires reads the expiry of an encoded record, zero if unreadable.
func Expires(b []byte) time.Time {
	var v struct {
		Expires time.Time `json:"expires"`
	}
	if json.Unmarshal(b, &v) != nil {
		return time.Time{}
	}
	return v.Expires
}

// Report returns the ops that write the record value at key and delete
// the expired ones among es (the records under key's prefix, read at now),
// refusing a new record past limit live ones; what names the record kind
// for errors in ns. An expired record is deleted only if it is still at
// the version read.
func Report(ns dockettype.Namespace, es []index.KV, key string, value []byte, now time.Time, limit int, what string) ([]dockettype.Op, error) {
	ops := []dockettype.Op{dockettype.Set(key, value)}
	live, known := 0, false
	for _, e := range es {
		if e.Key == key {
			known = true
			continue
		}
		if !Expires(e.Value).After(now) {
			ops = append(ops, dockettype.IfVersion(e.Key, e.Version), dockettype.Delete(e.Key))
			continue
		}
		live++
	}
	if !known && live >= limit {
		return nil, fmt.Errorf("%w: namespace %s already has %d live %ss, the limit", dockettype.ErrInvalid, ns, live, what)
	}
	ops = ops[:min(len(ops), dockettype.MaxOps)]
	if len(ops)%2 == 0 { // never cut an assertion from its delete
		ops = ops[:len(ops)-1]
	}
	return ops, nil
}

// Workers lists the live workers of es, the records under
// WorkerKeyPrefix, at now: at most MaxWorkers, by id.
func Workers(es []index.KV, now time.Time) []dockettype.WorkerPresence {
	out := []dockettype.WorkerPresence{}
	for _, e := range es {
		var p dockettype.WorkerPresence
		if json.Unmarshal(e.Value, &p) != nil || !p.Expires.After(now) {
			continue
		}
		out = append(out, p)
		if len(out) == dockettype.MaxWorkers {
			break
		}
	}
	return out
}

// Schedules lists the live schedules of es, the records under
// ScheduleKeyPrefix, at now, each with its pause state (paused, the
// records under SchedulePausedPrefix) and any run-now request waiting
// (runs, under ScheduleRunPrefix): at most MaxSchedules, by queue and name.
func Schedules(es, paused, runs []index.KV, now time.Time) []dockettype.ScheduleInfo {
	has := func(es []index.KV, key string) bool {
		_, ok := slices.BinarySearchFunc(es, key, func(e index.KV, k string) int { return cmp.Compare(e.Key, k) })
		return ok
	}
	out := []dockettype.ScheduleInfo{}
	for _, e := range es {
		var s dockettype.ScheduleInfo
		if json.Unmarshal(e.Value, &s) != nil || !s.Expires.After(now) {
			continue
		}
		k := dockettype.ScheduleKey(s.Queue, s.Name)
		s.Paused = has(paused, dockettype.SchedulePausedPrefix+k)
		s.RunRequested = has(runs, dockettype.ScheduleRunPrefix+k)
		out = append(out, s)
		if len(out) == dockettype.MaxSchedules {
			break
		}
	}
	slices.SortFunc(out, func(a, b dockettype.ScheduleInfo) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Entries returns up to limit entries (every one for limit <= 0) of the
// system area of ns under prefix. Call with the engine lock held.
func Entries(st *index.Store, ns index.Namespace, prefix string, limit int) []index.KV {
	var out []index.KV
	st.ScanKV(ns, prefix, "", func(e index.KV) bool {
		if !strings.HasPrefix(e.Key, prefix) {
			return false
		}
		out = append(out, e)
		return limit <= 0 || len(out) < limit
	})
	return out
}
