// Package cluster replicates docket through github.com/hashicorp/raft: a
// Node is a raft server whose state machine is a docket DB, so a cluster of
// three keeps working, and loses no acknowledged task, when one dies.
//
// # Commit path
//
// A write on a Node is validated there, then its DB (opened with
// engine.OpenReplicated) hands the encoded command, stamped with the
// leader's clock and entropy, to Node.Submit, which calls raft.Apply. Raft
// batches concurrent entries into one StoreLogs (one fsync) and one
// replication round. Once a majority holds the entry, every node's FSM
// plans and applies it with DB.ApplyCommand under the engine lock, at
// max(entry time, last applied time), and the leader's answer (ids, leases,
// or a refusal such as engine.ErrLeaseLost) returns to the caller. A node
// that is not the leader refuses writes with a *NotLeaderError (matching
// engine.ErrNotLeader) that names the leader; a write whose leader lost its
// leadership before it committed fails with engine.ErrOutcomeUnknown.
// The commit index a leader's AppendEntries carries is bounded by the last
// entry that request lets the follower check against the leader's log, so
// that a node that once led alone never applies the entries of that term
// the majority replaced (hashicorp/raft's follower would, up to its own
// last index).
//
// # A panic while applying
//
// A panic while a node's FSM applies an entry (a bug in planning or
// applying a command) stops the node's process, with a panic naming the
// entry: the DB's state may be half changed (the engine fails itself,
// engine.ErrFailed, on a panic while applying), and the node must not
// apply later entries on top of it, serve reads from it or snapshot it.
// Raft has already made the entry durable, so nothing acknowledged is
// lost: a restarted node restores its newest snapshot and replays the log
// after it, applying the entry again on a state rebuilt whole. An entry
// that panics wherever it applies stops every node that applies it, at
// every restart: the cluster stops taking writes rather than diverge.
//
// # Reads
//
// Reads are linearizable: served by the leader once it has applied every
// entry of earlier terms (a barrier it commits when it becomes leader) and
// a quorum has confirmed its leadership since the read began (raft's
// VerifyLeader). A read whose context carries engine.WithStaleReads is
// served from the local state of any node at once.
//
// # Storage
//
// The raft log is a LogStore on docket's wal (one record per entry, CRC
// framed, torn tails cut), behind raft's LogCache; raft's term and vote
// live in a StableStore (one fsynced file, replaced atomically); snapshots
// are raft's file snapshot store holding docket's snapshot format, written
// from a copy-on-write image while commands keep applying. The DB itself
// keeps nothing on disk: a restarted node restores the newest snapshot and
// replays the log after it. A Node's directory holds
//
//	LOCK            held while a Node runs on it
//	raft/log/       the raft log (wal segments)
//	raft/stable     term, vote
//	raft/snapshots/ raft's snapshot store
//
// # Membership
//
// Start with Config.Bootstrap founds a cluster of one; the leader's Join
// adds a node (AddVoter) and returns once the node has acknowledged the
// configuration that adds it (the transport records what each follower
// acknowledges; raft keeps its match indexes to itself), and Remove drops
// one. Close on the leader first
// hands its leadership to an up-to-date follower, so writes resume at once
// rather than after an election timeout. LANConfig documents the raft
// timeouts a Node runs with.
//
// Subpackage clustertest runs clusters of Nodes in tests, with a transport
// that cuts, partitions, drops and delays raft's RPCs on command.
package cluster
