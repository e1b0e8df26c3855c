package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/docketdb/docket/engine"
)

// Workloads names the workloads Run accepts, in the order they are
// usually run. W1–W6R drive a queue through the Driver interface (W1P a
// Driver that is also a Pipeliner), so the peers module runs them against
// other queues too; W7–W10 and WF (fairness between partitions, fair.go)
// look inside docket and run against it alone.
var Workloads = []string{"W1", "W1P", "W2", "W3", "W4", "W5", "W6", "W6R", "W7", "W8", "W9", "W10", "WF"}

// DriverWorkloads are the workloads RunDriver accepts.
var DriverWorkloads = []string{"W1", "W2", "W3", "W4", "W5", "W6", "W6R"}

// Workload shapes that are not parameters of Config.
const (
	// EnqueueBatchSize is how many tasks one W3 commit enqueues.
	EnqueueBatchSize = 100
	// setupBatch is how many tasks one commit enqueues while a workload
	// builds its starting state (W4, W5, W9); that part is not measured.
	setupBatch = 1000
	// minPayload is the smallest payload: it has to hold the timestamp.
	minPayload = 34
	// lease is long enough that no task is ever reclaimed during a run.
	lease = 10 * time.Minute
)

// Config describes one run of one workload. Zero fields take the
// workload's default, listed with each field.
type Config struct {
	// Workload is one of Workloads ("W1" … "W9").
	Workload string
	// N is the number of tasks: enqueued (W1–W3), drained (W4, W5), trials
	// (W7), held (W8, W9). Default 100,000; W7 10,000; W8 1,000,000. For W6
	// and W6R it is optional and ends the run once N tasks have completed,
	// if that comes before Duration.
	N int
	// Duration is how long W6 and W6R run. Default 10 s.
	Duration time.Duration
	// Producers enqueue concurrently. Default 1 (W1, W3, W8's build), 16
	// (W2), 4 (W6, W6R). In W6R each is a pacer that starts every enqueue
	// on time without waiting for the previous one to return.
	Producers int
	// Workers claim and complete concurrently. Default 16 (W4, W5), 4 (W6,
	// W6R).
	Workers int
	// ClaimBatch is the most tasks one claim leases. Default 1 (W4, W6,
	// W6R) or 100 (W5). Each leased task is completed with its own call.
	ClaimBatch int
	// PayloadBytes is the size of each task's JSON payload. Default 100;
	// at least 34.
	PayloadBytes int
	// Durability is docket's sync mode when InMemory is false.
	Durability engine.Durability
	// ValueThreshold is docket's Options.ValueThreshold: the size from
	// which a payload is kept in the value log on disk. Default 0: the
	// engine's (1 KiB); negative: every payload in memory.
	ValueThreshold int
	// MaxMemory is docket's Options.MaxMemory, its memory budget. Default
	// 0: the engine's (a quarter of the machine's memory); negative: none.
	MaxMemory int64
	// HeapProfile, if set, is a file W10 writes the heap's profile to
	// once the backlog is full (go tool pprof reads it).
	HeapProfile string
	// ReopenProfile, if set, is a file W10 writes a CPU profile of its
	// reopen to.
	ReopenProfile string
	// StandingProfile and StandingTrace, if set, are files W10 writes a
	// CPU profile and an execution trace (go tool trace) of its standing
	// phase to.
	StandingProfile string
	StandingTrace   string
	// StandingRate, if set, paces W10's standing phase to this many
	// claims a second in all (an open load: each claim's latency counts
	// from when the schedule asked for it); 0 runs it as fast as the
	// workers go (a closed load, where a claim also waits behind the
	// others').
	StandingRate int
	// InMemory runs docket with no directory (not W8).
	InMemory bool
	// Dir is where the run's data directory is made (and removed after).
	// Default os.TempDir().
	Dir string
	// OfferedRate is W6R's total enqueue rate, tasks per second. Default
	// 10,000.
	OfferedRate int
	// Progress, if set, receives a line about every 500 ms while the run
	// goes on.
	Progress io.Writer
	// progressEvery, if set, is the interval of the Progress lines (tests).
	progressEvery time.Duration
	// InFlight is how many W1P enqueues may be in flight at once. Default
	// 1,024.
	InFlight int
	// Parked is how many more claimers W7 keeps parked on the queue beside
	// the one a trial needs; whichever of them is woken takes the task.
	// Default 0.
	Parked int
	// SplitCommits makes the W4, W6 and W6R workers complete and claim in
	// two commits, as a driver without CompleteAndClaim does; by default a
	// docket worker with a claim of 1 takes its next task in the commit
	// that completes the last.
	SplitCommits bool

	// Remote drives docket through its Go client (package client) over a
	// TCP connection to a server on 127.0.0.1, started in this process
	// over a fresh DB of the config's mode (in memory, or in a directory
	// with Durability), instead of calling the DB directly. W8, W9 and WF
	// look inside the engine: they run in process only. W1P pipelines
	// through the client's EnqueueAsync.
	Remote bool
	// NoCoalesce, with Remote, has the client send every call as a
	// unary RPC of its own (client.TransportUnary) instead of on a
	// session; such runs report System RemoteSingle.
	NoCoalesce bool
	// Server, if set, is the URL of a running docket server to drive
	// instead of one started here (it implies Remote); Token is its
	// bearer token. Each run uses a queue of its own, and its mode is
	// "server": the server's durability is its own.
	Server, Token string
	// ServeBinary, with Remote, is a docket binary whose `serve` each run
	// starts as a separate process (StartServe) over a fresh data
	// directory with the run's durability, on a fresh port of 127.0.0.1,
	// instead of a server in this process; it is stopped at the end of the
	// run. Such runs report System Serve, and their CPU per task is the
	// server process's beside this one's (Result.ServerCPU).
	ServeBinary string
}

