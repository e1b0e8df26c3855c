package machine

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// TestMachine runs the files of testdata/ through the planner: each
// command is planned at the harness's time against its state, and the
// batch it gives applied, as the engine does (without the log). The
// command language:
//
//	enqueue queue=Q [priority=N] [delay=D] [attempts=N] [backoff=D] [backoff-max=D]
//	        [key=K] [unique=WINDOW] [kind=K] [part=P] [after=ID,ID] [policy=cancel|wait|run]
//	claim queue=Q [owner=W] [max=N] [lease=D]
//	complete id=N [token=N] [secret=wrong] [queue=Q]
//	fail id=N [error=TEXT] [permanent] [retry=D]
//	heartbeat id=N [extend=D]
//	snooze id=N delay=D
//	cancel|redrive|run-now id=N [queue=Q]
//	reschedule id=N [at=D] [priority=N]   (at: from now, may be negative;
//	                 the command goes through its encoding first)
//	limits queue=Q [inflight=N] [rate=N per=D [burst=N]] [part-inflight=N] [part-rate=N part-per=D]
//	pause|resume queue=Q
//	tick D           (the clock moves on by D)
//	state            (every task as it is now)
//
// Run with -rewrite to regenerate the expected outputs after a change
// that is meant.
func TestMachine(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return h.run(t, td)
		})
	})
}

// start is the harness's time zero (2026-01-01, in microseconds).
const start = int64(1767225600) * 1_000_000

type harness struct {
	s      State
	p      Planner
	b      index.Batch
	now    int64
	seed   uint64
	leases map[uint64]dockettype.Lease // the last lease of each task
}

func newHarness() *harness {
	h := &harness{now: start, leases: map[uint64]dockettype.Lease{}}
	h.s = State{Store: index.NewStore(), IdemTTL: int64(24 * time.Hour / time.Microsecond),
		Entropy: func() uint64 { h.seed++; return h.seed }}
	return h
}

// plan plans cmd at the harness's time and applies the batch.
func (h *harness) plan(cmd *Command) (Result, error) {
	var res Result
	h.p.Begin(&h.s, &h.b, h.now)
	err := cmd.Plan(&h.p, &res)
	if err != nil || len(h.b.Mutations) == 0 {
		h.s.Store.DropEmpty()
	}
	if err == nil && len(h.b.Mutations) > 0 {
		h.b.Seq = h.s.Store.Seq() + 1
		if _, aerr := h.s.Store.Apply(&h.b); aerr != nil {
			return res, fmt.Errorf("apply: %w", aerr)
		}
	}
	return res, err
}

func dur(t *testing.T, s string) int64 {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d.Microseconds()
}

func num(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return n
}

