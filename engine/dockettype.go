package engine

import (
	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// The value types and sentinel errors live in package dockettype, which
// imports nothing of docket's; engine keeps every name.

type (
	DependencyPolicy     = dockettype.DependencyPolicy
	Limits               = dockettype.Limits
	EventKind            = dockettype.EventKind
	TaskEvent            = dockettype.TaskEvent
	Perm                 = dockettype.Perm
	Namespace            = dockettype.Namespace
	State                = dockettype.State
	Task                 = dockettype.Task
	Enqueued             = dockettype.Enqueued
	Lease                = dockettype.Lease
	TaskInfo             = dockettype.TaskInfo
	AttemptError         = dockettype.AttemptError
	Unique               = dockettype.Unique
	OpKind               = dockettype.OpKind
	Filter               = dockettype.Filter
	Retrying             = dockettype.Retrying
	BulkAction           = dockettype.BulkAction
	Reschedule           = dockettype.Reschedule
	WorkerPresence       = dockettype.WorkerPresence
	WorkerQueue          = dockettype.WorkerQueue
	RunningTask          = dockettype.RunningTask
	ScheduleInfo         = dockettype.ScheduleInfo
	Done                 = dockettype.Done
	FollowUp             = dockettype.FollowUp
	Failure              = dockettype.Failure
	Counts               = dockettype.Counts
	ListOptions          = dockettype.ListOptions
	Page                 = dockettype.Page
	Entry                = dockettype.Entry
	ScanOptions          = dockettype.ScanOptions
	TxResult             = dockettype.TxResult
	PartitionInfo        = dockettype.PartitionInfo
	PartitionListOptions = dockettype.PartitionListOptions
	PartitionPage        = dockettype.PartitionPage
	SearchOptions        = dockettype.SearchOptions
	SearchPage           = dockettype.SearchPage
	BulkSkip             = dockettype.BulkSkip
	BulkResult           = dockettype.BulkResult
	QueueSettings        = dockettype.QueueSettings
	QueueInfo            = dockettype.QueueInfo
	Totals               = dockettype.Totals
	Quota                = dockettype.Quota
	SnapshotEvent        = dockettype.SnapshotEvent
	Caller               = dockettype.Caller
	Authorizer           = dockettype.Authorizer
	GrantLister          = dockettype.GrantLister
	Grant                = dockettype.Grant
	Policy               = dockettype.Policy
	Observer             = dockettype.Observer
	Stats                = dockettype.Stats
	Durability           = dockettype.Durability
	Op                   = dockettype.Op
)

// Sentinel errors (see dockettype).
var (
	ErrInvalid        = dockettype.ErrInvalid
	ErrNotFound       = dockettype.ErrNotFound
	ErrLeaseLost      = dockettype.ErrLeaseLost
	ErrConflict       = dockettype.ErrConflict
	ErrPermission     = dockettype.ErrPermission
	ErrClosed         = dockettype.ErrClosed
	ErrFailed         = dockettype.ErrFailed
	ErrCorrupt        = dockettype.ErrCorrupt
	ErrLocked         = dockettype.ErrLocked
	ErrFull           = dockettype.ErrFull
	ErrReadOnly       = dockettype.ErrReadOnly
	ErrNotLeader      = dockettype.ErrNotLeader
	ErrOutcomeUnknown = dockettype.ErrOutcomeUnknown
)

const (
	CancelOnFailure  = dockettype.CancelOnFailure
	WaitOnFailure    = dockettype.WaitOnFailure
	RunOnFailure     = dockettype.RunOnFailure
	EvEnqueued       = dockettype.EvEnqueued
	EvClaimed        = dockettype.EvClaimed
	EvCompleted      = dockettype.EvCompleted
	EvRetried        = dockettype.EvRetried
	EvDead           = dockettype.EvDead
	EvReclaimed      = dockettype.EvReclaimed
	EvLeaseLost      = dockettype.EvLeaseLost
	EvCancelled      = dockettype.EvCancelled
	EvRedriven       = dockettype.EvRedriven
	EvDenied         = dockettype.EvDenied
	PermEnqueue      = dockettype.PermEnqueue
	PermWork         = dockettype.PermWork
	PermRead         = dockettype.PermRead
	PermAdmin        = dockettype.PermAdmin
	PermKVRead       = dockettype.PermKVRead
	PermKVWrite      = dockettype.PermKVWrite
	PermSystem       = dockettype.PermSystem
	PermAll          = dockettype.PermAll
	Ready            = dockettype.Ready
	Scheduled        = dockettype.Scheduled
	InFlight         = dockettype.InFlight
	Dead             = dockettype.Dead
	Completed        = dockettype.Completed
	Waiting          = dockettype.Waiting
	OpSet            = dockettype.OpSet
	OpDelete         = dockettype.OpDelete
	OpIfVersion      = dockettype.OpIfVersion
	OpIfExists       = dockettype.OpIfExists
	OpIfAbsent       = dockettype.OpIfAbsent
	OpEnqueue        = dockettype.OpEnqueue
	AnyRetrying      = dockettype.AnyRetrying
	OnlyRetrying     = dockettype.OnlyRetrying
	NotRetrying      = dockettype.NotRetrying
	BulkRetry        = dockettype.BulkRetry
	BulkCancel       = dockettype.BulkCancel
	BulkRunNow       = dockettype.BulkRunNow
	BulkDelete       = dockettype.BulkDelete
	MaxFilterBytes   = dockettype.MaxFilterBytes
	MaxNameBytes     = dockettype.MaxNameBytes
	MaxKeyBytes      = dockettype.MaxKeyBytes
	MaxErrorBytes    = dockettype.MaxErrorBytes
	MaxHeaders       = dockettype.MaxHeaders
	MaxHeaderBytes   = dockettype.MaxHeaderBytes
	MaxBatch         = dockettype.MaxBatch
	MaxOps           = dockettype.MaxOps
	MaxAttemptsLimit = dockettype.MaxAttemptsLimit
	MaxAttemptErrors = dockettype.MaxAttemptErrors
	MaxCommitBytes   = dockettype.MaxCommitBytes
	MaxDuration      = dockettype.MaxDuration
	ReservedPrefix   = dockettype.ReservedPrefix
	QuotaKey         = dockettype.QuotaKey
	UniquePrefix     = dockettype.UniquePrefix
	MaxDependencies  = dockettype.MaxDependencies

	WorkerKeyPrefix      = dockettype.WorkerKeyPrefix
	ScheduleKeyPrefix    = dockettype.ScheduleKeyPrefix
	SchedulePausedPrefix = dockettype.SchedulePausedPrefix
	ScheduleRunPrefix    = dockettype.ScheduleRunPrefix
	MaxPresenceBytes     = dockettype.MaxPresenceBytes
	MaxWorkers           = dockettype.MaxWorkers
	MaxSchedules         = dockettype.MaxSchedules
	MinPresenceTTL       = dockettype.MinPresenceTTL
	MaxPresenceTTL       = dockettype.MaxPresenceTTL

	LogGroupBuckets = dockettype.LogGroupBuckets
	SyncAlways      = dockettype.SyncAlways
	SyncInterval    = dockettype.SyncInterval
	SyncNever       = dockettype.SyncNever
)

// NS returns the namespace (project, scope).
func NS(project, scope string) Namespace { return dockettype.NS(project, scope) }

// ParseNamespace reads a namespace as Namespace.String prints it (see
// dockettype.ParseNamespace).
func ParseNamespace(s string) (Namespace, error) { return dockettype.ParseNamespace(s) }

// ScheduleKey returns the key suffix of a schedule: its queue and name,
// path-escaped, joined by "/".
func ScheduleKey(queue, name string) string { return dockettype.ScheduleKey(queue, name) }

// ParsePolicy returns the policy its String names.
func ParsePolicy(s string) (DependencyPolicy, error) { return dockettype.ParsePolicy(s) }

// ParseBulkAction reads retry, cancel, run-now (or run_now) and delete.
func ParseBulkAction(s string) (BulkAction, error) { return dockettype.ParseBulkAction(s) }

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

// UniqueKey returns the idempotency key Unique derives from a task's kind
// and payload (see dockettype.UniqueKey).
func UniqueKey(kind string, payload []byte) (string, error) {
	return dockettype.UniqueKey(kind, payload)
}

// CanonicalJSON returns the canonical form of the JSON value b that
// unique-by-content keys are derived from (see dockettype.CanonicalJSON).
func CanonicalJSON(b []byte) ([]byte, error) { return dockettype.CanonicalJSON(b) }

// idxNS is the index's name of namespace n.
func idxNS(n Namespace) index.Namespace { return index.Namespace{Project: n.Project, Scope: n.Scope} }

// The states are the index's.
const _ = uint(Ready-State(index.StateReady)) + uint(State(index.StateReady)-Ready) +
	uint(Scheduled-State(index.StateScheduled)) + uint(State(index.StateScheduled)-Scheduled) +
	uint(InFlight-State(index.StateInFlight)) + uint(State(index.StateInFlight)-InFlight) +
	uint(Dead-State(index.StateDead)) + uint(State(index.StateDead)-Dead) +
	uint(Completed-State(index.StateCompleted)) + uint(State(index.StateCompleted)-Completed) +
	uint(Waiting-State(index.StateWaiting)) + uint(State(index.StateWaiting)-Waiting)
