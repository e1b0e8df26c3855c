//go:build linux

package fuzz

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
)

// maxInstructions bounds a fuzzed program, so one input stays quick.
const maxInstructions = 160

// runMetamorphic runs the program data in the configurations opsConfigs
// picks against the model (every answer compared, the whole state after
// every instruction and reopen, Verify after every reopen) and requires
// the histories to be identical.
func runMetamorphic(t *testing.T, data []byte) {
	t.Helper()
	t.Parallel() // the seed corpus side by side; no effect while fuzzing
	if len(data) == 0 {
		return
	}
	var first []string
	configs := opsConfigs(data, fuzzing())
	if !fuzzing() && testing.Short() && len(data) > shortProgram {
		configs = shortConfigs(data)
	}
	for i, rc := range configs {
		sh := &shadow{r: enginetest.NewReplica()}
		r := newRunner(t, rc, programConfig(data[0]), "", sh.tap)
		// The in-memory run compares the whole state after every call; the
		// others compare every answer and the sequence number after every
		// call and the whole state after every reopen and at the end.
		r.fullCheck = rc.mem
		r.afterOp = func(int) {
			sh.check(r)
			if r.repl != nil {
				r.repl.check(r)
			}
		}
		r.run(&program{data: data, pos: 1}, maxInstructions)
		r.finish()
		sh.check(r)
		r.db.Close()
		r.db = nil
		if i == 0 {
			first = r.hist
			continue
		}
		for k := range max(len(first), len(r.hist)) {
			var a, b string
			if k < len(first) {
				a = first[k]
			}
			if k < len(r.hist) {
				b = r.hist[k]
			}
			if a != b {
				t.Fatalf("history of %s differs from %s at call %d:\n%s: %s\n%s: %s",
					rc.name, configs[0].name, k, configs[0].name, a, rc.name, b)
			}
		}
	}
}

// shortProgram is the length past which, with -short, a seed runs in
// three configurations (shortConfigs), not eight: the generated workloads
// of opsSeeds (961 bytes), which took three quarters of FuzzOps's time in
// eight, and not the written seeds (at most 193 bytes), each of which
// shows one feature in every configuration.
const shortProgram = 400

// shortConfigs is the configurations a long seed runs in with -short: in
// memory (the whole state compared after every call), replicated (the
// only one whose batches go through a log of their own, which the other
// seeds reach less) and one on disk picked by a hash of the program.
func shortConfigs(data []byte) []runConfig {
	h := fnv.New32a()
	h.Write(data)
	return []runConfig{metamorphic[0], metamorphic[1], metamorphic[2+int(h.Sum32()%uint32(len(metamorphic)-2))]}
}

// opsConfigs is the configurations a program runs in: every one of
// metamorphic when the seeds and the corpus run as tests; while fuzzing,
// the in-memory one (which compares the whole state after every call) and
// one other, picked by a hash of the program, so that a new input costs
// two runs instead of eight and the fuzzer tries four times as many,
// every configuration still getting its share of them.
func opsConfigs(data []byte, fuzzing bool) []runConfig {
	if !fuzzing {
		return metamorphic
	}
	h := fnv.New32a()
	h.Write(data)
	return []runConfig{metamorphic[0], metamorphic[1+int(h.Sum32()%uint32(len(metamorphic)-1))]}
}

// fuzzing reports whether the test binary was asked to fuzz (-test.fuzz),
// rather than to run the seeds and the corpus as tests.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// shadow is a follower: every batch the DB logs reaches it through
// enginetest.Tap as the logged bytes, which it decodes and applies to a
// fresh replica. After every instruction its state must equal the leader's, by
// hash and byte for byte: apply is deterministic and needs nothing but the
// bytes. It keeps following across reopens, as the leader's next batch
// follows its last.
type shadow struct {
	r     enginetest.Replica
	err   error
	state bytes.Buffer
	lead  bytes.Buffer
}

func (s *shadow) tap(o *engine.Options) {
	enginetest.Tap(o, func(seq uint64, data []byte) {
		if s.err != nil {
			return
		}
		if _, err := s.r.Apply(seq, data); err != nil {
			s.err = fmt.Errorf("follower, batch %d: %w", seq, err)
		}
	})
}