// rel prints a time relative to the start.
func rel(us int64) string {
	if us == 0 {
		return "-"
	}
	return "+" + time.Duration((us-start)*1000).String()
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) string {
	args := map[string]string{}
	for _, a := range td.CmdArgs {
		args[a.Key] = strings.Join(a.Vals, ",")
	}
	queue := args["queue"]
	if queue == "" {
		queue = "q"
	}
	cmd := Command{NS: dockettype.NS("p", "s"), Queue: queue}
	lease := func() dockettype.Lease {
		id := uint64(num(t, args["id"]))
		l, ok := h.leases[id]
		if !ok {
			l = dockettype.Lease{ID: id}
		}
		if v, ok := args["token"]; ok {
			l.Token = uint64(num(t, v))
		}
		if args["secret"] == "wrong" {
			l.Secret++
		}
		return l
	}
	switch td.Cmd {
	case "tick":
		h.now += dur(t, td.CmdArgs[0].Key)
		return "now " + rel(h.now)
	case "enqueue":
		s := Spec{MaxAttempts: 5, Base: 1_000_000, Max: 60_000_000, Size: 64}
		for k, v := range args {
			switch k {
			case "priority":
				s.Prio = num(t, v)
			case "delay":
				s.Delay = dur(t, v)
			case "attempts":
				s.MaxAttempts = uint32(num(t, v))
			case "backoff":
				s.Base = dur(t, v)
			case "backoff-max":
				s.Max = dur(t, v)
			case "key":
				s.Idem = v
			case "unique":
				s.Idem, s.Uniq, s.Window = dockettype.UniquePrefix+args["kind"], validate.UniqueDefault, dur(t, v)
			case "kind":
				s.Kind = v
			case "part":
				s.Part = v
			case "after":
				for _, id := range strings.Split(v, ",") {
					s.Deps = append(s.Deps, uint64(num(t, id)))
				}
			case "policy":
				p, err := dockettype.ParsePolicy(v)
				if err != nil {
					t.Fatal(err)
				}
				s.Policy = uint8(p)
			case "queue":
			default:
				t.Fatalf("enqueue: unknown argument %s", k)
			}
		}
		cmd.Args = &Enqueue{Task: s}
		res, err := h.plan(&cmd)
		if err != nil {
			return "error: " + err.Error()
		}
		if res.Enq.Deduplicated {
			return fmt.Sprintf("id=%d deduplicated", res.Enq.ID)
		}
		return fmt.Sprintf("id=%d", res.Enq.ID)
	case "claim":
		a := &Claim{Owner: "w", Max: 1, Lease: dur(t, "30s"), Wait: true}
		if v, ok := args["owner"]; ok {
			a.Owner = v
		}
		if v, ok := args["max"]; ok {
			a.Max = int(num(t, v))
		}
		if v, ok := args["lease"]; ok {
			a.Lease = dur(t, v)
		}
		cmd.Args = a
		res, err := h.plan(&cmd)
		if err != nil {
			return "error: " + err.Error()
		}
		if len(res.Leases) == 0 {
			if res.Due != 0 {
				return "none (next due " + rel(res.Due) + ")"
			}
			return "none"
		}
		var b strings.Builder
		for i, l := range res.Leases {
			h.leases[l.ID] = l
			if i > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "id=%d token=%d attempt=%d/%d owner=%s deadline=%s", l.ID, l.Token, l.Attempt, l.MaxAttempts,
				l.Owner, rel(l.Deadline.UnixMicro()))
			if l.Partition != "" {
				fmt.Fprintf(&b, " part=%s", l.Partition)
			}
		}
		return b.String()
	case "complete":
		cmd.Args = &Complete{Fence: lease()}
	case "fail":
		a := &Fail{Fence: lease(), ErrMsg: args["error"], Permanent: td.HasArg("permanent")}
		if a.ErrMsg == "" {
			a.ErrMsg = "boom"
		}
		if v, ok := args["retry"]; ok {
			a.Delay = dur(t, v)
		}
		cmd.Args = a
	case "heartbeat":
		a := &Heartbeat{Fence: lease(), Lease: dur(t, "30s")}
		if v, ok := args["extend"]; ok {
			a.Lease = dur(t, v)
		}
		cmd.Args = a
		res, err := h.plan(&cmd)
		if err != nil {
			return "error: " + err.Error()
		}
		return "deadline " + rel(res.Deadline)
	case "snooze":
		cmd.Args = &Snooze{Fence: lease(), Delay: dur(t, args["delay"])}
	case "cancel", "redrive", "run-now":
		id := uint64(num(t, args["id"]))
		cmd.Args = map[string]Args{"cancel": &Cancel{id}, "redrive": &Redrive{id}, "run-now": &RunNow{id}}[td.Cmd]
	case "reschedule":
		a := &Reschedule{ID: uint64(num(t, args["id"]))}
		if v, ok := args["at"]; ok {
			a.At = h.now + dur(t, v)
		}
		if v, ok := args["priority"]; ok {
			a.Prio, a.SetPrio = num(t, v), true
		}
		cmd.Args = a
		if err := a.Check(); err != nil {
			return "error: " + err.Error()
		}
		data, err := cmd.Encode()
		if err == nil {
			err = Decode(data, &cmd)
		}
		if err != nil {
			t.Fatal(err)
		}
	case "pause", "resume":
		cmd.Args = &SetPaused{Paused: td.Cmd == "pause"}
	case "limits":
		a := &SetLimits{}
		cmd.Args = a
		l := &a.Limits
		for k, v := range args {
			switch k {
			case "inflight":
				l.MaxInFlight = int(num(t, v))
			case "rate":
				l.Rate = int(num(t, v))
			case "per":
				l.Per = time.Duration(dur(t, v)) * time.Microsecond
			case "burst":
				l.Burst = int(num(t, v))
			case "part-inflight":
				l.PartitionMaxInFlight = int(num(t, v))
			case "part-rate":
				l.PartitionRate = int(num(t, v))
			case "part-per":
				l.PartitionPer = time.Duration(dur(t, v)) * time.Microsecond
			case "queue":
			default:
				t.Fatalf("limits: unknown argument %s", k)
			}
		}
		if err := validate.Limits(*l); err != nil {
			return "error: " + err.Error()
		}
	case "state":
		return h.state()
	default:
		t.Fatalf("unknown command %s", td.Cmd)
	}
	if _, err := h.plan(&cmd); err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

