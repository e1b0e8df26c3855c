package engine

import (
	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/validate"

	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
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
	full := spec{Payload: []byte(`{"a":1}`), Kind: "k", Delay: 5, At: 1_900_000_000_000_000, Prio: -3,
		MaxAttempts: 7, Base: 10, Max: 1000, Idem: "key", Headers: map[string]string{"b": "2", "a": "1", "c": ""}}
	bare := spec{MaxAttempts: 5, Base: 1_000_000, Max: 60_000_000}
	unique := spec{Payload: []byte(`{"a":1}`), Kind: "k", MaxAttempts: 5, Base: 1, Max: 2, Idem: UniquePrefix + "ab",
		Uniq: validate.UniqueDefault, Window: 3_600_000_000}
	dependent := full
	dependent.Deps, dependent.Sibs, dependent.Policy = []uint64{3, 9, 1 << 40}, []int{0, 2}, uint8(RunOnFailure)
	uniqueDependent := unique
	uniqueDependent.Deps, uniqueDependent.Policy = []uint64{8}, uint8(WaitOnFailure)
	policyOnly := bare
	policyOnly.Policy = uint8(WaitOnFailure)
	parted := bare
	parted.Part = "tenant-1"
	partedDependent := dependent
	partedDependent.Part = "t2"
	ops := []vop{
		{Kind: OpSet, Key: "k1", Value: []byte("v")}, {Kind: OpSet, Key: "k0", Value: []byte{}},
		{Kind: OpDelete, Key: "k2"}, {Kind: OpIfVersion, Key: "k3", Version: 9}, {Kind: OpIfExists, Key: "k4"},
		{Kind: OpIfAbsent, Key: "k5"}, {Kind: OpEnqueue, Queue: "other", Spec: full},
	}
	depOps := append(ops[:6:6], vop{Kind: OpEnqueue, Queue: "other", Spec: dependent})
	fence := Lease{ID: 12, Token: 3, Secret: 0xfeedface}
	base := command{NS: NS("p", "s"), Queue: "q", Now: 1_893_456_000_000_000, Retain: 3_600_000_000, IdemTTL: -1}
	cmds := []versionedSample{
		{1, command{Args: &machine.Enqueue{Task: full, Ops: ops}}},
		{1, command{Args: &machine.Enqueue{Task: bare}}},
		{1, command{Args: &machine.EnqueueBatch{Tasks: []spec{full, bare}, Ops: ops[:2]}}},
		{1, command{Seed: 77, Args: &machine.Claim{Owner: "w", Lease: 30_000_000, Max: 10, Wait: true}}},
		{1, command{Args: &machine.Complete{Fence: fence, Result: []byte(`"ok"`), Ops: ops}}},
		{1, command{Args: &machine.CompleteBatch{Fences: []Lease{fence, {ID: 13, Token: 1, Secret: 5}, fence}}}},
		{1, command{Args: &machine.Fail{Fence: fence, ErrMsg: "boom", Permanent: true, Delay: 250}}},
		{1, command{Args: &machine.Heartbeat{Fence: fence, Lease: 60_000_000, HasProg: true, Progress: []byte(`{"p":2}`)}}},
		{1, command{Args: &machine.Heartbeat{Fence: fence, Lease: 1, HasProg: true}}},
		{1, command{Args: &machine.Heartbeat{Fence: fence, Lease: 1}}},
		{1, command{Args: &machine.Snooze{Fence: fence, Delay: 0}}},
		{1, command{Args: &machine.Cancel{ID: 4}}}, {1, command{Args: &machine.Redrive{ID: 5}}}, {1, command{Args: &machine.RunNow{ID: 6}}},
		{1, command{Args: &machine.RedriveAll{}}},
		{1, command{Args: &machine.Commit{Ops: ops}}},
		// Version 2: the queue controls, complete and claim, heartbeat
		// batch, and tasks unique by content.
		{2, command{Args: &machine.SetPaused{Paused: true}}}, {2, command{Args: &machine.SetPaused{}}},
		{2, command{Args: &machine.SetLimits{Limits: Limits{MaxInFlight: 3, Rate: 10, Per: 1500 * time.Millisecond, Burst: 20}}}},
		{2, command{Args: &machine.SetLimits{}}},
		{2, command{Seed: 78, Args: &machine.CompleteClaim{Complete: machine.Complete{Fence: fence, Result: []byte(`"ok"`), Ops: ops}, Owner: "w", Lease: 30_000_000, Max: 3}}},
		{2, command{Seed: 1, Args: &machine.CompleteClaim{Complete: machine.Complete{Fence: fence}, Owner: "w", Lease: 1, Max: 1}}},
		{2, command{Seed: 2, Args: &machine.CompleteClaim{Complete: machine.Complete{Fence: fence, Ops: []vop{{Kind: OpEnqueue, Queue: "u", Spec: unique}}}, Owner: "w", Lease: 1, Max: 1}}},
		{2, command{Args: &machine.HeartbeatBatch{Fences: []Lease{fence, {ID: 13, Token: 1, Secret: 5}, fence}, Lease: 60_000_000}}},
		{2, command{Args: &machine.Enqueue{Task: unique, Ops: ops[:1]}}},
		{2, command{Args: &machine.Bulk{Action: BulkCancel, From: 1, Scan: bulkScan}}},
		{2, command{Args: &machine.Bulk{Action: BulkRetry, From: 17, Scan: 1, Filter: Filter{
			States: []State{Dead, Scheduled}, Retrying: OnlyRetrying, Kind: "k", Error: "Boom", Partition: "p",
			HeaderKey: "h", HeaderValue: "v", MinID: 3, MaxID: 90,
			EnqueuedSince: time.UnixMicro(1_700_000_000_000_001).UTC(), EnqueuedBefore: time.UnixMicro(1_800_000_000_000_000).UTC()}}}},
		{2, command{Args: &machine.EnqueueBatch{Tasks: []spec{bare, unique}}}},
		{2, command{Args: &machine.Commit{Ops: []vop{{Kind: OpEnqueue, Queue: "u", Spec: unique}}}}},
		{2, command{Args: &machine.Reschedule{ID: 7, At: 1_893_456_100_000_000}}},
		{2, command{Args: &machine.Reschedule{ID: 8, Prio: -3, SetPrio: true}}},
		{2, command{Args: &machine.Reschedule{ID: 9, At: 1, Prio: 1 << 40, SetPrio: true}}},
		// Version 3: tasks with dependencies or a dependency policy,
		// wherever a command carries them.
		{3, command{Args: &machine.Enqueue{Task: dependent, Ops: ops}}},
		{3, command{Args: &machine.Enqueue{Task: full, Ops: depOps}}},
		{3, command{Args: &machine.Enqueue{Task: uniqueDependent}}},
		{3, command{Args: &machine.Enqueue{Task: policyOnly}}},
		{3, command{Args: &machine.EnqueueBatch{Tasks: []spec{bare, unique, dependent}, Ops: ops[:2]}}},
		{3, command{Args: &machine.Complete{Fence: fence, Ops: depOps}}},
		{3, command{Seed: 3, Args: &machine.CompleteClaim{Complete: machine.Complete{Fence: fence, Ops: depOps}, Owner: "w", Lease: 1, Max: 2}}},
		{3, command{Args: &machine.Commit{Ops: depOps}}},
		// Version 4: tasks that name a partition, and limits that bound
		// each partition.
		{4, command{Args: &machine.Enqueue{Task: parted}}},
		{4, command{Args: &machine.Enqueue{Task: partedDependent, Ops: ops}}},
		{4, command{Args: &machine.EnqueueBatch{Tasks: []spec{bare, parted, dependent}}}},
		{4, command{Seed: 4, Args: &machine.CompleteClaim{Complete: machine.Complete{Fence: fence, Ops: []vop{{Kind: OpEnqueue, Queue: "p", Spec: parted}}}, Owner: "w", Lease: 1, Max: 2}}},
		{4, command{Args: &machine.SetLimits{Limits: Limits{MaxInFlight: 3, PartitionMaxInFlight: 2}}}},
		{4, command{Args: &machine.SetLimits{Limits: Limits{PartitionRate: 5, PartitionPer: time.Second, PartitionBurst: 7}}}},
		{4, command{Args: &machine.SetLimits{Limits: Limits{Rate: 1, Per: time.Minute, PartitionMaxInFlight: 1, PartitionRate: 2, PartitionPer: time.Millisecond}}}},
	}
	for i := range cmds {
		c := &cmds[i].cmd
		c.NS, c.Queue, c.Now, c.Retain, c.IdemTTL = base.NS, base.Queue, base.Now, base.Retain, base.IdemTTL
		switch a := c.Args.(type) {
		case *machine.CompleteBatch:
			a.Dup = machine.RepeatedLeases(a.Fences)
		case *machine.HeartbeatBatch:
			a.Dup = machine.RepeatedLeases(a.Fences)
		}
	}
	return cmds
}

