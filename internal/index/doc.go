// Package index holds docket's whole queue and key-value state in memory, in
// ordered B-trees, and the deterministic state machine that changes it.
//
// The primary records are tasks (by id), KV entries (by namespace and key),
// idempotency entries (by queue and key; a unique-by-content key is one
// too, with the states in which it blocks), queue totals (by queue), queue
// settings (by queue: paused, limits and the rate limiter's token bucket;
// conf.go), which live apart from a queue's tasks so that a queue keeps them
// while it holds none, and dependencies between tasks (by parent and
// dependent, deps.go). Every secondary index (ready, scheduled, in-flight,
// dead, completed and waiting sets per queue; expiry orders; dependencies by
// dependent and the count each waiting task still waits for) is derived from
// the primary records inside Apply and is never logged, so a replay or a
// snapshot restore rebuilds it from the records alone.
//
// Time moves tasks without a write: a stored timer whose time has come is
// ready, a stored lease past its deadline ready again or dead (Task.StateAt).
// Per queue, a due tree (duetree.go: tasks in serving order, each subtree
// knowing its earliest due time) and time-ordered indexes answer, for any
// time, which tasks are claimable in serving order (Queue.Claimable), dead
// (Queue.DeadAt), how many are in each state (Queue.CountsAt, by rank) and
// since when the oldest has been ready, in O(log n) or per item reported,
// so that neither a claim nor a read has to move every due task first.
//
// Apply also keeps each queue's Totals (enqueued, claimed, completed,
// retried, dead-lettered), counted from the transitions it applies; they
// outlive a queue's indexes for IdleTotalsTTL after its last task leaves
// (for the MaxIdleTotals queues idle least long).
//
// Store.Apply is the only way state changes. It reads no clock and no
// randomness: a Batch carries its own time, and every assertion in it (KV
// versions, task fencing tokens) is checked again before anything is applied.
// Replaying the same batches over the same starting state therefore yields
// the same state, which is what recovery relies on and what a replicated log
// needs. A batch whose assertions fail is refused with an Outcome (not an
// error) and still consumes its sequence number: a replicated log commits
// entries before anyone knows whether they apply. Decoding changes no Store
// either (a new queue is created by the Apply that puts its first task), and
// encoding is canonical (see codec.go), so WriteImage and StateHash give the
// same bytes for the same state on every node.
//
// A value above a size threshold may live in the value log instead of in
// memory: the record then holds its reference (ValueRef; valueref.go), a
// value is in line or by reference, never both, and a move (compaction)
// points a reference elsewhere only where it still is where the move
// found it. The store keeps, per value log file, the bytes its references
// hold live (Store.LiveBytes).
//
// The package does no I/O and takes no locks; the engine serialises access.
// Store.Copy returns an O(1) copy-on-write image of the primary records that
// may be read from another goroutine while the original keeps changing.
package index