// state lists every task as it is at now, in id order.
func (h *harness) state() string {
	var lines []string
	for id := uint64(1); id < h.s.Store.NextID(); id++ {
		t, ok := h.s.Store.Task(id)
		if !ok {
			continue
		}
		t = At(t, h.now)
		st := dockettype.State(t.State)
		line := fmt.Sprintf("%d %s %s prio=%d attempts=%d/%d", t.ID, t.Queue.Key.Name, st, t.Priority, t.Attempts, t.MaxAttempts())
		switch st {
		case dockettype.Scheduled:
			line += " due=" + rel(t.NotBefore)
		case dockettype.InFlight:
			line += fmt.Sprintf(" owner=%s token=%d until=%s", t.Owner(), t.Token(), rel(t.LeaseUntil()))
		}
		if p := t.PartitionKey(); p != "" {
			line += " part=" + p
		}
		if e := t.Ex().LastError; e != "" {
			line += fmt.Sprintf(" error=%q", e)
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return "empty"
	}
	return strings.Join(lines, "\n")
}

// TestRegisterRefuses: registering an operation number twice, or
// arguments that say another number, panics and leaves the registry as
// it was.
func TestRegisterRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		op  CmdOp
		new func() Args
	}{
		"a number twice":       {CmdEnqueue, func() Args { return new(Claim) }},
		"another number":       {60, func() Args { return new(Claim) }},
		"number out of range":  {200, func() Args { return new(Claim) }},
		"the same type, twice": {CmdReschedule, func() Args { return new(Reschedule) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: register did not panic", name)
				}
			}()
			register(c.op, "again", Version1, c.new)
		}()
	}
	if CmdEnqueue.String() != "enqueue" || CmdReschedule.String() != "reschedule" || CmdOp(60).String() != "invalid" {
		t.Fatalf("the registry changed: %s, %s, %s", CmdEnqueue, CmdReschedule, CmdOp(60))
	}
}

// TestRegistry: every registered operation's arguments say its number,
// and a command of them is written in at least the version it appeared
// in.
func TestRegistry(t *testing.T) {
	names := map[string]int{}
	for i := range operations {
		o := operationOf(CmdOp(i))
		if o == nil {
			continue
		}
		if j, dup := names[o.name]; dup {
			t.Errorf("operations %d and %d are both named %q", j, i, o.name)
		}
		names[o.name] = i
		cmd := Command{Args: o.new()}
		if cmd.Op() != CmdOp(i) || cmd.Op().String() != o.name || cmd.version() < o.since {
			t.Errorf("operation %d (%s): arguments say %d, version %d", i, o.name, cmd.Op(), cmd.version())
		}
	}
	if len(names) < int(CmdCommit) {
		t.Errorf("%d operations registered, fewer than version 1 had", len(names))
	}
	if _, err := (&Command{}).Encode(); err == nil {
		t.Error("a command without arguments encodes")
	}
	if err := (&Command{}).Plan(nil, &Result{}); err == nil {
		t.Error("a command without arguments plans")
	}
}