// TestCommandRoundTrip: every operation decodes to exactly the command that
// was encoded, and encodes to the same bytes again.
func TestCommandRoundTrip(t *testing.T) {
	t.Parallel()
	sampled := map[machine.CmdOp]bool{}
	for _, cmd := range sampleCommands() {
		sampled[cmd.Op()] = true
		data, err := cmd.Encode()
		if err != nil {
			t.Fatalf("%s: encode: %v", cmd.Op(), err)
		}
		var got command
		if err := decodeCommand(data, &got); err != nil {
			t.Fatalf("%s: decode: %v", cmd.Op(), err)
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", cmd.Op(), got, cmd)
		}
		again, err := got.Encode()
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("%s: re-encoding gives other bytes (%v)", cmd.Op(), err)
		}
	}
	// Every registered operation is among the samples (and so in the
	// golden file): a new one cannot go untested by forgetting it.
	for op := machine.CmdOp(1); op < 64; op++ {
		if op.String() != "invalid" && !sampled[op] {
			t.Errorf("operation %d (%s) has no sample command", op, op)
		}
	}
}

// TestCommandBytesDeterministic: the same command gives the same bytes
// however its headers map iterates, and its bytes are a fresh slice.
func TestCommandBytesDeterministic(t *testing.T) {
	t.Parallel()
	h := map[string]string{}
	for _, k := range []string{"z", "y", "x", "w", "v", "u", "t", "s", "r", "q"} {
		h[k] = k + k
	}
	cmd := command{NS: ns, Queue: "q", Args: &machine.Enqueue{Task: spec{Headers: h, MaxAttempts: 5}}}
	first, err := cmd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		data, err := cmd.Encode()
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
	t.Parallel()
	for _, cmd := range sampleCommands() {
		data, _ := cmd.Encode()
		for n := range len(data) {
			var got command
			if err := decodeCommand(data[:n], &got); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s cut at %d of %d: %v, want ErrCorrupt", cmd.Op(), n, len(data), err)
			}
		}
		var got command
		if err := decodeCommand(append(bytes.Clone(data), 0), &got); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s with a trailing byte: %v", cmd.Op(), err)
		}
	}
	noSeed := command{NS: ns, Queue: "q", Args: &machine.Claim{Owner: "w", Lease: 1, Max: 1}}
	unknown := command{NS: ns, Queue: "q", Args: &machine.RedriveAll{}}
	data, _ := unknown.Encode()
	bad := map[string][]byte{"claim without a seed": must(noSeed.Encode())}
	noSeed.Args = &machine.CompleteClaim{Owner: "w", Lease: 1, Max: 1}
	bad["complete and claim without a seed"] = must(noSeed.Encode())
	noExtend := command{NS: ns, Queue: "q", Args: &machine.HeartbeatBatch{}}
	bad["heartbeat batch extending by nothing"] = must(noExtend.Encode())
	bad["unknown operation"] = append([]byte{data[0], 99}, data[2:]...)
	h := command{NS: ns, Queue: "q", Args: &machine.Enqueue{Task: spec{Headers: map[string]string{"a": "1", "b": "2"}}}}
	hd := must(h.Encode())
	i := bytes.Index(hd, []byte{0xa1, 'a', 0xa1, '1', 0xa1, 'b', 0xa1, '2'})
	copy(hd[i:], []byte{0xa1, 'b', 0xa1, '2', 0xa1, 'a', 0xa1, '1'})
	bad["headers out of order"] = hd
	bad["empty"] = nil
	deps := command{NS: ns, Queue: "q", Args: &machine.Enqueue{Task: spec{Deps: []uint64{4, 7}}}}
	dd := must(deps.Encode())
	i = bytes.Index(dd, []byte{0x92, 4, 7})
	bad["dependencies out of order"] = append(append(bytes.Clone(dd[:i]), 0x92, 7, 4), dd[i+3:]...)
	bad["dependency on task 0"] = append(append(bytes.Clone(dd[:i]), 0x92, 0, 7), dd[i+3:]...)
	pc := command{NS: ns, Queue: "q", Args: &machine.Enqueue{Task: spec{Policy: uint8(RunOnFailure)}}}
	pol := must(pc.Encode())
	bad["unknown policy"] = append(bytes.Clone(pol[:len(pol)-2]), 9, 0x90)
	for name, b := range bad {
		var got command
		if err := decodeCommand(b, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	// Version 2's additions in a version 1 command, and nonsense in them.
	pause := must((&command{NS: ns, Queue: "q", Args: &machine.SetPaused{Paused: true}}).Encode())
	bad = map[string][]byte{"set paused in version 1": append([]byte{cmdVersion1}, pause[1:]...)}
	for _, cmd := range sampleCommands() {
		if op := cmd.Op(); op == machine.CmdCompleteClaim || op == machine.CmdHeartbeatBatch {
			b := must(cmd.Encode())
			bad[op.String()+" in version 1"] = append([]byte{cmdVersion1}, b[1:]...)
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
		bad[name] = must((&command{NS: ns, Queue: "q", Args: &machine.SetLimits{Limits: l}}).Encode())
	}
	ua := &machine.Enqueue{Task: spec{Idem: UniquePrefix + "x", Uniq: 1 << index.StateReady, Window: 5}}
	u := command{NS: ns, Queue: "q", Args: ua}
	bad["unique without the required states"] = must(u.Encode())
	ua.Task.Uniq, ua.Task.Idem = validate.UniqueDefault, ""
	bad["unique without a key"] = must(u.Encode())
	rated := must((&command{NS: ns, Queue: "q", Args: &machine.SetLimits{Limits: Limits{PartitionRate: 3, PartitionPer: time.Second}}}).Encode())
	bad["partition rate in version 3"] = append([]byte{cmdVersion3}, rated[1:]...)
	bad["partition with a NUL byte"] = must((&command{NS: ns, Queue: "q", Args: &machine.Enqueue{Task: spec{Part: "a\x00"}}}).Encode())
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
	t.Parallel()
	for _, v := range versionedSamples() {
		data := must(v.cmd.Encode())
		if uint64(data[0]) != v.ver {
			t.Errorf("%s: version %d, want %d", v.cmd.Op(), data[0], v.ver)
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
				t.Errorf("%s of version %d read as version %d: %v, want ErrCorrupt", v.cmd.Op(), v.ver, other, err)
			}
		}
	}
}

// carriesSpec reports whether cmd has a task to enqueue.
func carriesSpec(cmd *command) bool {
	var ops []vop
	switch a := cmd.Args.(type) {
	case *machine.Enqueue:
		return true
	case *machine.EnqueueBatch:
		return true
	case *machine.Commit:
		ops = a.Ops
	case *machine.Complete:
		ops = a.Ops
	case *machine.CompleteClaim:
		ops = a.Ops
	}
	return slices.ContainsFunc(ops, func(op vop) bool { return op.Kind == OpEnqueue })
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
		f.Add(must(cmd.Encode()))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cmd command
		if err := decodeCommand(data, &cmd); err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFailed) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrFailed", err)
			}
			return
		}
		again, err := cmd.Encode()
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
	t.Parallel()
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
	t.Parallel()
	sp := getSpecs(3)
	if len(*sp) != 3 {
		t.Fatalf("getSpecs(3) gave %d specs", len(*sp))
	}
	(*sp)[1] = spec{Payload: []byte(`{}`), Kind: "k", Headers: map[string]string{"a": "b"}, Deps: []uint64{1}, Idem: "i"}
	all := (*sp)[:cap(*sp)]
	putSpecs(sp)
	for i := range all {
		if !reflect.DeepEqual(all[i], spec{}) {
			t.Fatalf("spec %d kept in the pool: %+v", i, all[i])
		}
	}
	big := getSpecs(maxPooledSpecs + 1)
	(*big)[0].Kind = "k"
	putSpecs(big)
	if (*big)[0].Kind != "k" || len(*big) != maxPooledSpecs+1 {
		t.Fatal("a slice over maxPooledSpecs went back to the pool")
	}
}