func (s *shadow) check(r *runner) {
	r.tb.Helper()
	if s.err != nil {
		r.fatalf("%v", s.err)
	}
	if r.db == nil {
		return
	}
	s.state.Reset()
	s.lead.Reset()
	if err := r.db.EncodeState(&s.lead); err != nil {
		r.fatalf("leader state: %v", err)
	}
	if err := s.r.EncodeState(&s.state); err != nil {
		r.fatalf("follower state: %v", err)
	}
	lh, lerr := r.db.StateHash()
	fh, ferr := s.r.StateHash()
	if lerr != nil || ferr != nil || lh != fh || !bytes.Equal(s.lead.Bytes(), s.state.Bytes()) {
		r.fatalf("follower at batch %d differs from the leader (hash %x, follower %x; %v %v)",
			s.r.Seq(), lh[:8], fh[:8], lerr, ferr)
	}
	if err := s.r.Verify(); err != nil {
		r.fatalf("follower: %v", err)
	}
}

// ins assembles one instruction.
func ins(code int, params ...byte) []byte {
	b := make([]byte, opSize)
	b[0] = byte(code)
	copy(b[1:], params)
	return b
}

func asm(cfg byte, instructions ...[]byte) []byte {
	out := []byte{cfg}
	for _, in := range instructions {
		out = append(out, in...)
	}
	return out
}

