// Package view is what the engine's reads return, made from the state:
// a task's TaskInfo, a queue's counts, pages of its tasks and partitions,
// the QueueInfo and QueueSettings of its queues. Every function reads the
// indexes it is given and nothing else: the shell calls them under its
// lock, as of a now its clock gave (a due timer is ready, an expired lease
// ready again or dead, whether or not a commit has stored that yet). The
// counters of Stats count the events of the commits (Count).
package view

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// TimeOf turns stored Unix micros into a time in UTC (the zero time for
// 0), so that what a call returns does not depend on the process's time
// zone.
func TimeOf(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// Micros is a stored number of microseconds as a duration.
func Micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

func nsOf(k index.QueueKey) dockettype.Namespace {
	return dockettype.Namespace{Project: k.Project, Scope: k.Scope}
}

// Info describes t as it is at now.
func Info(t *index.Task, now int64) dockettype.TaskInfo {
	t = machine.At(t, now)
	x := t.Ex()
	k := t.Queue.Key
	info := dockettype.TaskInfo{
		ID: t.ID, Namespace: nsOf(k), Queue: k.Name, Kind: x.Kind, State: dockettype.State(t.State),
		Payload: validate.Clone(t.Payload()), Headers: maps.Clone(x.Headers), Priority: int(t.Priority), Attempts: int(t.Attempts),
		MaxAttempts: int(t.MaxAttempts()), NotBefore: TimeOf(t.NotBefore), Owner: t.Owner(), Token: t.Token(),
		LeaseUntil: TimeOf(t.LeaseUntil()), Progress: validate.Clone(x.Progress), Result: validate.Clone(x.Result), LastError: x.LastError,
		IdempotencyKey: x.IdemKey, BackoffBase: Micros(t.BackoffBase()), BackoffMax: Micros(t.BackoffMax()),
		CreatedAt: TimeOf(t.Created), UpdatedAt: TimeOf(t.Updated()), Parent: x.Parent, FollowUps: slices.Clone(x.FollowUps),
		OnParentFailure: dockettype.DependencyPolicy(x.DepPolicy), Partition: t.PartitionKey(),
	}
	if len(x.Errors) > 0 {
		info.Errors = make([]dockettype.AttemptError, len(x.Errors))
		for i, e := range x.Errors {
			info.Errors[i] = dockettype.AttemptError{Attempt: int(e.Attempt), At: TimeOf(e.At), Error: e.Error}
		}
	}
	return info
}

// Deps fills in what task info waits for and, when dependents is set,
// which tasks wait for it (at most MaxBatch).
func Deps(st *index.Store, info *dockettype.TaskInfo, dependents bool) {
	if info.State == dockettype.Waiting {
		info.WaitingOn = make([]uint64, 0, st.Waits(info.ID))
		st.WaitingOn(info.ID, func(parent uint64) bool {
			info.WaitingOn = append(info.WaitingOn, parent)
			return true
		})
	}
	if dependents {
		st.Dependents(info.ID, 0, func(child uint64) bool {
			info.Dependents = append(info.Dependents, child)
			return len(info.Dependents) < dockettype.MaxBatch
		})
	}
}

// countsOf turns counts by index state into Counts.
func countsOf(n [index.NumStates]int) dockettype.Counts {
	return dockettype.Counts{Ready: n[index.StateReady], Scheduled: n[index.StateScheduled], InFlight: n[index.StateInFlight],
		Dead: n[index.StateDead], Completed: n[index.StateCompleted], Waiting: n[index.StateWaiting]}
}

// Counts counts the tasks of iq by state at now, forgetting the retained
// completions that ended at or before gone.
func Counts(iq *index.Queue, now, gone int64) dockettype.Counts {
	return countsOf(iq.CountsAt(now, gone))
}

// ParseCursor reads a List cursor, "key:id"; the empty cursor is the start
// of the order.
func ParseCursor(s string) (int64, uint64, error) {
	if s == "" {
		return 1<<63 - 1, 0, nil // highest priority first for the ready order
	}
	a, b, ok := strings.Cut(s, ":")
	k, err1 := strconv.ParseInt(a, 10, 64)
	id, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%w: cursor %.40q", dockettype.ErrInvalid, s)
	}
	return k, id, nil
}