// Mode names the durability the config selects: "memory", or docket's
// Durability ("always", "interval", "never").
func (c Config) Mode() string {
	if c.Server != "" {
		return "server"
	}
	if c.InMemory {
		return "memory"
	}
	return c.Durability.String()
}

// withDefaults validates c and fills in the workload's defaults.
func (c Config) withDefaults(allowed []string) (Config, error) {
	c.Workload = strings.ToUpper(c.Workload)
	if !slices.Contains(allowed, c.Workload) {
		return c, fmt.Errorf("bench: unknown workload %q (want one of %s)", c.Workload, strings.Join(allowed, ", "))
	}
	if c.N < 0 || c.Duration < 0 || c.Producers < 0 || c.Workers < 0 || c.ClaimBatch < 0 ||
		c.PayloadBytes < 0 || c.OfferedRate < 0 || c.InFlight < 0 || c.Parked < 0 || c.StandingRate < 0 {
		return c, fmt.Errorf("bench: negative setting in %+v", c)
	}
	if c.ClaimBatch > engine.MaxBatch {
		return c, fmt.Errorf("bench: claim batch %d over the limit of %d", c.ClaimBatch, engine.MaxBatch)
	}
	steady := c.Workload == "W6" || c.Workload == "W6R"
	if c.N == 0 && !steady {
		switch c.Workload {
		case "W7":
			c.N = 10_000
		case "W8", "W10", "WF":
			c.N = 1_000_000
		default:
			c.N = 100_000
		}
	}
	if c.Duration == 0 && steady {
		c.Duration = 10 * time.Second
	}
	if c.Producers == 0 {
		switch c.Workload {
		case "W2":
			c.Producers = 16
		case "W6", "W6R", "W10":
			c.Producers = 4
		default:
			c.Producers = 1
		}
	}
	if c.Workers == 0 {
		switch c.Workload {
		case "W4", "W5", "W10":
			c.Workers = 16
		case "W6", "W6R", "WF":
			c.Workers = 4
		default:
			c.Workers = 1
		}
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = 1
		switch c.Workload {
		case "W5", "W10":
			c.ClaimBatch = 100
		case "WF":
			c.ClaimBatch = 10
		}
	}
	if c.PayloadBytes == 0 {
		c.PayloadBytes = 100
	}
	c.PayloadBytes = max(c.PayloadBytes, minPayload)
	if c.OfferedRate == 0 {
		c.OfferedRate = 10_000
	}
	if c.InFlight == 0 {
		c.InFlight = engine.DefaultMaxInFlight
	}
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if c.InMemory && (c.Workload == "W8" || c.Workload == "W10") {
		return c, fmt.Errorf("bench: %s measures recovery from disk and cannot run in memory", c.Workload)
	}
	if c.Server != "" {
		c.Remote = true
	}
	if c.Remote && (c.Workload == "W8" || c.Workload == "W9" || c.Workload == "W10" || c.Workload == "WF") {
		return c, fmt.Errorf("bench: %s looks inside the engine and cannot run remote: %w", c.Workload, engine.ErrInvalid)
	}
	if c.ServeBinary != "" {
		if c.Server != "" || c.InMemory {
			return c, fmt.Errorf("bench: a docket serve process (ServeBinary) serves a fresh directory of its own: not with Server or InMemory: %w", engine.ErrInvalid)
		}
		c.Remote = true
	}
	if c.Durability < engine.SyncAlways || c.Durability > engine.SyncNever {
		return c, fmt.Errorf("bench: durability %d", c.Durability)
	}
	return c, nil
}

// payloadStamp is where a payload's timestamp lives: 19 digits at a fixed
// offset, so reading it back needs no JSON decoding.
const (
	stampAt  = len(`{"t":"`)
	stampLen = 19
)

// makePayload returns a JSON object of exactly size bytes (at least
// minPayload) that carries stamp, a Unix time in nanoseconds:
// {"t":"1732900000000000000","p":"xxxx…"}.
func makePayload(size int, stamp int64) []byte {
	size = max(size, minPayload)
	b := make([]byte, 0, size)
	b = append(b, `{"t":"`...)
	b = appendStamp(b, stamp)
	b = append(b, `","p":"`...)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

func appendStamp(b []byte, stamp int64) []byte {
	var d [stampLen]byte
	u := uint64(max(stamp, 0))
	for i := stampLen - 1; i >= 0; i-- {
		d[i] = byte('0' + u%10)
		u /= 10
	}
	return append(b, d[:]...)
}

// stampOf reads back the timestamp makePayload wrote; 0 if there is none.
func stampOf(p []byte) int64 {
	if len(p) < stampAt+stampLen {
		return 0
	}
	var v int64
	for _, c := range p[stampAt : stampAt+stampLen] {
		if c < '0' || c > '9' {
			return 0
		}
		v = v*10 + int64(c-'0')
	}
	return v
}