// opsSeeds are programs aimed at the rules most likely to go wrong, plus
// random ones from the usual mix.
func opsSeeds() [][]byte {
	seeds := [][]byte{
		// Timers and priorities: due timers promoted and served by priority.
		asm(0,
			ins(opEnqueue, 0, 0x04, 0, 1), ins(opEnqueue, 0, 0x38, 0, 1), ins(opEnqueue, 0, 0x0c, 0, 2),
			ins(opEnqueue, 0, 0x20, 0, 1), ins(opClaim, 0, 0, 2, 3), ins(opAdvance, 1),
			ins(opClaim, 0, 1, 2, 3), ins(opAdvance, 4), ins(opClaim, 0, 2, 2, 3), ins(opComplete, 0, 0),
			ins(opComplete, 1, 1), ins(opReopen), ins(opClaim, 0, 3, 2, 3)),
		// Lease expiry: reclaimed at once with attempts left, dead without;
		// the zombie's late calls refused.
		asm(0,
			ins(opEnqueue, 1, 0, 0x04, 1), ins(opEnqueue, 1, 0, 0x0c, 1), ins(opClaim, 1, 0, 0, 3),
			ins(opAdvance, 2), ins(opClaim, 1, 1, 2, 1), ins(opComplete, 0xc0, 0), ins(opFail, 0xc1, 1),
			ins(opHeartbeat, 0xc0, 1), ins(opSnooze, 0xc1, 0), ins(opForged, 0, 0), ins(opForged, 0, 0x09),
			ins(opReopen), ins(opComplete, 0, 1), ins(opRead, 0, 1, 0x80)),
		// Backoff: retries at base, 2*base, 4*base capped, then dead; redrive.
		asm(0,
			ins(opEnqueue, 2, 0, 0x1c, 1), ins(opClaim, 2, 0, 2, 0), ins(opFail, 0, 0x08), ins(opAdvance, 1),
			ins(opClaim, 2, 0, 2, 0), ins(opFail, 0, 0x08), ins(opAdvance, 6), ins(opClaim, 2, 0, 2, 0),
			ins(opFail, 0, 0x04), ins(opAdvance, 3), ins(opClaim, 2, 0, 2, 0), ins(opFail, 0, 0), ins(opReopen),
			ins(opRedrive, 2, 0, 0x80), ins(opClaim, 2, 0, 2, 0), ins(opFail, 0, 1), ins(opRedrive, 2, 1),
			ins(opRead, 1, 2)),
		// Idempotency with a 90 s TTL: deduplicated while the task lives and
		// for the TTL after it ends; expired keys pruned at the next commit.
		asm(0x01,
			ins(opEnqueue, 0, 0, 0x01, 1), ins(opEnqueue, 0, 0, 0x01, 1), ins(opBatch, 0, 0x40, 0x40, 0x80),
			ins(opClaim, 0, 0, 2, 3), ins(opComplete, 0, 0), ins(opEnqueue, 0, 0, 0x01, 1), ins(opAdvance, 4),
			ins(opKV, 0, 1), ins(opEnqueue, 0, 0, 0x01, 1), ins(opReopen), ins(opEnqueue, 0, 0, 0x01, 1),
			ins(opCancel, 0, 0x80), ins(opEnqueue, 0, 0, 0x01, 1)),
		// Retention: completed kept with its result, pruned after an hour.
		asm(0x0c,
			ins(opEnqueue, 3, 0, 0x02, 1), ins(opClaim, 3, 0, 2, 3), ins(opComplete, 0, 1), ins(opCheckpoint),
			ins(opAdvance, 2), ins(opCancel, 3, 0x80), ins(opEnqueue, 3, 0, 0, 1), ins(opClaim, 3, 0, 2, 3),
			ins(opComplete, 0, 0x01), ins(opAdvance, 5), ins(opKV, 1, 0), ins(opReopen), ins(opRead, 1, 3)),
		// Outbox and KV: enqueue with writes and assertions, all or nothing;
		// versions are batch sequence numbers; scans by prefix and range.
		asm(0,
			ins(opKV, 0, 0x00, 0x08, 0x10), ins(opEnqueue, 0, 0, 0, 1, 2, 0x04, 0x00), ins(opEnqueue, 0, 0, 0, 1, 2, 0x0c, 0x08),
			ins(opKV, 0x02, 0x02, 0x42, 0x01), ins(opKV, 0x04, 0x0a, 0x13, 0x05), ins(opClaim, 0, 0, 2, 3),
			ins(opComplete, 0, 0x0f, 0x00, 0x19, 0x03, 0x06), ins(opReopen), ins(opRead, 3, 0, 0x11),
			ins(opRead, 3, 0, 0x22), ins(opRead, 2, 0, 0x01)),
		// Dependencies: tasks waiting on a parent that dies by its lease
		// (stored dead by the next commit's housekeeping), on one that is
		// redriven and completes, with each policy; a batch whose tasks
		// wait on earlier ones; follow-ups waiting on their parent and on
		// each other; reopened in the middle.
		asm(0,
			ins(opEnqueue, 0, 0, 0x04, 1), ins(opEnqueue, 1, 0, 0, 1),
			ins(opDepend, 0x10, 0x80, 0x81, 0, 0, 0, 0x00),
			ins(opDepend, 0x05, 0x80, 0, 0, 0, 0, 0x03), ins(opDepend, 0x08, 0x80, 0, 0, 0x40, 0, 0x85),
			ins(opDepend, 0x00, 0x7f, 0, 0, 0, 0, 0), ins(opRead, 1, 0), ins(opRead, 0, 0, 0x80),
			ins(opClaim, 0, 0, 0, 0), ins(opAdvance, 1), ins(opKV, 0, 1), ins(opRead, 1, 0),
			ins(opCheckpoint), ins(opRedrive, 0, 0, 0x80), ins(opClaim, 0, 0, 2, 1), ins(opComplete, 0, 0x48, 0, 0, 0, 2, 0x80),
			ins(opReopen), ins(opClaim, 1, 0, 2, 3), ins(opComplete, 0, 0), ins(opClaim, 0, 0, 2, 3),
			ins(opFail, 0, 1), ins(opCancel, 0, 0x80), ins(opRead, 1, 1), ins(opClaim, 4, 0, 2, 3)),
		// Dependencies and the queue controls: tasks (one of them unique,
		// enqueued twice) released by a completion into a paused queue
		// stay unclaimed through a reopen, an in-flight bound holds them
		// back after the resume.
		asm(0,
			ins(opControl, 0, 1), ins(opEnqueue, 0, 0, 0x04, 1),
			ins(opDepend, 0x01, 0x80, 0, 0, 0, 0, 0x01), ins(opDepend, 0x01, 0x80, 0, 0, 0x03, 0, 0),
			ins(opDepend, 0x01, 0x80, 0, 0, 0x03, 0, 0), ins(opClaim, 1, 0, 2, 3), ins(opRead, 1, 1),
			ins(opClaim, 0, 0, 2, 3), ins(opComplete, 0, 0), ins(opRead, 1, 1), ins(opClaim, 1, 0, 2, 3),
			ins(opControl, 2, 1, 1), ins(opReopen), ins(opDepend, 0x01, 0x80, 0, 0, 0x03, 0, 0),
			ins(opControl, 1, 1), ins(opClaim, 1, 0, 2, 3), ins(opRead, 1, 1), ins(opControl, 3, 1)),
		// Partitions: claims take turns between partitions a, b and the
		// default one, priority within each; a bound of one per partition
		// passes over those at it; a completion that claims frees its
		// partition's slot; through a reopen and expired leases.
		asm(0,
			ins(opEnqueue, 0, 0, 0, 0x10), ins(opEnqueue, 0, 0x20, 0, 0x10), ins(opEnqueue, 0, 0, 0, 0x18),
			ins(opEnqueue, 0, 0, 0, 0), ins(opEnqueue, 0, 0, 0, 0x11), ins(opClaim, 0, 0, 2, 3),
			ins(opControl, 2, 0, 0x08), ins(opEnqueue, 0, 0, 0, 0x10), ins(opEnqueue, 0, 0, 0, 0x18),
			ins(opClaim, 0, 1, 2, 3), ins(opComplete, 0, 0x20, 0, 0, 0, 0, 0x38), ins(opControl, 3, 0),
			ins(opReopen), ins(opClaim, 0, 0, 2, 3), ins(opAdvance, 2), ins(opClaim, 0, 0, 2, 3),
			ins(opControl, 2, 0, 0x18), ins(opClaim, 0, 2, 2, 3), ins(opRead, 1, 0)),
		// Partition rate limits: each partition's bucket (1 a second, then 2
		// a second with bursts of 3 and a bound of one) passes over those out
		// of tokens; a completion that claims takes tokens too; through a
		// reopen and time passing.
		asm(0,
			ins(opEnqueue, 0, 0, 0, 0x10), ins(opEnqueue, 0, 0, 0, 0x10), ins(opEnqueue, 0, 0, 0, 0x18),
			ins(opEnqueue, 0, 0, 0, 0x18), ins(opEnqueue, 0, 0, 0, 0), ins(opEnqueue, 0, 0, 0, 0x11),
			ins(opControl, 2, 0, 0x20), ins(opClaim, 0, 0, 2, 3), ins(opClaim, 0, 0, 2, 3), ins(opReopen),
			ins(opClaim, 0, 0, 2, 3), ins(opAdvance, 1), ins(opClaim, 0, 0, 2, 3),
			ins(opComplete, 0, 0x20, 0, 0, 0, 0, 0x38), ins(opControl, 2, 0, 0xe8), ins(opControl, 3, 0),
			ins(opClaim, 0, 1, 2, 3), ins(opAdvance, 2), ins(opCheckpoint), ins(opClaim, 0, 0, 2, 3), ins(opRead, 1, 0)),
		// A completion that claims releases the tasks waiting for it in its
		// commit, the claim taking none of them (nor the follow-up); the
		// next claim does; a completion that claims releases a sibling.
		asm(0,
			ins(opEnqueue, 0, 0, 0, 1), ins(opDepend, 0x00, 0x80, 0, 0, 0, 0, 0x01), ins(opClaim, 0, 0, 2, 3),
			ins(opComplete, 0, 0x28, 0, 0, 0, 0, 0x30), ins(opRead, 1, 0), ins(opClaim, 0, 0, 2, 3),
			ins(opComplete, 0, 0x20, 0, 0, 0, 0, 0x30), ins(opRead, 1, 0), ins(opReopen),
			ins(opComplete, 0, 0x20, 0, 0, 0, 0, 0x30), ins(opRead, 1, 0)),
		// Pipelined calls: enqueues in flight, completions that claim the
		// next tasks, heartbeats of several leases in one commit (stale and
		// foreign ones refused).
		asm(0,
			ins(opEnqueue, 0, 0, 0, 1, 0xe0), ins(opEnqueue, 0, 0x04, 0, 1, 0xa0), ins(opClaim, 0, 0, 2, 0),
			ins(opComplete, 0, 0x20, 0, 0, 0, 0, 0x25), ins(opHeartbeat, 0, 0x72, 0x01, 0x02, 0x03),
			ins(opAdvance, 3), ins(opComplete, 0xc0, 0x21, 0, 0, 0, 0, 0x3f), ins(opHeartbeat, 0xc0, 0x31, 0xc1),
			ins(opEnqueue, 1, 0, 0x01, 1, 0xe0), ins(opClaim, 1, 0, 2, 0), ins(opComplete, 0, 0x39, 0, 0, 0x02, 0, 0x10),
			ins(opReopen), ins(opHeartbeat, 0, 0x70, 0xc0, 0xc1, 0xc2), ins(opRead, 0, 1, 0x80)),
		// Run now: a timer and a retry waiting out its backoff become
		// ready, a ready task is left as it is, one in flight is refused,
		// an unknown one not found; leases completed in one batch.
		asm(0,
			ins(opEnqueue, 0, 0x0c, 0x04, 1), ins(opEnqueue, 0, 0x00, 0x08, 1), ins(opClaim, 0, 0, 2, 3),
			ins(opFail, 0, 0), ins(opRedrive, 0, 0x06, 0x80), ins(opRedrive, 0, 0x06, 0x81),
			ins(opRedrive, 0, 0x06, 0x80), ins(opRedrive, 0, 0x0e, 0x80), ins(opClaim, 0, 0, 2, 3),
			ins(opRedrive, 0, 0x0e, 0x80), ins(opRedrive, 2, 0x0e, 0x05), ins(opReopen),
			ins(opHeartbeat, 0xc0, 0x3c, 0xc1), ins(opRead, 1, 0)),
		// Reschedule: timers moved later, to before now (ready now), by
		// priority alone; nothing to change and a time before the epoch
		// refused; a task in flight refused; claims follow the new order.
		asm(0,
			ins(opEnqueue, 0, 0x0c, 0x04, 1), ins(opEnqueue, 0, 0x0c, 0x04, 1), ins(opEnqueue, 0, 0x00, 0x08, 1),
			ins(opRedrive, 0, 0x24, 0x80), ins(opRedrive, 0, 0x94, 0x83), ins(opRedrive, 0, 0xb4, 0x82),
			ins(opRedrive, 0, 0x74, 0x80), ins(opRedrive, 0, 0x34, 0x80), ins(opClaim, 0, 0, 2, 3),
			ins(opRedrive, 0, 0x9c, 0x00), ins(opRedrive, 0, 0x9c, 0x01), ins(opRedrive, 0, 0x9c, 0x02),
			ins(opAdvance, 2), ins(opRedrive, 0, 0xac, 0x01), ins(opReopen), ins(opClaim, 0, 0, 2, 3),
			ins(opRead, 1, 0)),
		// Every invalid call.
		asm(0,
			ins(opInvalid, 0), ins(opInvalid, 1), ins(opInvalid, 2), ins(opInvalid, 3), ins(opInvalid, 4),
			ins(opInvalid, 5), ins(opInvalid, 6), ins(opInvalid, 7), ins(opInvalid, 8), ins(opInvalid, 9),
			ins(opInvalid, 10), ins(opInvalid, 11), ins(opForged, 0, 0x20), ins(opForged, 0, 0x30)),
	}
	for s := range uint64(6) {
		seeds = append(seeds, genProgram(rand.New(rand.NewPCG(s, 99)), 120, workload, byte(s*37)))
	}
	return seeds
}

