package engine

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/docketdb/docket/internal/index"
)

// sampleCommands has one command of every operation, with every optional
// field set somewhere, as the replicated path stamps them.
func sampleCommands() []command {
	var cmds []command
	for _, v := range versionedSamples() {
		cmds = append(cmds, v.cmd)
	}
	return cmds
}

// versionedSample is a sample command and the version it is written in.
type versionedSample struct {
	ver uint64
	cmd command
}

func versionedSamples() []versionedSample {
	full := spec{payload: []byte(`{"a":1}`), kind: "k", delay: 5, at: 1_900_000_000_000_000, prio: -3,
		maxAttempts: 7, base: 10, max: 1000, idem: "key", headers: map[string]string{"b": "2", "a": "1", "c": ""}}
	bare := spec{maxAttempts: 5, base: 1_000_000, max: 60_000_000}
	unique := spec{payload: []byte(`{"a":1}`), kind: "k", maxAttempts: 5, base: 1, max: 2, idem: UniquePrefix + "ab",
		uniq: uniqueDefault, window: 3_600_000_000}
	dependent := full
	dependent.deps, dependent.sibs, dependent.policy = []uint64{3, 9, 1 << 40}, []int{0, 2}, uint8(RunOnFailure)
	uniqueDependent := unique
	uniqueDependent.deps, uniqueDependent.policy = []uint64{8}, uint8(WaitOnFailure)
	policyOnly := bare
	policyOnly.policy = uint8(WaitOnFailure)
	parted := bare
	parted.part = "tenant-1"
	partedDependent := dependent
	partedDependent.part = "t2"
	ops := []vop{
		{kind: OpSet, key: "k1", value: []byte("v")}, {kind: OpSet, key: "k0", value: []byte{}},
		{kind: OpDelete, key: "k2"}, {kind: OpIfVersion, key: "k3", version: 9}, {kind: OpIfExists, key: "k4"},
		{kind: OpIfAbsent, key: "k5"}, {kind: OpEnqueue, queue: "other", spec: full},
	}
	depOps := append(ops[:6:6], vop{kind: OpEnqueue, queue: "other", spec: dependent})
	fence := Lease{ID: 12, Token: 3, Secret: 0xfeedface}
	base := command{ns: NS("p", "s"), queue: "q", now: 1_893_456_000_000_000, retain: 3_600_000_000, idemTTL: -1}
	cmds := []versionedSample{
		{1, command{op: cmdEnqueue, task: full, ops: ops}},
		{1, command{op: cmdEnqueue, task: bare}},
		{1, command{op: cmdEnqueueBatch, tasks: []spec{full, bare}, ops: ops[:2]}},
		{1, command{op: cmdClaim, owner: "w", lease: 30_000_000, max: 10, wait: true, seed: 77}},
		{1, command{op: cmdComplete, fence: fence, result: []byte(`"ok"`), ops: ops}},
		{1, command{op: cmdCompleteBatch, fences: []Lease{fence, {ID: 13, Token: 1, Secret: 5}, fence}}},
		{1, command{op: cmdFail, fence: fence, errMsg: "boom", permanent: true, delay: 250}},
		{1, command{op: cmdHeartbeat, fence: fence, lease: 60_000_000, hasProg: true, progress: []byte(`{"p":2}`)}},
		{1, command{op: cmdHeartbeat, fence: fence, lease: 1, hasProg: true}},
		{1, command{op: cmdHeartbeat, fence: fence, lease: 1}},
		{1, command{op: cmdSnooze, fence: fence, delay: 0}},
		{1, command{op: cmdCancel, id: 4}}, {1, command{op: cmdRedrive, id: 5}}, {1, command{op: cmdRunNow, id: 6}},
		{1, command{op: cmdRedriveAll}},
		{1, command{op: cmdCommit, ops: ops}},
		// Version 2: the queue controls, complete and claim, heartbeat
		// batch, and tasks unique by content.
		{2, command{op: cmdSetPaused, paused: true}}, {2, command{op: cmdSetPaused}},
		{2, command{op: cmdSetLimits, limits: Limits{MaxInFlight: 3, Rate: 10, Per: 1500 * time.Millisecond, Burst: 20}}},
		{2, command{op: cmdSetLimits}},
		{2, command{op: cmdCompleteClaim, fence: fence, result: []byte(`"ok"`), ops: ops, owner: "w", lease: 30_000_000, max: 3, seed: 78}},
		{2, command{op: cmdCompleteClaim, fence: fence, owner: "w", lease: 1, max: 1, seed: 1}},
		{2, command{op: cmdCompleteClaim, fence: fence, ops: []vop{{kind: OpEnqueue, queue: "u", spec: unique}}, owner: "w", lease: 1, max: 1, seed: 2}},
		{2, command{op: cmdHeartbeatBatch, fences: []Lease{fence, {ID: 13, Token: 1, Secret: 5}, fence}, lease: 60_000_000}},
		{2, command{op: cmdEnqueue, task: unique, ops: ops[:1]}},
		{2, command{op: cmdBulk, bulk: bulkArgs{action: BulkCancel, from: 1, scan: bulkScan}}},
		{2, command{op: cmdBulk, bulk: bulkArgs{action: BulkRetry, from: 17, scan: 1, filter: Filter{
			States: []State{Dead, Scheduled}, Retrying: OnlyRetrying, Kind: "k", Error: "Boom", Partition: "p",
			HeaderKey: "h", HeaderValue: "v", MinID: 3, MaxID: 90,
			EnqueuedSince: time.UnixMicro(1_700_000_000_000_001).UTC(), EnqueuedBefore: time.UnixMicro(1_800_000_000_000_000).UTC()}}}},
		{2, command{op: cmdEnqueueBatch, tasks: []spec{bare, unique}}},
		{2, command{op: cmdCommit, ops: []vop{{kind: OpEnqueue, queue: "u", spec: unique}}}},
		// Version 3: tasks with dependencies or a dependency policy,
		// wherever a command carries them.
		{3, command{op: cmdEnqueue, task: dependent, ops: ops}},
		{3, command{op: cmdEnqueue, task: full, ops: depOps}},
		{3, command{op: cmdEnqueue, task: uniqueDependent}},
		{3, command{op: cmdEnqueue, task: policyOnly}},
		{3, command{op: cmdEnqueueBatch, tasks: []spec{bare, unique, dependent}, ops: ops[:2]}},
		{3, command{op: cmdComplete, fence: fence, ops: depOps}},
		{3, command{op: cmdCompleteClaim, fence: fence, ops: depOps, owner: "w", lease: 1, max: 2, seed: 3}},
		{3, command{op: cmdCommit, ops: depOps}},
		// Version 4: tasks that name a partition, and limits that bound
		// each partition.
		{4, command{op: cmdEnqueue, task: parted}},
		{4, command{op: cmdEnqueue, task: partedDependent, ops: ops}},
		{4, command{op: cmdEnqueueBatch, tasks: []spec{bare, parted, dependent}}},
		{4, command{op: cmdCompleteClaim, fence: fence, ops: []vop{{kind: OpEnqueue, queue: "p", spec: parted}}, owner: "w", lease: 1, max: 2, seed: 4}},
		{4, command{op: cmdSetLimits, limits: Limits{MaxInFlight: 3, PartitionMaxInFlight: 2}}},
		{4, command{op: cmdSetLimits, limits: Limits{PartitionRate: 5, PartitionPer: time.Second, PartitionBurst: 7}}},
		{4, command{op: cmdSetLimits, limits: Limits{Rate: 1, Per: time.Minute, PartitionMaxInFlight: 1, PartitionRate: 2, PartitionPer: time.Millisecond}}},
	}
	for i := range cmds {
		c := &cmds[i].cmd
		c.ns, c.queue, c.now, c.retain, c.idemTTL = base.ns, base.queue, base.now, base.retain, base.idemTTL
		if c.op == cmdCompleteBatch || c.op == cmdHeartbeatBatch {
			c.dup = repeatedLeases(c.fences)
		}
	}
	return cmds
}

