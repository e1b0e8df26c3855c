// Package index holds docket's whole queue and key-value state in memory, in
// ordered B-trees, and the deterministic state machine that changes it.
//
// The primary records are tasks (by id), KV entries (by namespace and key)
// and idempotency entries (by queue and key). Every secondary index (ready,
// scheduled, in-flight, dead and completed sets per queue; expiry orders) is
// derived from the primary records inside Apply and is never logged, so a
// replay or a snapshot restore rebuilds it from the records alone.
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
// The package does no I/O and takes no locks; the engine serialises access.
// Store.Copy returns an O(1) copy-on-write image of the primary records that
// may be read from another goroutine while the original keeps changing.
package index