// SearchFrom is the id a page of Search starts from, in lo..hi (from the
// newest down with newest set), after the page cursor ended ("" for the
// first page).
func SearchFrom(cursor string, newest bool, lo, hi uint64) (uint64, error) {
	from := lo
	if newest {
		from = hi
	}
	if cursor != "" {
		id, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil || id == 0 || id == math.MaxUint64 {
			return 0, fmt.Errorf("%w: search cursor %.40q", dockettype.ErrInvalid, cursor)
		}
		if newest {
			from = min(from, id-1)
		} else {
			from = max(from, id+1)
		}
	}
	return from, nil
}

// List calls add, in serving order, with up to limit tasks of iq in state
// at now, from just after the cursor (a, id) (ParseCursor; start for the
// empty one), and returns the cursor of the next page ("" for none). gone
// is when a retained completion is forgotten at now.
func List(st *index.Store, iq *index.Queue, state dockettype.State, a int64, id uint64, start bool, limit int,
	now, gone int64, add func(t *index.Task)) (next string) {
	n := 0
	var last [2]int64
	more := false
	put := func(tid uint64, k0 int64) bool {
		if n == limit {
			more = true
			return false
		}
		t, _ := st.Task(tid)
		add(t)
		n++
		last = [2]int64{k0, int64(tid)}
		return true
	}
	switch state {
	case dockettype.Ready:
		for _, d := range iq.Claimable(now, index.PrioItem{Prio: a, ID: id}, !start, limit+1, nil) {
			if !put(d.ID, d.Prio) {
				break
			}
		}
	case dockettype.Scheduled, dockettype.InFlight:
		tree := iq.Scheduled
		if state == dockettype.InFlight {
			tree = iq.InFlight
		}
		if start {
			a = -1 << 63
		}
		// Only those not yet due: from just after now.
		from := index.TimeItem{At: a, ID: id}
		if from.At <= now {
			from = index.TimeItem{At: now + 1}
		}
		tree.Ascend(from, func(it index.TimeItem) bool {
			if !start && it.At == a && it.ID == id {
				return true
			}
			return put(it.ID, it.At)
		})
	case dockettype.Dead:
		for _, d := range iq.DeadAt(now, id, !start, limit+1, nil) {
			if !put(d.ID, 0) {
				break
			}
		}
	case dockettype.Waiting:
		iq.Waiting.Ascend(id, func(tid uint64) bool {
			if !start && tid == id {
				return true
			}
			return put(tid, 0)
		})
	default:
		iq.Completed.Ascend(id, func(tid uint64) bool {
			if !start && tid == id {
				return true
			}
			if t, _ := st.Task(tid); t.Updated() <= gone {
				return true // forgotten at now
			}
			return put(tid, 0)
		})
	}
	if !more {
		return ""
	}
	return strconv.FormatInt(last[0], 10) + ":" + strconv.FormatUint(uint64(last[1]), 10)
}

// Partitions returns up to limit partitions of iq after key after (from
// the first with from unset), with their tasks by state at now.
func Partitions(iq *index.Queue, after string, from bool, limit int, now int64) dockettype.PartitionPage {
	var page dockettype.PartitionPage
	iq.Partitions(after, from, func(p *index.Partition) bool {
		if len(page.Partitions) == limit {
			page.Next = "@" + page.Partitions[len(page.Partitions)-1].Key
			return false
		}
		page.Partitions = append(page.Partitions, dockettype.PartitionInfo{Key: p.Key, Counts: countsOf(p.CountsAt(now))})
		return true
	})
	return page
}

// Settings is what a queue's record says to a caller.
func Settings(c index.QueueConf) dockettype.QueueSettings {
	return dockettype.QueueSettings{Paused: c.Paused, Limits: dockettype.Limits{MaxInFlight: int(c.MaxInFlight), Rate: int(c.Rate),
		Per: Micros(c.Per), Burst: int(c.Burst), PartitionMaxInFlight: int(c.PartMaxInFlight),
		PartitionRate: int(c.PartRate), PartitionPer: Micros(c.PartPer), PartitionBurst: int(c.PartBurst)}}
}

func totalsOf(t index.Totals) dockettype.Totals {
	return dockettype.Totals{Enqueued: t.Enqueued, Claimed: t.Claimed, Completed: t.Completed, Retried: t.Retried,
		DeadLettered: t.DeadLettered}
}

