// Package bench measures docket: a load generator that drives the engine
// through named workloads and reports throughput, latency percentiles,
// fsync grouping, log bytes, memory and recovery time, plus testing.B
// benchmarks built on it.
//
// # Workloads
//
// Every workload opens a fresh DB in a temporary directory (or in memory)
// and measures only its own window; setup such as a backlog to drain is
// neither timed nor counted. Payloads are JSON objects of PayloadBytes
// (default 100) that carry a timestamp.
//
//	W1   enqueue, 1 producer, one task per commit
//	W1P  W1 pipelined: 1 producer, one task per commit, up to InFlight
//	     (default 1,024) commits in flight (EnqueueAsync); latency is from
//	     the call to the acknowledgement of durability
//	W2   enqueue, 16 producers, one task per commit
//	W3   enqueue, 1 producer, 100 tasks per commit (EnqueueBatch)
//	W4   drain N tasks: 16 workers loop Claim(1) + Complete (docket: one
//	     CompleteAndClaim per task unless SplitCommits)
//	W5   drain N tasks: 16 workers loop Claim(100) + a Complete per task
//	W6   steady state for Duration: 4 unthrottled producers, 4 workers in
//	     ClaimWait; completed/s
//	W6R  W6 with producers paced to OfferedRate (default 10,000/s); each
//	     enqueue is started on schedule whatever the previous did, so a
//	     slow queue meets the full load; end-to-end latency from the start
//	     of the enqueue call to the return of Complete
//	W7   wake-up: 1 + Parked claimers parked in ClaimWait, one enqueue,
//	     time until one of them holds the task; N trials
//	W8   recovery: N pending tasks (default 1,000,000), Open timed with a
//	     snapshot and from the log alone (snapshot directory removed)
//	W9   footprint: live heap per pending task; log bytes per enqueue,
//	     claim and complete
//	W10  backlog: N tasks (default 1,000,000) enqueued by Producers with no
//	     consumer (batches of 100), the enqueue rate, heap and RSS over
//	     each tenth; peak RSS; disk bytes; reopen time; claim latency with
//	     the backlog standing (Workers claim and complete one at a time,
//	     one enqueue per completion, for Duration, default 5 s); then the
//	     drain rate (Workers claiming ClaimBatch, default 100)
//	WF   fairness between partitions: the p99 wait (enqueue to claim) of
//	     100 partitions of 10 ready tasks beside one partition of N ready
//	     tasks (default 1,000,000), against their wait alone, in one run;
//	     target at most 2x (fair.go)
//
// W1–W6R drive the queue through the Driver interface (W1P through a
// Pipeliner, a Driver that can leave enqueues in flight), so the peers
// module (bench/peers, a module of its own so that docket never depends
// on the queues it is compared with) runs the very same code against
// goqite on SQLite and NATS JetStream. W7–W10 and WF look at docket alone.
//
// # Remote mode
//
// With Config.Remote, W1–W7 drive docket through its Go client
// (package client) instead of calling the DB (W4's and W6's completions
// that claim go through Pipeline.CompleteAndClaim; W7 waits for its
// claimers to park on the server's DB, or, against a server elsewhere,
// pauses before each enqueue and discards a trial whose claim was late): a server (package server) is started
// in the same process over a fresh DB of the run's mode and listens on a
// port of 127.0.0.1, and the client dials it, so every call crosses a
// real loopback TCP connection, HTTP and protobuf; the producers and the
// workers each have a client of their own, as they would in different
// processes. With Config.Server the runs go to a running server instead,
// each on a queue of its own. Such runs report System "remote"; Targets
// checks the remote mode's aims against in-process runs and a peer, and
// WriteRemote writes what the network costs per workload and per kind of
// call.
//
// With Config.ServeBinary the server is a `docket serve` process of
// that binary instead (StartServe), started for each run over a fresh
// directory with the run's durability and stopped at its end; such runs
// report System Serve and the server process's CPU (Result.ServerCPU).
// ServeTargets judges them against a peer's server process and against
// docket in process; WriteServeTable prints the comparison.
//
// # Figures
//
// Result carries tasks/s and calls/s; per-call latency p50/p99/p999 from
// a log-linear histogram (1.6% resolution, no allocation per sample);
// fsyncs/s and commits per fsync (group commit) from DB.Stats; log bytes
// per task; and the process's peak RSS (VmHWM, reset per run where the
// kernel allows); the CPU time of the process per task; latency per kind
// of call (enqueue, claim, complete, their batches, complete and claim). MeasureFsync gives
// the raw fsync rate of the disk, the ceiling for a single committer at
// SyncAlways.
//
// With a single synchronous caller, or a fixed number of them, durable
// throughput is bounded by the disk: each caller waits for an fsync per
// commit, so tasks/s at SyncAlways is at most callers × fsyncs/s ÷
// commits per task. Compare durable figures with the fsync rate measured
// on the same machine in the same session.
//
// # Benchmarks
//
// BenchmarkW1_SyncAlways … BenchmarkW9_InMemory run each workload with
// b.N tasks (W8 and W9 with 20,000) and report tasks/s, ns/task,
// bytes/task and more with b.ReportMetric; with -benchtime=1x they are a
// smoke test of a few seconds; BenchmarkRemoteW1_SyncAlways … run them
// in remote mode. BenchmarkEnqueueAllocs and
// BenchmarkClaimCompleteAllocs give the engine's allocations per task in
// memory. README.md says how to run everything and holds measured figures.
package bench