// The command format's versions, as the codec numbers them.
const (
	cmdVersion  = machine.Version
	cmdVersion1 = machine.Version1
	cmdVersion2 = machine.Version2
	cmdVersion3 = machine.Version3
)

// TestCommandGolden: every sample command encodes to the bytes recorded in
// testdata/commands.golden, one hex line per sample in order (-update
// commands rewrites the file): the replicated log's format does not move when the
// code that writes it does.
var updateCommands = flag.Bool("update-commands", false, "rewrite testdata/commands.golden")

func TestCommandGolden(t *testing.T) {
	t.Parallel()
	var lines []string
	for _, v := range versionedSamples() {
		lines = append(lines, hex.EncodeToString(must(v.cmd.Encode())))
	}
	got := strings.Join(lines, "\n") + "\n"
	const path = "testdata/commands.golden"
	if *updateCommands {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if wl := strings.Split(string(want), "\n"); got != string(want) {
		for i, l := range lines {
			if i >= len(wl) || wl[i] != l {
				t.Fatalf("sample %d (%s) encodes to\n%s\nwant\n%s", i, versionedSamples()[i].cmd.Op(), l, wl[min(i, len(wl)-1)])
			}
		}
		t.Fatalf("%d samples, the golden file has %d lines", len(lines), len(wl)-1)
	}
}