// TestCommandRoundTrip: every operation decodes to exactly the command that
// was encoded, and encodes to the same bytes again.
func TestCommandRoundTrip(t *testing.T) {
	for _, cmd := range sampleCommands() {
		data, err := cmd.encode()
		if err != nil {
			t.Fatalf("%s: encode: %v", cmd.op, err)
		}
		var got command
		if err := decodeCommand(data, &got); err != nil {
			t.Fatalf("%s: decode: %v", cmd.op, err)
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", cmd.op, got, cmd)
		}
		again, err := got.encode()
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("%s: re-encoding gives other bytes (%v)", cmd.op, err)
		}
	}
}

// TestCommandBytesDeterministic: the same command gives the same bytes
// however its headers map iterates, and its bytes are a fresh slice.
func TestCommandBytesDeterministic(t *testing.T) {
	h := map[string]string{}
	for _, k := range []string{"z", "y", "x", "w", "v", "u", "t", "s", "r", "q"} {
		h[k] = k + k
	}
	cmd := command{op: cmdEnqueue, ns: ns, queue: "q", task: spec{headers: h, maxAttempts: 5}}
	first, err := cmd.encode()
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		data, err := cmd.encode()
		if err != nil || !bytes.Equal(data, first) {
			t.Fatalf("encoding changed: %v", err)
		}
		if &data[0] == &first[0] {
			t.Fatal("encode returned a shared buffer: a log keeps what it is given")
		}
	}
}

