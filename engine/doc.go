// Package engine is docket's public API: an embedded, durable task and timer
// queue with a key-value store, in one directory.
//
// Open a directory (or OpenInMemory) to get a DB. Queues live in (project, scope)
// namespaces: DB.Queue returns a handle with Enqueue, EnqueueAsync, Claim,
// ClaimWait, Complete, CompleteAndClaim, Fail, Heartbeat, HeartbeatBatch,
// Snooze, Cancel, Redrive, Get, List and Counts;
// DB.KV returns a handle on the namespace's keys with Get, Scan and Commit,
// whose ops (Set, Delete, IfVersion, IfExists, IfAbsent, Enqueue) commit
// together or not at all. A task may wait for other tasks of its namespace
// (Task.DependsOn; DependencyPolicy says how dependencies resolve and what
// a failed parent does to the tasks waiting for it). DB.As runs calls for a Caller
// whose permissions the Options.Authorizer checks.
//
// A queue can be paused (Pause, Resume) and limited (SetLimits: a bound on
// its tasks in flight and a token-bucket rate limit), across every claimer
// of every process: claims are planned against the queue's settings, a
// record of the log and snapshots of its own that the queue keeps while
// it holds no task (controls.go). A task can name a partition of its
// queue (Task.Partition): claims take turns between the partitions with
// work, priority ordering each partition's tasks,
// Limits.PartitionMaxInFlight bounds each partition and
// Limits.PartitionRate gives each a token bucket of its own, a record of
// the log and snapshots while it is not full (partition.go). A
// task can be unique by content
// (Task.Unique): its idempotency key is derived from its kind and the
// canonical JSON of its payload, and blocks a duplicate within a window
// and a set of states (unique.go).
//
// Every change goes through one commit path: under the engine's mutex a call
// validates and plans a batch of physical mutations (reading the clock once),
// appends it to the write-ahead log and applies it to the in-memory indexes
// (package index); after the mutex is released it waits until the log says
// the batch is as durable as Options.Durability promises (one fsync covers
// every batch appended before it). Reads, refusals and commits that change
// nothing wait the same way for the batches they saw, so no answer rests on
// something a crash could take back. A failed log write or fsync stops the
// engine: every later call returns ErrFailed.
//
// EnqueueAsync takes the same path but does not wait: its commit joins the
// open sync round, and one goroutine per DB waits for the log once per
// round and settles every Pending of it (pipeline.go), so one caller can
// keep many commits in flight; a failure of the log fails them all. A
// commit that gives a queue work (or a change of its settings that lets
// it lease more) wakes as many parked ClaimWait calls as the queue may
// lease tasks, within its controls, that no woken call is coming for
// (wake.go).
//
// Snapshots of the indexes are written in the background from copy-on-write
// images, and the log is truncated behind the older of the two kept. Open
// loads the newest snapshot that verifies and replays the log after it;
// Check and Repair inspect and mend a directory offline.
//
// # Determinism, for a replicated log
//
// Applying a batch needs nothing but its bytes: a batch carries the time its
// plan used (never earlier than the batch before, whatever the clock does;
// see index.Store.Now) and the entropy it drew (the seed lease secrets are
// derived from, see LeaseSecret); planning changes nothing, and a batch is
// encoded the same way on every node. A batch whose assertions no longer
// hold when applied is refused: an outcome, not an error, and it still
// consumes its sequence number. The live commit path, Open's replay and
// Check apply batches through one function, so they cannot drift apart.
//
// Two DBs that applied the same batches hold the same state: DB.EncodeState
// writes the same bytes on both, and DB.StateHash is their SHA-256.
//
// # Commands, for a replicated DB
//
// Every write call (Enqueue, EnqueueBatch, EnqueueAsync, Claim, Complete,
// CompleteBatch, CompleteAndClaim, Fail, Heartbeat, HeartbeatBatch, Snooze,
// Cancel, Redrive, RedriveAll, RunNow, Pause, Resume, SetLimits, KV.Commit)
// is a command: its operation and validated arguments, planned against the
// state at a given time with a given entropy seed. A standalone DB plans
// it at once and logs the batch it gives. A DB opened
// with OpenReplicated logs before planning instead: it validates the call,
// stamps the command with its clock and a seed, and submits its encoding to
// a Replicator (package cluster runs one on hashicorp/raft); every node's
// log then hands the committed command to DB.ApplyCommand, which plans and
// applies it under the engine lock at max(the command's time, the last
// applied time), reading no clock, and returns the answer (ids, leases, or a
// refusal such as ErrLeaseLost) that only the submitting node passes on.
// Housekeeping (expired idempotency keys, retained completions) runs inside
// each command's apply, as it runs inside each standalone commit. Reads of a
// replicated DB wait for Replicator.ReadBarrier (the leader confirming its
// leadership) unless their context carries WithStaleReads. DB.Image and
// DB.Restore carry a replicated DB's state in the snapshot format.
package engine
