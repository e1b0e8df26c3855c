// Package engine is docket's public API: an embedded, durable task and timer
// queue with a key-value store, in one directory.
//
// Open a directory (or OpenInMemory) to get a DB. Queues live in (project, scope)
// namespaces: DB.Queue returns a handle with Enqueue, EnqueueAsync, Claim,
// ClaimWait, Complete, CompleteAndClaim, Fail, Heartbeat, HeartbeatBatch,
// Snooze, Cancel, Redrive, Get, List, Counts, and Search and Bulk over the
// whole queue (search.go: a filter walked in id order, a few thousand
// records per hold of the lock);
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
// and a set of states (dockettype.UniqueKey derives it; package validate
// checks the rest).
//
// Every change goes through one commit path: under the engine's mutex a call
// validates and plans a batch of physical mutations (reading the clock once),
// appends it to the write-ahead log and applies it to the in-memory indexes
// (package index); after the mutex is released it waits until the log says
// the batch is as durable as Options.Durability promises (one fsync covers
// every batch appended before it). Where batches go is the DB's storage
// (storage.go), one for each way of opening it: a directory's log and
// snapshots (Open), nowhere (OpenInMemory), none taken (OpenReadOnly), or
// a replicated log that holds the commands before they are planned
// (OpenReplicated). Reads, refusals and commits that change
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
// loads the newest snapshot that verifies and replays the log after it
// (package recovery); Check, Repair and Salvage inspect and mend a
// directory offline (package verify).
//
// # Locks
//
// The engine's mutexes, outermost first. A lock may be taken while one
// above it is held, never the other way round; locks on one line are
// never held together.
//
//   - core.snapMu: one snapshot at a time (snapshotNow: the background
//     snapshot, Checkpoint, Close). It is the one engine lock held across
//     I/O: the log's SyncGathered (an fsync) before the image is written,
//     snapshot.Write (its fsyncs and rename), the log's TruncateFront and
//     snapshot.Prune. Under it core.mu is taken twice, briefly, and never
//     across that I/O: to take the copy-on-write image and to count the
//     snapshot. Nothing takes snapMu with core.mu held.
//   - core.mu: the commit path. It guards the store, the planner and its
//     batch, the parked ClaimWait calls' wait queues, the counters, closed
//     and failed, and the open sync round of EnqueueAsync (a syncRound is
//     joined under core.mu until settleRound takes it off, and its err is
//     set before its done is closed). Under it the engine takes only the
//     log's append lock (wal.Log.Append frames the record in memory under
//     the Log's mu: no I/O, no wait), a Deferred's mu (DeferDurable's, or
//     the one of a sync round, joined under core.mu) and
//     the Clock (ManualClock's mu); it writes to the Logger once, when the
//     engine fails. It closes channels (a woken ClaimWait's) but sends on
//     none that can block, and it is never held while waiting for the log
//     (Flush, FlushTo, Sync and SyncGathered run after it is released), for
//     a slot of Options.MaxInFlight, for the pipeline goroutine or a
//     background snapshot (Close waits for them after releasing it), nor
//     while calling the Observer, a Replicator (Submit, ReadBarrier) or a
//     lease watch's function.
//   - Deferred.mu: the commits left to a Deferred (a DeferDurable context's,
//     a sync round's, a run's); nothing is taken under it, and its wait
//     releases it before it waits for the log.
//   - parking.mu (the parked ClaimWait calls WaitParked counts), deadLog.mu
//     (the log lines about dead-lettered tasks), watchSet.mu (lease watches
//     by task), a leaseWatch's mu: none of them is taken with core.mu held
//     or while holding one of the others, and none is held while core.mu is
//     taken. Under parking.mu and deadLog.mu the Clock's lock is taken (to
//     see whether a parked call's timer fired; to start the flusher's
//     timer); deadLog.mu is held while the Logger writes, and released
//     before close waits for the flusher. watchSet.fire runs after the
//     cancellation has committed, releases watchSet.mu before it takes each
//     watch's mu, and holds that while the watch's function runs, so that
//     stop (watchSet.mu, released, then the watch's mu) waits for it.
//   - ManualClock.mu: innermost. Advance releases it before it sends on the
//     due timers' channels (each buffered, one slot).
//
// Inside the log (package wal), wmu serialises all file I/O and is held
// across writes and fsyncs; the Log's mu (appends) and smu (the group
// commit's leader and the failure) are taken under it and held for no I/O.
// Observer.Synced runs inside the log's sync with wmu held and core.mu not
// held, so it must not call the DB. A test's tap (internal/enginetest.Tap)
// runs with core.mu held.
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
// Cancel, Redrive, RedriveAll, RunNow, Reschedule, Bulk (one command per bounded walk),
// Pause, Resume, SetLimits, KV.Commit)
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