// TestDecodeCommandRefuses: every cut of every command, trailing bytes,
// headers out of order, a claim without a seed and unknown operations are
// refused with ErrCorrupt; an unknown version with ErrFailed.
func TestDecodeCommandRefuses(t *testing.T) {
	for _, cmd := range sampleCommands() {
		data, _ := cmd.encode()
		for n := range len(data) {
			var got command
			if err := decodeCommand(data[:n], &got); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s cut at %d of %d: %v, want ErrCorrupt", cmd.op, n, len(data), err)
			}
		}
		var got command
		if err := decodeCommand(append(bytes.Clone(data), 0), &got); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s with a trailing byte: %v", cmd.op, err)
		}
	}
	noSeed := command{op: cmdClaim, ns: ns, queue: "q", owner: "w", lease: 1, max: 1}
	unknown := command{op: cmdRedriveAll, ns: ns, queue: "q"}
	data, _ := unknown.encode()
	bad := map[string][]byte{"claim without a seed": must(noSeed.encode())}
	noSeed.op = cmdCompleteClaim
	bad["complete and claim without a seed"] = must(noSeed.encode())
	noExtend := command{op: cmdHeartbeatBatch, ns: ns, queue: "q"}
	bad["heartbeat batch extending by nothing"] = must(noExtend.encode())
	bad["unknown operation"] = append([]byte{data[0], 99}, data[2:]...)
	h := command{op: cmdEnqueue, ns: ns, queue: "q", task: spec{headers: map[string]string{"a": "1", "b": "2"}}}
	hd := must(h.encode())
	i := bytes.Index(hd, []byte{0xa1, 'a', 0xa1, '1', 0xa1, 'b', 0xa1, '2'})
	copy(hd[i:], []byte{0xa1, 'b', 0xa1, '2', 0xa1, 'a', 0xa1, '1'})
	bad["headers out of order"] = hd
	bad["empty"] = nil
	deps := command{op: cmdEnqueue, ns: ns, queue: "q", task: spec{deps: []uint64{4, 7}}}
	dd := must(deps.encode())
	i = bytes.Index(dd, []byte{0x92, 4, 7})
	bad["dependencies out of order"] = append(append(bytes.Clone(dd[:i]), 0x92, 7, 4), dd[i+3:]...)
	bad["dependency on task 0"] = append(append(bytes.Clone(dd[:i]), 0x92, 0, 7), dd[i+3:]...)
	pc := command{op: cmdEnqueue, ns: ns, queue: "q", task: spec{policy: uint8(RunOnFailure)}}
	pol := must(pc.encode())
	bad["unknown policy"] = append(bytes.Clone(pol[:len(pol)-2]), 9, 0x90)
	for name, b := range bad {
		var got command
		if err := decodeCommand(b, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	// Version 2's additions in a version 1 command, and nonsense in them.
	pause := must((&command{op: cmdSetPaused, ns: ns, queue: "q", paused: true}).encode())
	bad = map[string][]byte{"set paused in version 1": append([]byte{cmdVersion1}, pause[1:]...)}
	for _, cmd := range sampleCommands() {
		if cmd.op == cmdCompleteClaim || cmd.op == cmdHeartbeatBatch {
			b := must(cmd.encode())
			bad[cmd.op.String()+" in version 1"] = append([]byte{cmdVersion1}, b[1:]...)
		}
	}
	for name, l := range map[string]Limits{
		"rate over the limit":      {Rate: MaxRateTokens + 1, Per: time.Second},
		"rate without per":         {Rate: 5},
		"negative bound":           {MaxInFlight: -1},
		"bound past 32 bits":       {MaxInFlight: 1 << 40},
		"negative partition bound": {PartitionMaxInFlight: -1},
		"partition rate, no per":   {PartitionRate: 3},
		"negative partition burst": {PartitionRate: 3, PartitionPer: time.Second, PartitionBurst: -1},
	} {
		bad[name] = must((&command{op: cmdSetLimits, ns: ns, queue: "q", limits: l}).encode())
	}
	u := command{op: cmdEnqueue, ns: ns, queue: "q", task: spec{idem: UniquePrefix + "x", uniq: 1 << index.StateReady, window: 5}}
	bad["unique without the required states"] = must(u.encode())
	u.task.uniq, u.task.idem = uniqueDefault, ""
	bad["unique without a key"] = must(u.encode())
	rated := must((&command{op: cmdSetLimits, ns: ns, queue: "q", limits: Limits{PartitionRate: 3, PartitionPer: time.Second}}).encode())
	bad["partition rate in version 3"] = append([]byte{cmdVersion3}, rated[1:]...)
	bad["partition with a NUL byte"] = must((&command{op: cmdEnqueue, ns: ns, queue: "q", task: spec{part: "a\x00"}}).encode())
	for name, b := range bad {
		var got command
		if err := decodeCommand(b, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	var got command
	if err := decodeCommand(append([]byte{cmdVersion + 1}, data[1:]...), &got); !errors.Is(err, ErrFailed) {
		t.Fatalf("version %d: %v, want ErrFailed", cmdVersion+1, err)
	}
}

// TestCommandVersion: a command is written in the oldest version that can
// say it, so an older node keeps applying the log: version 1 for what it
// knows, version 2 for the queue controls, complete and claim, heartbeat
// batch and unique tasks, version 3 for tasks with dependencies. Each
// version's spec layout under another version's number is damage, not a
// guess.
func TestCommandVersion(t *testing.T) {
	for _, v := range versionedSamples() {
		data := must(v.cmd.encode())
		if uint64(data[0]) != v.ver {
			t.Errorf("%s: version %d, want %d", v.cmd.op, data[0], v.ver)
		}
		if v.ver == cmdVersion1 || !carriesSpec(&v.cmd) {
			continue
		}
		// A spec's layout read under the version before or after it.
		for _, other := range []uint64{v.ver - 1, v.ver + 1} {
			if other > cmdVersion {
				continue
			}
			var got command
			if err := decodeCommand(append([]byte{byte(other)}, data[1:]...), &got); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s of version %d read as version %d: %v, want ErrCorrupt", v.cmd.op, v.ver, other, err)
			}
		}
	}
}

// carriesSpec reports whether cmd has a task to enqueue.
func carriesSpec(cmd *command) bool {
	if cmd.op == cmdEnqueue || len(cmd.tasks) > 0 {
		return true
	}
	return slices.ContainsFunc(cmd.ops, func(op vop) bool { return op.kind == OpEnqueue })
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzDecodeCommand: decoding arbitrary bytes never panics nor allocates
// past its input, and what decodes encodes to bytes that decode to the
// same command.
func FuzzDecodeCommand(f *testing.F) {
	for _, cmd := range sampleCommands() {
		f.Add(must(cmd.encode()))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cmd command
		if err := decodeCommand(data, &cmd); err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFailed) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrFailed", err)
			}
			return
		}
		again, err := cmd.encode()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", cmd, err)
		}
		var back command
		if err := decodeCommand(again, &back); err != nil || !reflect.DeepEqual(back, cmd) {
			t.Fatalf("re-encoded command decodes to %+v (%v), want %+v", back, err, cmd)
		}
	})
}

