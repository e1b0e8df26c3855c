package dockettype

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits bound how fast a queue's tasks are leased, counted across every
// claimer of every process. The zero value is no limit.
type Limits struct {
	// MaxInFlight bounds the queue's tasks in flight at once: a claim
	// leases at most MaxInFlight minus those in flight. A lease that has
	// expired is not in flight (its task is ready again). 0: no bound.
	MaxInFlight int
	// Rate and Per limit claims to Rate tasks per Per on average, with a
	// token bucket: it holds up to Burst tokens, gains Rate tokens every
	// Per, and each task leased takes one. Over any span of time d, at most
	// Burst + Rate*d/Per tasks are leased. Rate 0 is no rate limit (Per and
	// Burst must then be 0).
	Rate int
	Per  time.Duration
	// Burst is the size of the bucket, how many tasks may be leased at once
	// after a quiet spell; 0 means Rate. Settings reports the burst in
	// effect.
	Burst int
	// PartitionMaxInFlight bounds the tasks in flight at once of each
	// partition of the queue (Task.Partition; the tasks that name none are
	// one partition), as MaxInFlight bounds the queue's: a partition at its
	// bound is passed over by claims, which serve the others. 0: no bound.
	PartitionMaxInFlight int
	// PartitionRate, PartitionPer and PartitionBurst limit the claims of
	// each partition of the queue as Rate, Per and Burst limit the queue's:
	// every partition (the default one too) has a token bucket of its own,
	// and a partition out of tokens is passed over by claims, which serve
	// the others. The queue's own limits apply as well. PartitionRate 0 is
	// none (PartitionPer and PartitionBurst must then be 0);
	// PartitionBurst 0 means PartitionRate.
	PartitionRate  int
	PartitionPer   time.Duration
	PartitionBurst int
}

// String says the limits in words, as the CLI and the dashboard show them:
// "at most 3 in flight; 10 per 1s, bursts of 20", or "" for none.
func (l Limits) String() string {
	var parts []string
	if l.MaxInFlight > 0 {
		parts = append(parts, fmt.Sprintf("at most %d in flight", l.MaxInFlight))
	}
	if l.Rate > 0 {
		parts = append(parts, rateString(l.Rate, l.Per, l.Burst, ""))
	}
	if l.PartitionMaxInFlight > 0 {
		parts = append(parts, fmt.Sprintf("at most %d in flight per partition", l.PartitionMaxInFlight))
	}
	if l.PartitionRate > 0 {
		parts = append(parts, rateString(l.PartitionRate, l.PartitionPer, l.PartitionBurst, " per partition"))
	}
	return strings.Join(parts, "; ")
}

// rateString says a token bucket's limit: "10 per 1s<of>, bursts of 20".
func rateString(rate int, per time.Duration, burst int, of string) string {
	s := fmt.Sprintf("%d per %v%s", rate, per, of)
	if burst != 0 && burst != rate {
		s += fmt.Sprintf(", bursts of %d", burst)
	}
	return s
}

// Limits on what a call may ask for. Each is checked before anything is
// planned; exceeding one returns ErrInvalid naming it.
const (
	MaxNameBytes     = 255     // project, scope, queue, owner, kind, caller ids
	MaxKeyBytes      = 4096    // KV keys and idempotency keys
	MaxErrorBytes    = 8192    // a failure's error text (longer text is cut, not refused)
	MaxHeaders       = 64      // headers per task
	MaxHeaderBytes   = 1024    // one header key or value
	MaxBatch         = 10_000  // tasks per batch enqueue, claim max, list and scan limits
	MaxOps           = 10_000  // ops (KV mutations, assertions, follow-ups) in one commit
	MaxAttemptsLimit = 1 << 20 // a task's attempt budget
	MaxAttemptErrors = 20      // failed attempts a task remembers (TaskInfo.Errors)
	MaxCommitBytes   = 64 << 20
	// MaxDuration bounds delays, leases and backoffs (about 100 years), so
	// that now+duration never overflows.
	MaxDuration = 100 * 365 * 24 * time.Hour
)

