package engine

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/docketdb/docket/index"
)

// sampleCommands has one command of every operation, with every optional
// field set somewhere, as the replicated path stamps them.
func sampleCommands() []command {
	full := spec{payload: []byte(`{"a":1}`), kind: "k", delay: 5, at: 1_900_000_000_000_000, prio: -3,
		maxAttempts: 7, base: 10, max: 1000, idem: "key", headers: map[string]string{"b": "2", "a": "1", "c": ""}}
	bare := spec{maxAttempts: 5, base: 1_000_000, max: 60_000_000}
	unique := spec{payload: []byte(`{"a":1}`), kind: "k", maxAttempts: 5, base: 1, max: 2, idem: UniquePrefix + "ab",
		uniq: uniqueDefault, window: 3_600_000_000}
	ops := []vop{
		{kind: OpSet, key: "k1", value: []byte("v")}, {kind: OpSet, key: "k0", value: []byte{}},
		{kind: OpDelete, key: "k2"}, {kind: OpIfVersion, key: "k3", version: 9}, {kind: OpIfExists, key: "k4"},
		{kind: OpIfAbsent, key: "k5"}, {kind: OpEnqueue, queue: "other", spec: full},
	}
	fence := Lease{ID: 12, Token: 3, Secret: 0xfeedface}
	base := command{ns: NS("p", "s"), queue: "q", now: 1_893_456_000_000_000, retain: 3_600_000_000, idemTTL: -1}
	cmds := []command{
		{op: cmdEnqueue, task: full, ops: ops},
		{op: cmdEnqueue, task: bare},
		{op: cmdEnqueueBatch, tasks: []spec{full, bare}, ops: ops[:2]},
		{op: cmdClaim, owner: "w", lease: 30_000_000, max: 10, wait: true, seed: 77},
		{op: cmdComplete, fence: fence, result: []byte(`"ok"`), ops: ops},
		{op: cmdCompleteBatch, fences: []Lease{fence, {ID: 13, Token: 1, Secret: 5}, fence}},
		{op: cmdFail, fence: fence, errMsg: "boom", permanent: true, delay: 250},
		{op: cmdHeartbeat, fence: fence, lease: 60_000_000, hasProg: true, progress: []byte(`{"p":2}`)},
		{op: cmdHeartbeat, fence: fence, lease: 1, hasProg: true},
		{op: cmdHeartbeat, fence: fence, lease: 1},
		{op: cmdSnooze, fence: fence, delay: 0},
		{op: cmdCancel, id: 4}, {op: cmdRedrive, id: 5}, {op: cmdRunNow, id: 6}, {op: cmdRedriveAll},
		{op: cmdCommit, ops: ops},
		// Version 2: the queue controls, complete and claim, heartbeat
		// batch, and tasks unique by content.
		{op: cmdSetPaused, paused: true}, {op: cmdSetPaused},
		{op: cmdSetLimits, limits: Limits{MaxInFlight: 3, Rate: 10, Per: 1500 * time.Millisecond, Burst: 20}},
		{op: cmdSetLimits},
		{op: cmdCompleteClaim, fence: fence, result: []byte(`"ok"`), ops: ops, owner: "w", lease: 30_000_000, max: 3, seed: 78},
		{op: cmdCompleteClaim, fence: fence, owner: "w", lease: 1, max: 1, seed: 1},
		{op: cmdCompleteClaim, fence: fence, ops: []vop{{kind: OpEnqueue, queue: "u", spec: unique}}, owner: "w", lease: 1, max: 1, seed: 2},
		{op: cmdHeartbeatBatch, fences: []Lease{fence, {ID: 13, Token: 1, Secret: 5}, fence}, lease: 60_000_000},
		{op: cmdEnqueue, task: unique, ops: ops[:1]},
		{op: cmdEnqueueBatch, tasks: []spec{bare, unique}},
		{op: cmdCommit, ops: []vop{{kind: OpEnqueue, queue: "u", spec: unique}}},
	}
	for i := range cmds {
		c := &cmds[i]
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
		"rate over the limit": {Rate: MaxRateTokens + 1, Per: time.Second},
		"rate without per":    {Rate: 5},
		"negative bound":      {MaxInFlight: -1},
		"bound past 32 bits":  {MaxInFlight: 1 << 40},
	} {
		bad[name] = must((&command{op: cmdSetLimits, ns: ns, queue: "q", limits: l}).encode())
	}
	u := command{op: cmdEnqueue, ns: ns, queue: "q", task: spec{idem: UniquePrefix + "x", uniq: 1 << index.StateReady, window: 5}}
	bad["unique without the required states"] = must(u.encode())
	u.task.uniq, u.task.idem = uniqueDefault, ""
	bad["unique without a key"] = must(u.encode())
	for name, b := range bad {
		var got command
		if err := decodeCommand(b, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	var got command
	if err := decodeCommand(append([]byte{3}, data[1:]...), &got); !errors.Is(err, ErrFailed) {
		t.Fatalf("version 3: %v, want ErrFailed", err)
	}
}

// TestCommandVersion: a command version 1 can say is written in version 1,
// so an older node keeps applying the log; the controls, complete and
// claim, heartbeat batch and unique tasks take version 2.
func TestCommandVersion(t *testing.T) {
	for _, cmd := range sampleCommands() {
		data := must(cmd.encode())
		want := uint64(cmdVersion1)
		if cmd.op >= cmdSetPaused || cmd.task.uniq != 0 || len(cmd.tasks) == 2 && cmd.tasks[1].uniq != 0 ||
			cmd.op == cmdCommit && cmd.ops[0].spec.uniq != 0 {
			want = cmdVersion
		}
		if data[0] != byte(want) {
			t.Errorf("%s: version %d, want %d", cmd.op, data[0], want)
		}
	}
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