// TestEnqueueBatchSpecsReused: batches enqueued one after another through
// EnqueueBatch's pool of validated tasks keep nothing of one another:
// plain tasks after a batch with every field set, and after one refused
// halfway through validation, are plain (TestPutSpecsClears checks the
// pool itself).
func TestEnqueueBatchSpecsReused(t *testing.T) {
	e := newEnv(t, true)
	q := e.db.Queue(ns, "reuse")
	full := Task{Kind: "k", Payload: []byte(`{"a":1}`), Headers: map[string]string{"h": "v"}, Priority: 7,
		IdempotencyKey: "idem", MaxAttempts: 3, Delay: time.Hour}
	full2, full3 := full, full
	full2.IdempotencyKey, full3.IdempotencyKey = "idem2", "idem3"
	if _, err := q.EnqueueBatch(ctx, []Task{full, full2, full3}); err != nil {
		t.Fatal(err)
	}
	plainEnq, err := q.Enqueue(ctx, Task{})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := q.Get(ctx, plainEnq.ID)
	if err != nil {
		t.Fatal(err)
	}
	bad := Task{Payload: []byte(`{"a":`)}
	if _, err := q.EnqueueBatch(ctx, []Task{full, full, bad}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("batch with a bad payload: %v", err)
	}
	enq, err := q.EnqueueBatch(ctx, []Task{{}, {}, {}, {}})
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range enq {
		ti, err := q.Get(ctx, en.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ti.Kind != "" || len(ti.Payload) != 0 || len(ti.Headers) != 0 || ti.Priority != 0 || ti.IdempotencyKey != "" ||
			!ti.NotBefore.Equal(plain.NotBefore) || ti.MaxAttempts != plain.MaxAttempts || ti.BackoffBase != plain.BackoffBase {
			t.Fatalf("a plain task after full batches: %+v", ti)
		}
	}
}

// TestPutSpecsClears: a spec slice goes back to the pool cleared, so that
// the pool keeps no payload, header map or dependency list alive, and a
// slice longer than maxPooledSpecs is not kept.
func TestPutSpecsClears(t *testing.T) {
	sp := getSpecs(3)
	if len(*sp) != 3 {
		t.Fatalf("getSpecs(3) gave %d specs", len(*sp))
	}
	(*sp)[1] = spec{payload: []byte(`{}`), kind: "k", headers: map[string]string{"a": "b"}, deps: []uint64{1}, idem: "i"}
	all := (*sp)[:cap(*sp)]
	putSpecs(sp)
	for i := range all {
		if !reflect.DeepEqual(all[i], spec{}) {
			t.Fatalf("spec %d kept in the pool: %+v", i, all[i])
		}
	}
	big := getSpecs(maxPooledSpecs + 1)
	(*big)[0].kind = "k"
	putSpecs(big)
	if (*big)[0].kind != "k" || len(*big) != maxPooledSpecs+1 {
		t.Fatal("a slice over maxPooledSpecs went back to the pool")
	}
}
