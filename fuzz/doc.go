// Package fuzz holds docket's black-box correctness and crash-safety tests.
// They use only the public API of engine and read the on-disk formats as
// wal/doc.go and snapshot/doc.go specify them; nothing reaches into engine
// internals.
//
// model.go is the reference: a plain-maps implementation of what every call
// observably does, down to the batch sequence numbers KV versions expose,
// with unit tests of its own (model_test.go). The tests run the engine and
// the model side by side:
//
//   - FuzzOps decodes bytes into a program of calls (program_test.go has
//     the instruction set: enqueue with timers, priorities, idempotency keys
//     and transactional KV ops; batch enqueue; claims; complete with
//     follow-ups, fail, heartbeat and snooze with current, stale and forged
//     leases; cancel, redrive, KV commits and reads, clock moves, checkpoints,
//     reopens, invalid calls) and runs it in memory and under every
//     durability mode with tiny and default snapshot thresholds. Every answer
//     must be the model's, the whole state the model's after every reopen,
//     and the histories identical.
//   - crash_test.go records a run under SyncAlways, copying the data
//     directory at every failpoint the log and snapshot code pass and after
//     every call, and reopens copies cut at every byte the log was written
//     with (then runs more calls, crashes and recovers again), with zeroed,
//     garbage and duplicated tails, at every failpoint, and as a power loss
//     would leave them (unsynced data lost whole, in part or zeroed;
//     directory entries not yet fsynced missing). The recovered state must
//     be exactly what the valid records hold, and the model's after that
//     prefix of batches, which includes every acknowledged one.
//   - flip_test.go flips single bits in log segments and snapshots: Open
//     refuses with ErrCorrupt naming the file and offset, or recovers the
//     model's state, all of it or all but a damaged last record.
//   - failpoint_test.go fails every failpoint at every time a workload
//     passes it, one fsync under group commit, and writes on a full disk:
//     fail-stop with ErrFailed, never a success after a failed fsync, and
//     recovery with every acknowledged call.
//   - durability_test.go checks that no answer (a deduplicated enqueue, an
//     assertion-only commit, a read, a refusal) rests on a commit a crash
//     can still take back, and (on the strict memory file system, crashed
//     after Open and after every acknowledged write) that a data directory
//     Open creates is itself made durable.
//   - kill_test.go runs producers and workers in a child process killed with
//     SIGKILL at random moments and checks the queue as a whole: nothing
//     acknowledged lost, nothing never enqueued present, nothing completed
//     twice, tokens and attempts only increasing, dead tasks staying dead.
//   - fencing_test.go has workers stall past their leases: no stale commit
//     is ever accepted.
//
// Long runs are behind flags:
//
//	go test ./fuzz -run TestKillLoop -kill-cycles=1000
//	go test ./fuzz -run TestCrashEveryByte -crash-continue-every=1
//	go test ./fuzz -run 'TestCrash|TestPowerLoss' -crash-seed=7 -crash-ops=1000
//	go test ./fuzz -run TestBitFlips -flip-every=1
//	go test ./fuzz -run '^$' -fuzz '^FuzzOps$' -fuzztime=10m
//
// Scratch directories live on a file system in memory (internal/vfs),
// because the crash tests open, copy and cut thousands of directories;
// the kill tests run on a real disk. TestDiskFull mounts a small tmpfs of
// its own and skips where that is not permitted.
package fuzz