// Queue describes iq at now for Queues, with gone as in Counts; false
// when only forgotten completions are left in it.
func Queue(st *index.Store, iq *index.Queue, now, gone int64) (dockettype.QueueInfo, bool) {
	k := iq.Key
	n := Counts(iq, now, gone)
	if _, set := st.Conf(k); n == (dockettype.Counts{}) && !set {
		return dockettype.QueueInfo{}, false
	}
	info := dockettype.QueueInfo{Namespace: nsOf(k), Name: k.Name, Counts: n, Totals: totalsOf(iq.Totals())}
	if at, ok := iq.OldestReady(now); ok {
		info.OldestReady = TimeOf(at)
	}
	return info, true
}

// WithSettings adds to out (the QueueInfo of the queues holding tasks)
// the settings of those queues and an entry for each queue with settings
// and no task, of the namespaces readable lists (every one when nil).
func WithSettings(st *index.Store, out []dockettype.QueueInfo, readable []index.Namespace) []dockettype.QueueInfo {
	if st.NumConfs() == 0 {
		return out
	}
	at := make(map[index.QueueKey]int, len(out))
	for i := range out {
		at[index.QueueKey{Namespace: index.Namespace(out[i].Namespace), Name: out[i].Name}] = i
	}
	set := func(info *dockettype.QueueInfo, c index.QueueConf) {
		s := Settings(c)
		info.Paused, info.Limits = s.Paused, s.Limits
	}
	add := func(conf index.QueueConf) bool {
		k := conf.Queue
		if i, ok := at[k]; ok {
			set(&out[i], conf)
			return true
		}
		info := dockettype.QueueInfo{Namespace: nsOf(k), Name: k.Name, Totals: totalsOf(st.TotalsOf(k))}
		set(&info, conf)
		out = append(out, info)
		return true
	}
	if readable == nil {
		st.Confs(add)
	}
	for _, ns := range readable {
		st.ConfsIn(ns, add)
	}
	return out
}

// reservedEnd is the first key after every key with ReservedPrefix.
const reservedEnd = "docket0" // '0' follows '/'

// Scan returns the entries of ns that o selects, in key order: of its
// system area (the keys under ReservedPrefix) with system set, of the
// user's area (every other key) without.
func Scan(st *index.Store, ns index.Namespace, o dockettype.ScanOptions, system bool) []dockettype.Entry {
	start := max(o.Start, o.Prefix)
	end := o.End
	if system {
		// Only the reserved range.
		start = max(start, dockettype.ReservedPrefix)
		if end == "" || end > reservedEnd {
			end = reservedEnd
		}
	}
	var out []dockettype.Entry
	// The user's area is the whole key order but the reserved range: a
	// scan that meets it goes on after it.
	for from := start; end == "" || from < end; {
		jump := ""
		st.ScanKV(ns, from, end, func(e index.KV) bool {
			if !strings.HasPrefix(e.Key, o.Prefix) {
				return false
			}
			if !system && strings.HasPrefix(e.Key, dockettype.ReservedPrefix) {
				jump = reservedEnd
				return false
			}
			out = append(out, dockettype.Entry{Key: e.Key, Value: e.Value, Version: e.Version})
			return len(out) < o.Limit
		})
		if jump == "" || len(out) == o.Limit {
			break
		}
		from = jump
	}
	return out
}

// Stats sets what s says of the state st holds: its last batch, its
// tasks, the memory it takes and the bytes of the value log it refers to.
func Stats(st *index.Store, s *dockettype.Stats) {
	s.Seq, s.Tasks, s.Memory = st.Seq(), st.Len(), st.Usage().Bytes
	for _, fb := range st.LiveBytes() {
		s.ValueLiveBytes += fb.Bytes
	}
}

// SortQueues sorts queues in namespace and name order.
func SortQueues(queues []dockettype.QueueInfo) {
	slices.SortFunc(queues, func(a, b dockettype.QueueInfo) int {
		return cmp.Or(cmp.Compare(a.Namespace.Project, b.Namespace.Project),
			cmp.Compare(a.Namespace.Scope, b.Namespace.Scope), cmp.Compare(a.Name, b.Name))
	})
}

// Count adds committed events to the counters of s.
func Count(s *dockettype.Stats, events []dockettype.TaskEvent) {
	for i := range events {
		switch events[i].Kind {
		case dockettype.EvEnqueued:
			s.Enqueued++
		case dockettype.EvClaimed:
			s.Claimed++
		case dockettype.EvCompleted:
			s.Completed++
		case dockettype.EvRetried:
			s.Retried++
		case dockettype.EvDead:
			s.DeadLettered++
		case dockettype.EvReclaimed:
			s.Reclaimed++
		case dockettype.EvLeaseLost:
			s.LeaseLost++
		}
	}
}