// FuzzOps decodes a program of calls from its input (see program_test.go
// for the instruction set) and runs it in memory and under every
// durability mode with tiny and default snapshot thresholds (metamorphic;
// while fuzzing, in memory and one other, see opsConfigs):
// every answer must be the model's, the whole state must be the model's
// after every reopen (and, in memory, after every call), Verify must pass
// after every reopen, and the histories must be identical. A shadow
// follower applies every logged batch to a fresh Replica and must match the
// leader's state hash and bytes after every instruction. Its seeds run as
// tests.
func FuzzOps(f *testing.F) {
	for _, s := range opsSeeds() {
		f.Add(s)
	}
	f.Fuzz(runMetamorphic)
}

// errOnly drops a call's result and keeps its error.
func errOnly[T any](_ T, err error) error { return err }

// hb heartbeats a copy of l and returns the new deadline.
func hb(ctx context.Context, q engine.Queue, l engine.Lease, extend time.Duration, progress []byte) (time.Time, error) {
	if err := q.Heartbeat(ctx, &l, extend, progress); err != nil {
		return time.Time{}, err
	}
	return l.Deadline, nil
}

// openDB opens dir, or an in-memory DB when dir is empty.
func openDB(dir string, opts engine.Options) (*engine.DB, error) {
	if dir == "" {
		return engine.OpenInMemory(opts)
	}
	return engine.Open(dir, withFS(dir, opts))
}

// TestOpsConfigs: the seeds and the corpus run in every configuration; a
// fuzzed input runs in memory (the whole state compared after every call)
// and in one other, and across inputs every other one is picked.
func TestOpsConfigs(t *testing.T) {
	if got := opsConfigs([]byte{1, 2, 3}, false); len(got) != len(metamorphic) {
		t.Fatalf("as a test, %d configurations of %d", len(got), len(metamorphic))
	}
	picked := map[string]bool{}
	for i := range 200 {
		data := []byte{byte(i), byte(i >> 8), 7}
		got := opsConfigs(data, true)
		if len(got) != 2 || got[0].name != metamorphic[0].name || got[1].name == metamorphic[0].name {
			t.Fatalf("fuzzing %x: %v", data, got)
		}
		if again := opsConfigs(data, true); again[1].name != got[1].name {
			t.Fatalf("fuzzing %x: %s, then %s", data, got[1].name, again[1].name)
		}
		picked[got[1].name] = true
	}
	if len(picked) != len(metamorphic)-1 {
		t.Fatalf("200 inputs picked %d of the %d other configurations: %v", len(picked), len(metamorphic)-1, picked)
	}
}