// ErrorText is a failure's error text as a task records it: its first
// MaxErrorBytes, made valid UTF-8 (a rune cut at the end, or bytes that
// are not UTF-8 at all, are dropped), since the text is sent back in
// answers.
func ErrorText(msg string) string {
	if len(msg) > MaxErrorBytes {
		msg = msg[:MaxErrorBytes]
	}
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "")
	}
	return msg
}

// ReservedPrefix starts the keys of a namespace's system area: state the
// engine's own runtime keeps in the namespace (the worker's periodic
// schedules keep their last tick under "docket/periodic/"). A KV handle
// cannot reach these keys: reading or writing one through it, in any call
// (KV.Get, KV.Commit, the ops of Enqueue and Complete), is ErrInvalid, and
// KV.Scan skips them. SystemKV reaches only them, with PermSystem.
const ReservedPrefix = "docket/"

// A quota bounds what one namespace's state may hold, as the memory budget
// bounds the whole state: its tasks and its bytes, counted as
// NamespaceUsage counts them. A write that would take its namespace past
// its quota is refused with ErrFull and changes nothing; the other
// namespaces do not notice. As with the budget, writes that free state are
// never refused, and completions with follow-ups and writes to the system
// area (worker presence, schedules) may use a reserve of an eighth of the
// quota beyond it. A completion that writes nothing but its result is a
// write that frees state: no quota refuses it.
//
// The quota is a record in the namespace's system area (QuotaKey): it is
// durable, replicated with the rest of the state, and every node reads
// the same quota from it. Setting a quota below what the namespace holds
// refuses what adds to it until enough is freed; nothing is removed.
// QuotaKey is the key of a namespace's quota in its system area.
const QuotaKey = ReservedPrefix + "quota"

// idempotency keys a caller chooses may not start with ReservedPrefix.
const UniquePrefix = ReservedPrefix + "unique/"

// MaxDependencies bounds the tasks one task depends on (DependsOn and
// DependsOnSibling together).
const MaxDependencies = 10_000

// Queue controls: pause and resume, a bound on the tasks in flight and a
// rate limit, per queue, enforced where claims are planned so that they
// hold across every claimer of every process. A queue's settings are a
// record of their own in the log and snapshots (index.QueueConf), kept
// whether or not the queue holds tasks, and every decision about them
// reads the state and the batch's time only, so a replicated log plans
// the same claims on every node.
// QueueSettings are a queue's controls, as Settings reports them.
type QueueSettings struct {
	// Paused is set by Pause and cleared by Resume. A paused queue takes
	// enqueues and every other call, but its claims lease nothing:
	// ClaimWait waits until it is resumed.
	Paused bool
	Limits Limits
}

// Quota is the limit of one namespace's state. Zero in a field is no
// limit on it.
type Quota struct {
	// MaxTasks bounds the namespace's tasks, in every state.
	MaxTasks int `json:"max_tasks,omitempty"`
	// MaxBytes bounds the bytes its tasks, idempotency keys and KV
	// entries take, as the memory budget counts them.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// Durability says when a commit is acknowledged relative to the disk.
type Durability int

const (
	// SyncAlways acknowledges a commit only after the log holding it is
	// fsynced. Concurrent commits share one fsync (group commit). Default.
	SyncAlways Durability = iota
	// SyncInterval acknowledges once the log is written to the OS and fsyncs
	// it every Options.SyncEvery: a power loss can lose that window, a process
	// crash loses nothing.
	SyncInterval
	// SyncNever acknowledges once the log is written to the OS and leaves
	// fsync to the OS.
	SyncNever
)

func (d Durability) String() string {
	switch d {
	case SyncAlways:
		return "always"
	case SyncInterval:
		return "interval"
	case SyncNever:
		return "never"
	}
	return "invalid"
}
