//go:build linux

package fuzz

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/internal/vfs"
)

// The vocabulary programs draw from: small, so that calls collide on the
// same queues, keys and tasks.
var (
	ctx     = context.Background()
	t0      = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	nsProd  = engine.NS("acme", "prod")
	nsDev   = engine.NS("acme", "dev")
	allNS   = []engine.Namespace{nsProd, nsDev}
	queues  = []QueueKey{{nsProd, "a"}, {nsProd, "b"}, {nsDev, "a"}, {nsDev, "b"}}
	owners  = []string{"w0", "w1", "w2", "w3"}
	idems   = []string{"", "k0", "k1", "k2"}
	kvKeys  = []string{"a", "a/1", "a/2", "b", "c", "a/1", "b", "c/x"}
	delays  = []time.Duration{0, time.Second, 5 * time.Second, time.Minute}
	leaseDs = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute}
	moves   = []time.Duration{time.Millisecond, time.Second, 10 * time.Second, 31 * time.Second,
		2 * time.Minute, 2 * time.Hour, 3 * time.Second, 500 * time.Millisecond}
	quiet = slog.New(slog.DiscardHandler)
)

// opSize is the width of one instruction: an opcode and its parameters.
const opSize = 8

// Opcodes. The byte is taken modulo numOps.
const (
	opEnqueue = iota
	opBatch
	opClaim
	opComplete
	opFail
	opHeartbeat
	opSnooze
	opCancel
	opRedrive
	opKV
	opAdvance
	opCheckpoint
	opReopen
	opForged
	opInvalid
	opRead
	opControl
	opDepend
	opBulk
	numOps
)

var opNames = [numOps]string{"enqueue", "batch", "claim", "complete", "fail", "heartbeat", "snooze", "cancel",
	"redrive", "kv", "advance", "checkpoint", "reopen", "forged", "invalid", "read", "control", "depend", "bulk"}

// program is a byte string read as instructions of opSize bytes; the first
// byte configures the DB (see programConfig).
type program struct {
	data []byte
	pos  int
}

func (p *program) more() bool { return p.pos+opSize <= len(p.data) }

func (p *program) next() (code int, a [opSize - 1]byte) {
	code = int(p.data[p.pos]) % numOps
	copy(a[:], p.data[p.pos+1:p.pos+opSize])
	p.pos += opSize
	return code, a
}

// programConfig picks the idempotency TTL and the retention of completed
// tasks from a program's first byte, and with bit 4 a value threshold of
// valueThreshold bytes, which about a third of the payloads, results and
// progress records the program makes cross (see big).
func programConfig(b byte) Config {
	ttls := []time.Duration{0, 90 * time.Second, -1, 10 * time.Minute}
	retain := []time.Duration{0, 0, time.Minute, time.Hour}
	c := Config{IdempotencyTTL: ttls[b&3], RetainCompleted: retain[(b>>2)&3]}
	if b&0x10 != 0 {
		c.ValueThreshold = valueThreshold
	}
	return c
}

// valueThreshold is the value threshold of the programs that set bit 4 of
// their configuration byte.
const valueThreshold = 64

// big returns v, a JSON object or string of a program, grown past the value
// threshold every third value when the program has one: a string's text or
// an object's "pad" member repeated, sizes on both sides of the threshold
// and up to a few hundred bytes. Without a threshold v is returned as it is.
func (r *runner) big(v []byte) []byte {
	if r.cfg.ValueThreshold == 0 || len(v) == 0 || r.n%3 != 0 {
		return v
	}
	n := valueThreshold - 8 + r.n*37%300 // some just under the threshold
	pad := strings.Repeat("v", max(n-len(v), 1))
	switch v[0] {
	case '"':
		return []byte(`"` + pad + string(v[1:]))
	case '{':
		if len(v) == 2 {
			return []byte(`{"pad":"` + pad + `"}`)
		}
		return []byte(`{"pad":"` + pad + `",` + string(v[1:]))
	}
	return v
}

// runConfig is one way to run a program: in memory, or on disk with a
// durability mode, a snapshot threshold and a segment size.
type runConfig struct {
	name      string
	mem       bool
	repl      bool // through a replicated log (replicated_test.go), in memory
	dur       engine.Durability
	snapBytes int64
	segBytes  int
}

// metamorphic lists the configurations every program runs under; their
// observable histories must be identical.
var metamorphic = []runConfig{
	{name: "memory", mem: true},
	{name: "replicated", mem: true, repl: true},
	{name: "always/default", dur: engine.SyncAlways},
	{name: "always/tiny", dur: engine.SyncAlways, snapBytes: 1, segBytes: 512},
	{name: "interval/default", dur: engine.SyncInterval},
	{name: "interval/tiny", dur: engine.SyncInterval, snapBytes: 700, segBytes: 1024},
	{name: "never/default", dur: engine.SyncNever},
	{name: "never/tiny", dur: engine.SyncNever, snapBytes: 1, segBytes: 300},
}

// runner executes a program against an engine and the model side by side.
type runner struct {
	tb    testing.TB
	rc    runConfig
	cfg   Config
	dir   string
	clock *engine.ManualClock
	opts  engine.Options
	db    *engine.DB
	m     *Model
	repl  *replLog // the replicated configuration's log; r.db is its leader

	leases []engine.Lease // every lease handed out, oldest first
	n      int            // payload counter
	hist   []string       // one line per call: what was asked and what came back
	ops    int            // instructions executed

	// ackSeq is the sequence number of the newest batch a call that
	// succeeded committed: under SyncAlways it must survive any crash.
	ackSeq uint64
	// fullCheck compares the whole state after every instruction, not only
	// after reopens and at the end.
	fullCheck bool
	// failed is set once the engine answered ErrFailed (fault injection):
	// from then on only errors are acceptable and the model stops.
	failed bool
	// faults tolerates errors a failed snapshot or log step gives
	// Checkpoint and Close (fault injection); whether the engine stopped is
	// then read from its next answer.
	faults bool
	// snapshotFailures counts the checkpoints and closes that failed.
	snapshotFailures int
	// closeFailed is set when Close failed; the run stops there.
	closeFailed bool
	// afterOp, if set, runs after each instruction.
	afterOp func(i int)
	// onOpen, if set, runs after every Open.
	onOpen func()
	// fsys, if set, is the file system the DB is opened on (instead of
	// the one its directory is on).
	fsys vfs.FS
	// opening is set while Open runs.
	opening atomic.Bool
	// wrap, if set, wraps the DB the program's calls go through (the
	// parity test counts them); the checks read the DB itself.
	wrap func(engine.API) engine.API
}

// newRunner opens a DB for rc (in dir, or a scratch dir when dir is "")
// with a model configured like it.
func newRunner(tb testing.TB, rc runConfig, cfg Config, dir string, tweak func(*engine.Options)) *runner {
	tb.Helper()
	return newRunnerFS(tb, rc, cfg, dir, nil, tweak)
}

// newRunnerFS is newRunner opening the DB on fsys, if set.
func newRunnerFS(tb testing.TB, rc runConfig, cfg Config, dir string, fsys vfs.FS, tweak func(*engine.Options)) *runner {
	tb.Helper()
	r := &runner{tb: tb, rc: rc, cfg: cfg, clock: engine.NewManualClock(t0), fullCheck: true, fsys: fsys}
	r.m = NewModel(cfg, t0)
	r.opts = engine.Options{Clock: r.clock, Durability: rc.dur, SnapshotBytes: rc.snapBytes,
		SegmentBytes: rc.segBytes, Logger: quiet}
	cfg.Apply(&r.opts)
	if tweak != nil {
		tweak(&r.opts)
	}
	if !rc.mem {
		r.dir = dir
		if r.dir == "" {
			r.dir = scratchDir(tb)
		}
	}
	r.open()
	tb.Cleanup(func() {
		if r.repl != nil {
			r.repl.close()
		}
		if r.db != nil {
			r.db.Close()
		}
	})
	return r
}

func (r *runner) open() {
	r.tb.Helper()
	if r.rc.repl {
		l, err := openReplicated(r.opts, nil, nil)
		if err != nil {
			r.fatalf("open: %v", err)
		}
		r.repl, r.db = l, l.members[0].db
		return
	}
	r.opening.Store(true)
	var db *engine.DB
	var err error
	if r.fsys != nil {
		opts := r.opts
		enginetest.FS(&opts, r.fsys)
		db, err = engine.Open(r.dir, opts)
	} else {
		db, err = openDB(r.dir, r.opts)
	}
	r.opening.Store(false)
	if err != nil {
		r.fatalf("open: %v", err)
	}
	r.db = db
	if r.onOpen != nil {
		r.onOpen()
	}
}

func (r *runner) fatalf(format string, args ...any) {
	r.tb.Helper()
	tail := r.hist
	if len(tail) > 25 {
		tail = tail[len(tail)-25:]
	}
	r.tb.Fatalf("[%s] after %d instructions: %s\nlast calls:\n  %s", r.rc.name, r.ops,
		fmt.Sprintf(format, args...), strings.Join(tail, "\n  "))
}

func (r *runner) q(k QueueKey) engine.Queue { return r.api().Queue(k.NS, k.Name) }

// api is what the program's calls go through: the DB, wrapped if asked.
func (r *runner) api() engine.API {
	if r.wrap != nil {
		return r.wrap(r.db)
	}
	return r.db
}

// run executes the program's instructions, at most max of them.
func (r *runner) run(p *program, max int) {
	r.tb.Helper()
	for i := 0; p.more() && i < max && !r.failed; i++ {
		code, a := p.next()
		r.step(code, a)
		if r.afterOp != nil {
			r.afterOp(i)
		}
	}
}

// record appends a history line and compares the two outcomes' classes.
func (r *runner) record(desc string, got, want error, result string) bool {
	r.tb.Helper()
	line := fmt.Sprintf("%s -> %s %s", desc, ErrClass(got), result)
	r.hist = append(r.hist, line)
	if r.failed {
		if got == nil {
			r.fatalf("%s succeeded after the engine failed", desc)
		}
		return false
	}
	if errors.Is(got, engine.ErrFailed) && !errors.Is(want, engine.ErrFailed) {
		r.failed = true
		return false
	}
	if ErrClass(got) != ErrClass(want) {
		r.fatalf("%s: engine says %v, model says %v", desc, got, want)
	}
	if got == nil && r.m.LastCommit > r.ackSeq {
		r.ackSeq = r.m.LastCommit
	}
	return got == nil
}

func (r *runner) payload(kind byte) []byte {
	r.n++
	switch kind & 3 {
	case 0:
		return nil
	case 3:
		return r.big([]byte(fmt.Sprintf(`"s%d"`, r.n)))
	}
	return r.big([]byte(fmt.Sprintf(`{"n":%d}`, r.n)))
}

func (r *runner) task(b0, b1, b2 byte) engine.Task {
	t := engine.Task{
		Delay:          delays[b0>>2&3],
		Priority:       int(b0>>4&3) - 1,
		IdempotencyKey: idems[b1&3],
		MaxAttempts:    int(b1 >> 2 & 3),
		BackoffBase:    []time.Duration{0, 100 * time.Millisecond, time.Second, 3 * time.Second}[b1>>4&3],
		Payload:        r.payload(b2),
	}
	if b0&0x40 != 0 {
		t.Kind = "job"
	}
	if b0&0x80 != 0 {
		t.Headers = map[string]string{"trace": fmt.Sprint(r.n)}
	}
	if b1&0x40 != 0 {
		t.BackoffMax = 2 * time.Second
	}
	if b1&0x80 != 0 && b2&4 != 0 {
		t.At = time.UnixMicro(r.m.Now).Add(2 * time.Second)
	}
	// A partition for one task in two (the unique ones below use these
	// bits for their payload and take none).
	t.Partition = partitions[b2>>3&3]
	if b0&3 == 3 {
		// Unique by content, over a few payloads (two of them the same
		// content) so that duplicates meet.
		t.IdempotencyKey, t.Partition = "", ""
		t.Payload = [][]byte{nil, []byte(`{"n":1,"m":[2]}`), []byte(`{ "m": [2], "n": 1 }`), []byte(`"s"`)}[b2>>3&3]
		t.Unique = &engine.Unique{Window: []time.Duration{time.Second, time.Minute}[b2>>5&1],
			States: [][]engine.State{nil, {engine.Ready, engine.Scheduled, engine.InFlight},
				{engine.Ready, engine.Scheduled, engine.InFlight, engine.Dead, engine.Waiting}, {engine.Dead, engine.InFlight, engine.Scheduled, engine.Ready, engine.Completed}}[b2>>6&3]}
	}
	return t
}

// txOp builds a KV op or an enqueue from one byte. Assertions are built to
// hold about three times in four: a key is picked that makes them hold
// when the top bit asks for it, else any key.
func (r *runner) txOp(ns engine.Namespace, b byte) TxOp {
	key := kvKeys[b>>3&7]
	holds := b&0x80 != 0
	pick := func(exists bool) string {
		for i := range kvKeys {
			k := kvKeys[(int(b>>3)+i)%len(kvKeys)]
			if _, err := r.m.KVGet(ns, k); (err == nil) == exists {
				return k
			}
		}
		return key
	}
	switch b % 6 {
	case 0:
		r.n++
		return TxOp{Kind: TxSet, Key: key, Value: []byte(fmt.Sprintf("v%d", r.n))}
	case 1:
		return TxOp{Kind: TxDelete, Key: key}
	case 2:
		if holds {
			key = pick(true)
		}
		e, _ := r.m.KVGet(ns, key)
		v := e.Version
		if b&0x40 != 0 && !holds {
			v += 3
		}
		return TxOp{Kind: TxIfVersion, Key: key, Version: v}
	case 3:
		if holds {
			key = pick(true)
		}
		return TxOp{Kind: TxIfExists, Key: key}
	case 4:
		if holds {
			key = pick(false)
		}
		return TxOp{Kind: TxIfAbsent, Key: key}
	}
	return TxOp{Kind: TxEnqueue, Queue: []string{"a", "b"}[b>>6&1], Task: engine.Task{
		IdempotencyKey: idems[b>>3&3], Payload: r.payload(1), Priority: int(b >> 7)}}
}

func txString(ops []TxOp) string {
	var parts []string
	for _, o := range ops {
		switch o.Kind {
		case TxSet:
			parts = append(parts, fmt.Sprintf("set %s=%s", o.Key, o.Value))
		case TxDelete:
			parts = append(parts, "del "+o.Key)
		case TxIfVersion:
			parts = append(parts, fmt.Sprintf("if %s@%d", o.Key, o.Version))
		case TxIfExists:
			parts = append(parts, "if-exists "+o.Key)
		case TxIfAbsent:
			parts = append(parts, "if-absent "+o.Key)
		case TxEnqueue:
			parts = append(parts, fmt.Sprintf("enqueue %s key=%q", o.Queue, o.Task.IdempotencyKey))
		}
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func taskString(t engine.Task) string {
	u := ""
	if t.Unique != nil {
		u = fmt.Sprintf(" unique=%v%v", t.Unique.Window, t.Unique.States)
	}
	return fmt.Sprintf("{pay=%s delay=%v at=%d p=%d key=%q max=%d bo=%v/%v kind=%q h=%v after=%v/%v %s%s part=%q}", t.Payload, t.Delay,
		Micros(t.At), t.Priority, t.IdempotencyKey, t.MaxAttempts, t.BackoffBase, t.BackoffMax, t.Kind, t.Headers,
		t.DependsOn, t.DependsOnSibling, t.OnParentFailure, u, t.Partition)
}

// depID returns an id to depend on: with the top bit, one of the tasks of
// namespace ns (any queue, any state), else any id up to one past the
// newest (ended tasks, and one that never existed).
func (r *runner) depID(ns engine.Namespace, b byte) uint64 {
	if b&0x80 != 0 {
		var ids []uint64
		for _, q := range queues {
			if q.NS != ns {
				continue
			}
			for _, s := range States {
				for _, t := range r.m.List(q, s) {
					ids = append(ids, t.ID)
				}
			}
		}
		if len(ids) > 0 {
			slices.Sort(ids)
			return ids[int(b&0x7f)%len(ids)]
		}
	}
	return 1 + uint64(b&0x7f)%r.m.NextID
}

// pickLease returns a lease handed out earlier: mostly one the model says
// is still held, sometimes any (stale ones included), so that both fenced
// successes and late zombies are exercised.
func (r *runner) pickLease(b byte) (engine.Lease, QueueKey) {
	if len(r.leases) == 0 {
		q := queues[b&3]
		return engine.Lease{ID: 1, Namespace: q.NS, Queue: q.Name, Token: 1, Owner: "w0"}, q
	}
	var l engine.Lease
	if b&0xc0 == 0xc0 {
		l = r.leases[int(b&0x3f)%len(r.leases)]
	} else {
		var live []engine.Lease
		for i := len(r.leases) - 1; i >= 0 && len(live) < 8 && i >= len(r.leases)-64; i-- {
			x := r.leases[i]
			if t, ok := r.m.Task(x.ID); ok && t.State == engine.InFlight && t.Token == x.Token {
				live = append(live, x)
			}
		}
		if len(live) > 0 {
			l = live[int(b&0x3f)%len(live)]
		} else {
			l = r.leases[len(r.leases)-1-int(b&0x3f)%min(len(r.leases), 8)]
		}
	}
	return l, QueueKey{l.Namespace, l.Queue}
}

// busiest returns the queue with the most tasks a claim could take now.
func (r *runner) busiest() QueueKey {
	best, most := queues[0], -1
	for _, q := range queues {
		n := len(r.m.List(q, engine.Ready)) // due timers and expired leases included
		if n > most {
			best, most = q, n
		}
	}
	return best
}

// pickID returns a task id: of a task in q in state (or any state) when
// there is one and b asks for it, else any id up to one past the newest.
func (r *runner) pickID(q QueueKey, b byte, state engine.State) uint64 {
	if b&0x80 != 0 {
		var ids []uint64
		for _, s := range States {
			if state == 0 || s == state {
				for _, t := range r.m.List(q, s) {
					ids = append(ids, t.ID)
				}
			}
		}
		if len(ids) > 0 {
			slices.Sort(ids)
			return ids[int(b&0x7f)%len(ids)]
		}
	}
	return 1 + uint64(b&0x7f)%r.m.NextID
}

func errClasses(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = ErrClass(e)
	}
	return out
}

func leasesString(ls []engine.Lease) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, LeaseString(l))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (r *runner) sync() { r.m.Now = r.clock.Now().UnixMicro() }

// step executes one instruction on the engine and the model and compares
// the outcomes.
func (r *runner) step(code int, a [opSize - 1]byte) {
	r.tb.Helper()
	r.ops++
	r.sync()
	switch code {
	case opEnqueue:
		q := queues[a[0]&3]
		t := r.task(a[1], a[2], a[3])
		var ops []TxOp
		for i := range []int{0, 0, 1, 2}[a[4]&3] {
			ops = append(ops, r.txOp(q.NS, a[5+i]))
		}
		if a[4]&0x80 != 0 {
			// The same enqueue 1 to 4 times, all in flight before the first
			// is waited for: one commit each, in call order. A replicated
			// DB submits each from a goroutine of its own, so the log may
			// take them in another order: there each is waited for before
			// the next is made.
			n := 1 + int(a[4]>>5&3)
			gots := make([]engine.Enqueued, n)
			gerrs := make([]error, n)
			var ps []*engine.Pending
			for i := range n {
				p := r.q(q).EnqueueAsync(ctx, t, EngineOps(ops)...)
				if r.repl != nil {
					gots[i], gerrs[i] = p.Wait(ctx)
				}
				ps = append(ps, p)
			}
			// Every outcome first: until then the engine's goroutine may
			// still be at a failpoint, whose recorder reads the model.
			for i, p := range ps {
				gots[i], gerrs[i] = p.Wait(ctx)
			}
			for i := range ps {
				got, gerr := gots[i], gerrs[i]
				want, werr := r.m.Enqueue(q, []engine.Task{t}, ops)
				desc := fmt.Sprintf("enqueue async %d/%d %s %s %s", i+1, len(ps), q, taskString(t), txString(ops))
				if r.record(desc, gerr, werr, fmt.Sprint(got)) && got != want[0] {
					r.fatalf("%s: engine %+v, model %+v", desc, got, want[0])
				}
			}
			break
		}
		got, gerr := r.q(q).Enqueue(ctx, t, EngineOps(ops)...)
		want, werr := r.m.Enqueue(q, []engine.Task{t}, ops)
		desc := fmt.Sprintf("enqueue %s %s %s", q, taskString(t), txString(ops))
		if r.record(desc, gerr, werr, fmt.Sprint(got)) && got != want[0] {
			r.fatalf("%s: engine %+v, model %+v", desc, got, want[0])
		}
	case opBatch:
		q := queues[a[0]&3]
		var ts []engine.Task
		for i := range 1 + int(a[0]>>2&3) {
			ts = append(ts, r.task(a[1+i]&0x3f, a[1+i]>>6|a[5]&0x3c, 1))
		}
		var ops []TxOp
		if a[6]&1 != 0 {
			ops = append(ops, r.txOp(q.NS, a[6]>>1))
		}
		got, gerr := r.q(q).EnqueueBatch(ctx, ts, EngineOps(ops)...)
		want, werr := r.m.Enqueue(q, ts, ops)
		desc := fmt.Sprintf("batch %s %d tasks %s", q, len(ts), txString(ops))
		if r.record(desc, gerr, werr, fmt.Sprint(got)) && !slices.Equal(got, want) {
			r.fatalf("%s: engine %+v, model %+v", desc, got, want)
		}
	case opClaim:
		q := queues[a[0]&3]
		if a[0]&4 != 0 {
			q = r.busiest()
		}
		owner, lease, max := owners[a[1]&3], leaseDs[a[2]&3], []int{1, 2, 3, 10}[a[3]&3]
		// ClaimWait when the model says there is work, so that it returns at
		// once (waking is the engine's own tests' business).
		wait := a[3]&4 != 0 && r.m.Clone().claimable(q)
		var got []engine.Lease
		var gerr error
		if wait {
			got, gerr = r.q(q).ClaimWait(ctx, owner, lease, max)
		} else {
			got, gerr = r.q(q).Claim(ctx, owner, lease, max)
		}
		want, werr := r.m.Claim(q, owner, lease, max)
		desc := fmt.Sprintf("claim %s %s %v %d", q, owner, lease, max)
		if r.record(desc, gerr, werr, leasesString(got)) {
			if g, w := leasesString(got), leasesString(want); g != w {
				r.fatalf("%s:\nengine %s\nmodel  %s", desc, g, w)
			}
			r.m.Leased(got)
			r.leases = append(r.leases, got...)
		}
	case opComplete:
		l, q := r.pickLease(a[0])
		var result []byte
		if a[1]&1 != 0 {
			result = r.big([]byte(fmt.Sprintf(`{"r":%d}`, r.n)))
		}
		var ops []TxOp
		for i := range int(a[1] >> 1 & 3) {
			if i < 2 {
				ops = append(ops, r.txOp(q.NS, a[2+i]))
			}
		}
		var follow []engine.FollowUp
		for i := range int(a[1] >> 3 & 3) {
			if i < 2 {
				b := a[4+i]
				follow = append(follow, engine.FollowUp{Queue: []string{"a", "b"}[b&1], Task: r.task(b>>1, b>>3, 1)})
			}
		}
		// Follow-ups that wait: on the task being completed (satisfied), on
		// another task, on the follow-up before them.
		if len(follow) > 0 && a[1]&0x40 != 0 {
			follow[0].Task.DependsOn = []uint64{l.ID}
		}
		if len(follow) > 0 && a[1]&0x80 != 0 {
			follow[0].Task.DependsOn = append(follow[0].Task.DependsOn, r.depID(q.NS, a[6]))
			follow[0].Task.OnParentFailure = engine.DependencyPolicy(a[6] % 3)
		}
		if len(follow) > 1 && a[6]&0x40 != 0 {
			follow[1].Task.DependsOnSibling = []int{countEnqueues(ops)}
		}
		d := engine.Done{Result: result, Ops: EngineOps(ops), FollowUps: follow}
		desc := fmt.Sprintf("complete %d tok %d result=%s ops=%s follow-ups=%d", l.ID, l.Token, result,
			txString(ops), len(follow))
		if a[1]&0x20 != 0 {
			// And claim the next tasks of the queue in the same commit.
			owner, lease, max := owners[a[6]&3], leaseDs[a[6]>>2&3], []int{1, 2, 3, 10}[a[6]>>4&3]
			_, got, gerr := r.q(q).CompleteAndClaim(ctx, l, d, owner, lease, max)
			want, werr := r.m.CompleteAndClaim(q, l, result, ops, follow, owner, lease, max)
			desc += fmt.Sprintf(" and claim %s %v %d", owner, lease, max)
			if r.record(desc, gerr, werr, leasesString(got)) {
				if g, w := leasesString(got), leasesString(want); g != w {
					r.fatalf("%s:\nengine %s\nmodel  %s", desc, g, w)
				}
				r.m.Leased(got)
				r.leases = append(r.leases, got...)
			}
			break
		}
		_, gerr := r.q(q).Complete(ctx, l, d)
		werr := r.m.Complete(q, l, result, ops, follow)
		r.record(desc, gerr, werr, "")
	case opFail:
		l, q := r.pickLease(a[0])
		f := engine.Failure{Permanent: a[1]&1 != 0, RetryAfter: []time.Duration{0, 0, 2 * time.Second, time.Minute}[a[1]>>1&3]}
		if a[1]&8 != 0 {
			f.Err = fmt.Sprintf("boom %d", r.n)
		}
		gerr := r.q(q).Fail(ctx, l, f)
		werr := r.m.Fail(q, l, f)
		r.record(fmt.Sprintf("fail %d tok %d %+v", l.ID, l.Token, f), gerr, werr, "")
	case opHeartbeat:
		l, q := r.pickLease(a[0])
		extend := []time.Duration{time.Second, 10 * time.Second, time.Minute, 90 * time.Second}[a[1]&3]
		if a[1]&0x10 != 0 {
			// A batch of up to four leases of q's: a lease of another
			// queue refuses the whole call (invalid), unless it names no
			// queue (then its fence refuses it alone).
			ls := []engine.Lease{l}
			for i := range int(a[1] >> 5 & 3) {
				x, _ := r.pickLease(a[2+i])
				if a[1]&0x80 != 0 {
					x.Namespace, x.Queue = engine.Namespace{}, ""
				}
				ls = append(ls, x)
			}
			if a[1]>>2&3 == 3 {
				// Complete them instead, in one commit.
				errs, gerr := r.q(q).CompleteBatch(ctx, ls)
				werrs, werr := r.m.CompleteBatch(q, ls)
				desc := fmt.Sprintf("complete batch %s %d leases", q, len(ls))
				if r.record(desc, gerr, werr, "") {
					for i := range ls {
						if ErrClass(errs[i]) != ErrClass(werrs[i]) {
							r.fatalf("%s: lease %d (task %d tok %d): engine %v, model %v", desc, i, ls[i].ID, ls[i].Token, errs[i], werrs[i])
						}
					}
					r.hist = append(r.hist, fmt.Sprintf("  outcomes %v", errClasses(errs)))
				}
				break
			}
			ptrs := make([]*engine.Lease, len(ls))
			for i := range ls {
				ptrs[i] = &ls[i]
			}
			errs, gerr := r.q(q).HeartbeatBatch(ctx, ptrs, extend)
			werrs, dl, werr := r.m.HeartbeatBatch(q, ls, extend)
			desc := fmt.Sprintf("heartbeat batch %s %d leases +%v", q, len(ls), extend)
			if r.record(desc, gerr, werr, "") {
				for i := range ls {
					if ErrClass(errs[i]) != ErrClass(werrs[i]) {
						r.fatalf("%s: lease %d (task %d tok %d): engine %v, model %v", desc, i, ls[i].ID, ls[i].Token, errs[i], werrs[i])
					}
					if errs[i] == nil && Micros(ls[i].Deadline) != Micros(dl) {
						r.fatalf("%s: lease %d deadline %v, model %v", desc, i, ls[i].Deadline, dl)
					}
				}
				r.hist = append(r.hist, fmt.Sprintf("  outcomes %v", errClasses(errs)))
			}
			break
		}
		var progress []byte
		switch a[1] >> 2 & 3 {
		case 1:
			progress = r.big([]byte(fmt.Sprintf(`{"p":%d}`, r.n)))
		case 2:
			progress = []byte{}
		}
		got, gerr := hb(ctx, r.q(q), l, extend, progress)
		want, werr := r.m.Heartbeat(q, l, extend, progress)
		desc := fmt.Sprintf("heartbeat %d tok %d +%v progress=%q", l.ID, l.Token, extend, progress)
		if r.record(desc, gerr, werr, fmt.Sprint(Micros(got))) && Micros(got) != Micros(want) {
			r.fatalf("%s: deadline %v, model %v", desc, got, want)
		}
	case opSnooze:
		l, q := r.pickLease(a[0])
		d := []time.Duration{0, 3 * time.Second}[a[1]&1]
		gerr := r.q(q).Snooze(ctx, l, d)
		werr := r.m.Snooze(q, l, d)
		r.record(fmt.Sprintf("snooze %d tok %d %v", l.ID, l.Token, d), gerr, werr, "")
	case opCancel:
		q := queues[a[0]&3]
		id := r.pickID(q, a[1], 0)
		gerr := r.q(q).Cancel(ctx, id)
		werr := r.m.Cancel(q, id)
		r.record(fmt.Sprintf("cancel %s %d", q, id), gerr, werr, "")
	case opRedrive:
		q := queues[a[0]&3]
		if a[1]&1 != 0 {
			got, gerr := r.q(q).RedriveAll(ctx)
			want, werr := r.m.RedriveAll(q)
			if r.record("redrive-all "+q.String(), gerr, werr, fmt.Sprint(got)) && got != want {
				r.fatalf("redrive-all %s: %d, model %d", q, got, want)
			}
			break
		}
		if a[1]&6 == 6 {
			// Run now: a scheduled task (a timer, a retry's backoff) if
			// there is one, or any id.
			id := r.pickID(q, a[2]|0x80, engine.Scheduled)
			if a[1]&8 != 0 {
				id = r.pickID(q, a[2], 0)
			}
			gerr := r.q(q).RunNow(ctx, id)
			werr := r.m.RunNow(q, id)
			r.record(fmt.Sprintf("run-now %s %d", q, id), gerr, werr, "")
			break
		}
		if a[1]&6 == 4 {
			// Reschedule: a scheduled task if there is one, or any id;
			// to a time around now (before it, after it, or kept) and a
			// priority (or kept), now and then nothing or a bad time.
			id := r.pickID(q, a[2]|0x80, engine.Scheduled)
			if a[1]&8 != 0 {
				id = r.pickID(q, a[2], 0)
			}
			var rs engine.Reschedule
			switch a[1] >> 4 & 3 {
			case 1:
				rs.At = r.clock.Now().Add(-2 * time.Second)
			case 2:
				rs.At = r.clock.Now().Add(5 * time.Second)
			case 3:
				if a[1]&0x40 != 0 {
					rs.At = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
				}
			}
			if a[1]&0x80 != 0 {
				p := int(a[2]&3) - 1
				rs.Priority = &p
			}
			gerr := r.q(q).Reschedule(ctx, id, rs)
			werr := r.m.Reschedule(q, id, rs)
			r.record(fmt.Sprintf("reschedule %s %d at=%v prio=%v", q, id, rs.At, rs.Priority != nil), gerr, werr, "")
			break
		}
		id := r.pickID(q, a[2], engine.Dead)
		gerr := r.q(q).Redrive(ctx, id)
		werr := r.m.Redrive(q, id)
		r.record(fmt.Sprintf("redrive %s %d", q, id), gerr, werr, "")
	case opKV:
		ns := allNS[a[0]&1]
		var ops []TxOp
		for i := range 1 + int(a[0]>>1&3) {
			if i < 3 {
				ops = append(ops, r.txOp(ns, a[1+i]))
			}
		}
		got, gerr := r.api().KV(ns).Commit(ctx, EngineOps(ops)...)
		want, werr := r.m.Commit(ns, ops)
		desc := fmt.Sprintf("kv %s %s", ns, txString(ops))
		if r.record(desc, gerr, werr, fmt.Sprint(got)) &&
			(got.Version != want.Version || !slices.Equal(got.Enqueued, want.Enqueued)) {
			r.fatalf("%s: engine %+v, model %+v", desc, got, want)
		}
	case opAdvance:
		d := moves[a[0]&7]
		r.clock.Advance(d)
		r.sync()
		r.hist = append(r.hist, fmt.Sprintf("advance %v", d))
	case opCheckpoint:
		err := r.db.Checkpoint(ctx)
		if err != nil && r.faults {
			r.snapshotFailed("checkpoint", err)
			break
		}
		r.record("checkpoint", err, nil, "")
	case opReopen:
		r.reopen()
	case opForged:
		r.forged(a)
	case opInvalid:
		r.invalid(a)
	case opRead:
		r.read(a)
	case opControl:
		r.control(a)
	case opDepend:
		r.depend(a)
	case opBulk:
		r.bulk(a)
	}
	if r.fullCheck && !r.failed {
		r.checkStatePaged("after "+opNames[code], engine.MaxBatch)
	} else if !r.failed {
		if got := r.db.Stats().Seq; got != r.m.Seq {
			r.fatalf("engine at seq %d, model at %d", got, r.m.Seq)
		}
	}
}

// countEnqueues is how many of ops enqueue.
func countEnqueues(ops []TxOp) int {
	n := 0
	for _, o := range ops {
		if o.Kind == TxEnqueue {
			n++
		}
	}
	return n
}

// depend enqueues tasks that wait on others: alone, waiting on up to three
// ids (tasks of the namespace in any state, ended ones, one that never
// existed), or as a batch whose later tasks wait on the earlier, each with
// a policy.
func (r *runner) depend(a [opSize - 1]byte) {
	q := queues[a[0]&3]
	policy := engine.DependencyPolicy(a[0] >> 2 & 3 % 3)
	var ids []uint64
	for i := range 1 + int(a[0]>>4&3) {
		if i < 3 {
			ids = append(ids, r.depID(q.NS, a[1+i]))
		}
	}
	t := r.task(a[4]&0x3f, a[5], 1)
	t.DependsOn, t.OnParentFailure = ids, policy
	ts := []engine.Task{t}
	if a[6]&1 != 0 {
		ts = append(ts,
			engine.Task{DependsOnSibling: []int{0}, OnParentFailure: engine.DependencyPolicy(a[6] >> 1 & 3 % 3), MaxAttempts: 1},
			engine.Task{DependsOnSibling: []int{1, 0}, DependsOn: ids[:1], OnParentFailure: engine.DependencyPolicy(a[6] >> 3 & 3 % 3),
				Delay: delays[a[6]>>5&3]})
	}
	var ops []TxOp
	if a[6]&0x80 != 0 {
		op := r.txOp(q.NS, 5)
		op.Task.DependsOnSibling = []int{0}
		ops = append(ops, op)
	}
	var got []engine.Enqueued
	var gerr error
	if len(ts) == 1 && a[4]&0x40 == 0 {
		var e engine.Enqueued
		e, gerr = r.q(q).Enqueue(ctx, t, EngineOps(ops)...)
		got = []engine.Enqueued{e}
	} else {
		got, gerr = r.q(q).EnqueueBatch(ctx, ts, EngineOps(ops)...)
	}
	want, werr := r.m.Enqueue(q, ts, ops)
	var parts []string
	for _, t := range ts {
		parts = append(parts, taskString(t))
	}
	desc := fmt.Sprintf("depend %s %s %s", q, strings.Join(parts, " "), txString(ops))
	if r.record(desc, gerr, werr, fmt.Sprint(got)) && !slices.Equal(got, want) {
		r.fatalf("%s: engine %+v, model %+v", desc, got, want)
	}
}

// forged presents a lease that was never handed out: a token off by one,
// another task's id, or the right lease on the wrong queue (with or
// without the queue it names).
func (r *runner) forged(a [opSize - 1]byte) {
	l, q := r.pickLease(a[0])
	switch a[1] & 3 {
	case 0:
		l.Token++
	case 1:
		l.Token--
	case 2:
		l.ID++
	case 3:
		q = queues[(slices.Index(queues, q)+1+int(a[1]>>2&1))%len(queues)]
		if a[1]&0x20 != 0 {
			// Without its queue the lease is judged by the fence alone
			// (lost); with it, it is refused as another queue's (invalid).
			l.Namespace, l.Queue = engine.Namespace{}, ""
		}
	}
	desc := fmt.Sprintf("forged %d tok %d on %s", l.ID, l.Token, q)
	batch := a[1]&0x40 != 0 // the calls of several steps in one commit
	switch a[1] >> 3 & 3 {
	case 0:
		if batch {
			_, ls, gerr := r.q(q).CompleteAndClaim(ctx, l, engine.Done{}, "w0", time.Minute, 3)
			_, werr := r.m.CompleteAndClaim(q, l, nil, nil, nil, "w0", time.Minute, 3)
			if r.record(desc+" complete and claim", gerr, werr, leasesString(ls)) {
				r.fatalf("%s: a forged lease completed and claimed %s", desc, leasesString(ls))
			}
			break
		}
		r.record(desc+" complete", errOnly(r.q(q).Complete(ctx, l, engine.Done{})), r.m.Complete(q, l, nil, nil, nil), "")
	case 1:
		f := engine.Failure{Err: "forged"}
		r.record(desc+" fail", r.q(q).Fail(ctx, l, f), r.m.Fail(q, l, f), "")
	case 2:
		if batch {
			x := l
			errs, gerr := r.q(q).HeartbeatBatch(ctx, []*engine.Lease{&x}, time.Minute)
			werrs, _, werr := r.m.HeartbeatBatch(q, []engine.Lease{l}, time.Minute)
			if r.record(desc+" heartbeat batch", gerr, werr, "") {
				if ErrClass(errs[0]) != ErrClass(werrs[0]) || errs[0] == nil {
					r.fatalf("%s heartbeat batch: engine %v, model %v", desc, errs[0], werrs[0])
				}
				r.hist = append(r.hist, fmt.Sprintf("  outcomes %v", errClasses(errs)))
			}
			break
		}
		_, gerr := hb(ctx, r.q(q), l, time.Minute, nil)
		_, werr := r.m.Heartbeat(q, l, time.Minute, nil)
		r.record(desc+" heartbeat", gerr, werr, "")
	case 3:
		r.record(desc+" snooze", r.q(q).Snooze(ctx, l, 0), r.m.Snooze(q, l, 0), "")
	}
}

// invalid makes a call the engine must refuse with ErrInvalid before
// writing anything.
func (r *runner) invalid(a [opSize - 1]byte) {
	q := queues[a[1]&3]
	l, lq := r.pickLease(a[2])
	var gerr, werr error
	var desc string
	switch a[0] % 14 {
	case 0:
		t := engine.Task{Payload: []byte(`{"broken":`)}
		desc = "enqueue bad json"
		_, gerr = r.q(q).Enqueue(ctx, t)
		_, werr = r.m.Enqueue(q, []engine.Task{t}, nil)
	case 1:
		t := engine.Task{Delay: -time.Second}
		desc = "enqueue negative delay"
		_, gerr = r.q(q).Enqueue(ctx, t)
		_, werr = r.m.Enqueue(q, []engine.Task{t}, nil)
	case 2:
		desc = "claim zero lease"
		_, gerr = r.q(q).Claim(ctx, "w0", 0, 1)
		_, werr = r.m.Claim(q, "w0", 0, 1)
	case 3:
		desc = "claim max 0"
		_, gerr = r.q(q).Claim(ctx, "w0", time.Second, 0)
		_, werr = r.m.Claim(q, "w0", time.Second, 0)
	case 4:
		desc = "heartbeat zero extend"
		_, gerr = hb(ctx, r.q(lq), l, 0, nil)
		_, werr = r.m.Heartbeat(lq, l, 0, nil)
	case 5:
		desc = "empty transaction"
		_, gerr = r.api().KV(q.NS).Commit(ctx)
		_, werr = r.m.Commit(q.NS, nil)
	case 6:
		ops := []TxOp{{Kind: TxSet, Key: ""}}
		desc = "set empty key"
		_, gerr = r.api().KV(q.NS).Commit(ctx, EngineOps(ops)...)
		_, werr = r.m.Commit(q.NS, ops)
	case 7:
		desc = "complete bad result"
		gerr = errOnly(r.q(lq).Complete(ctx, l, engine.Done{Result: []byte("{")}))
		werr = r.m.Complete(lq, l, []byte("{"), nil, nil)
	case 8:
		desc = "claim empty owner"
		_, gerr = r.q(q).Claim(ctx, "", time.Second, 1)
		_, werr = r.m.Claim(q, "", time.Second, 1)
	case 9:
		desc = "complete and claim max 0"
		_, _, gerr = r.q(lq).CompleteAndClaim(ctx, l, engine.Done{}, "w0", time.Second, 0)
		_, werr = r.m.CompleteAndClaim(lq, l, nil, nil, nil, "w0", time.Second, 0)
	case 10:
		desc = "heartbeat batch zero extend"
		x := l
		_, gerr = r.q(lq).HeartbeatBatch(ctx, []*engine.Lease{&x}, 0)
		_, _, werr = r.m.HeartbeatBatch(lq, []engine.Lease{l}, 0)
	case 11:
		t := engine.Task{Payload: []byte(`[1,`)}
		desc = "enqueue async bad json"
		_, gerr = r.q(q).EnqueueAsync(ctx, t).Wait(ctx)
		_, werr = r.m.Enqueue(q, []engine.Task{t}, nil)
	case 12:
		t := engine.Task{IdempotencyKey: "k0", Unique: &engine.Unique{Window: time.Minute}}
		desc = "enqueue unique with a key"
		_, gerr = r.q(q).Enqueue(ctx, t)
		_, werr = r.m.Enqueue(q, []engine.Task{t}, nil)
	case 13:
		l := engine.Limits{Rate: 3}
		desc = "limits without per"
		gerr = r.q(q).SetLimits(ctx, l)
		werr = r.m.SetLimits(q, l)
	}
	if werr == nil || !errors.Is(werr, engine.ErrInvalid) {
		r.fatalf("model accepted invalid call %s: %v", desc, werr)
	}
	r.record("invalid "+desc, gerr, werr, "")
}

// read makes read-only calls and compares their answers.
func (r *runner) read(a [opSize - 1]byte) {
	q := queues[a[1]&3]
	switch a[0] % 4 {
	case 0:
		id := r.pickID(q, a[2], 0)
		got, gerr := r.q(q).Get(ctx, id)
		want, werr := r.m.Get(q, id)
		g := RecOf(got)
		if r.record(fmt.Sprintf("get %s %d", q, id), gerr, werr, "") && g.String() != want.String() {
			r.fatalf("get %d:\nengine %s\nmodel  %s", id, g.String(), want.String())
		}
	case 1:
		got, gerr := r.q(q).Counts(ctx)
		want := r.m.Counts(q)
		if r.record("counts "+q.String(), gerr, nil, fmt.Sprint(got)) && got != want {
			r.fatalf("counts %s: %+v, model %+v", q, got, want)
		}
		r.checkQueues("queues")
		r.checkPartitions(q)
	case 2:
		key := kvKeys[a[2]&7]
		got, gerr := r.api().KV(q.NS).Get(ctx, key)
		want, werr := r.m.KVGet(q.NS, key)
		if r.record(fmt.Sprintf("kv-get %s %s", q.NS, key), gerr, werr, "") &&
			(got.Key != want.Key || !bytes.Equal(got.Value, want.Value) || got.Version != want.Version) {
			r.fatalf("kv get %s: %+v, model %+v", key, got, want)
		}
	case 3:
		o := engine.ScanOptions{Prefix: []string{"", "a", "a/", "c"}[a[2]&3], Limit: int(a[2] >> 2 & 3)}
		if a[2]&0x10 != 0 {
			o.Start = "a/2"
		}
		if a[2]&0x20 != 0 {
			o.End = "b"
		}
		got, gerr := r.api().KV(q.NS).Scan(ctx, o)
		want, werr := r.m.Scan(q.NS, o)
		if r.record(fmt.Sprintf("scan %s %+v", q.NS, o), gerr, werr, "") && entriesString(got) != entriesString(want) {
			r.fatalf("scan %+v:\nengine %s\nmodel  %s", o, entriesString(got), entriesString(want))
		}
	}
}

// checkPartitions lists q's partitions two to a page and compares them
// with the model's.
func (r *runner) checkPartitions(q QueueKey) {
	var got []engine.PartitionInfo
	o := engine.PartitionListOptions{Limit: 2}
	for {
		p, err := r.q(q).Partitions(ctx, o)
		if err != nil {
			r.fatalf("partitions %s: %v", q, err)
		}
		got = append(got, p.Partitions...)
		if p.Next == "" {
			break
		}
		o.Cursor = p.Next
	}
	if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", r.m.Partitions(q)); g != w {
		r.fatalf("partitions %s:\nengine %s\nmodel  %s", q, g, w)
	}
}

// partitions are the partitions of the tasks programs enqueue ("" is
// none).
var partitions = []string{"", "", "a", "b"}

// limitSets are the limits programs set: none, a bound, rates with and
// without a burst, both.
var limitSets = []engine.Limits{
	{}, {MaxInFlight: 1}, {MaxInFlight: 3}, {Rate: 1, Per: time.Second},
	{Rate: 2, Per: 3 * time.Second, Burst: 4}, {MaxInFlight: 2, Rate: 3, Per: time.Second, Burst: 1},
	{Rate: 5, Per: time.Minute}, {MaxInFlight: 2, Rate: 1, Per: time.Second},
}

// control pauses, resumes, limits or reads a queue's settings.
func (r *runner) control(a [opSize - 1]byte) {
	q := queues[a[1]&3]
	switch a[0] % 4 {
	case 0:
		r.record("pause "+q.String(), r.q(q).Pause(ctx), r.m.Pause(q), "")
	case 1:
		r.record("resume "+q.String(), r.q(q).Resume(ctx), r.m.Resume(q), "")
	case 2:
		l := limitSets[a[2]&7]
		if a[2]&8 != 0 {
			l.PartitionMaxInFlight = 1 + int(a[2]>>4&1)
		}
		if a[2]&0x20 != 0 {
			l.PartitionRate, l.PartitionPer = 1+int(a[2]>>6&1), time.Second
			if a[2]&0x80 != 0 {
				l.PartitionBurst = 3
			}
		}
		r.record(fmt.Sprintf("limits %s %+v", q, l), r.q(q).SetLimits(ctx, l), r.m.SetLimits(q, l), "")
	case 3:
		got, gerr := r.q(q).Settings(ctx)
		want, werr := r.m.Settings(q)
		if r.record("settings "+q.String(), gerr, werr, fmt.Sprintf("%+v", got)) && got != want {
			r.fatalf("settings %s: %+v, model %+v", q, got, want)
		}
	}
}

func entriesString(es []engine.Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%q=%q@%d ", e.Key, e.Value, e.Version)
	}
	return b.String()
}

// reopen closes and reopens the DB (on disk) and requires the whole state to
// be unchanged and the indexes to verify.
func (r *runner) reopen() {
	r.tb.Helper()
	r.hist = append(r.hist, "reopen")
	if r.repl != nil && !r.failed {
		r.repl = r.repl.reopen(r)
		r.db = r.repl.members[0].db
		if err := r.db.Verify(); err != nil {
			r.fatalf("verify after reopen: %v", err)
		}
		r.checkState("after reopen")
		return
	}
	if r.rc.mem || r.failed {
		return
	}
	if err := r.api().Close(); err != nil {
		if !r.faults {
			r.fatalf("close: %v", err)
		}
		// The test reopens the directory itself and judges it.
		r.snapshotFailures++
		r.closeFailed, r.failed = true, true
		r.hist = append(r.hist, fmt.Sprintf("close -> %v", err))
		return
	}
	r.open()
	if err := r.db.Verify(); err != nil {
		r.fatalf("verify after reopen: %v", err)
	}
	r.checkState("after reopen")
}

// snapshotFailed records a failed checkpoint: the engine either goes on
// (the log still holds everything) or, if the failure was the log's, stops.
func (r *runner) snapshotFailed(what string, err error) {
	r.snapshotFailures++
	r.hist = append(r.hist, fmt.Sprintf("%s -> %v", what, err))
	if _, probe := r.q(queues[0]).Counts(ctx); probe != nil {
		if !errors.Is(probe, engine.ErrFailed) {
			r.fatalf("after a failed %s the engine answers %v", what, probe)
		}
		r.failed = true
	}
}

// checkState requires the engine's whole observable state to equal the
// model's, reading it in small pages so that cursors are exercised.
func (r *runner) checkState(when string) { r.tb.Helper(); r.checkStatePaged(when, 3) }

func (r *runner) checkStatePaged(when string, limit int) {
	r.tb.Helper()
	got, err := readViewVia(r.db, r.api(), limit)
	if err != nil {
		r.fatalf("%s: reading the state: %v", when, err)
	}
	// Equal views render alike: only unequal ones are rendered (which
	// took most of the time of a check) and compared as text.
	if want := r.view(); !sameView(got, want) {
		if d := Diff(got.String(), want.String()); d != "" {
			r.fatalf("%s: state differs from the model: %s", when, d)
		}
	}
	r.checkQueues(when)
}

func (r *runner) view() View { return r.m.View(queues, allNS) }

// sameView reports whether a and b are equal but for the lease secrets,
// which the engine does not report (Rec.Secret), so that they render
// alike. Comparing them with reflect.DeepEqual found every view with a
// lease in it unequal, and rendered both.
func sameView(a, b View) bool {
	if a.Seq != b.Seq || len(a.Tasks) != len(b.Tasks) || !reflect.DeepEqual(a.KV, b.KV) {
		return false
	}
	for q, pa := range a.Tasks {
		pb, ok := b.Tasks[q]
		if !ok || len(pa) != len(pb) {
			return false
		}
		for i := range pa {
			if len(pa[i]) != len(pb[i]) {
				return false
			}
			for j := range pa[i] {
				ra := pa[i][j]
				ra.Secret = pb[i][j].Secret
				if !reflect.DeepEqual(ra, pb[i][j]) {
					return false
				}
			}
		}
	}
	return true
}

// checkQueues requires DB.Queues (counts, oldest ready time, totals) to
// equal the model's.
func (r *runner) checkQueues(when string) {
	r.tb.Helper()
	got, err := r.api().Queues(ctx)
	if err != nil {
		r.fatalf("%s: Queues: %v", when, err)
	}
	if g, w := queuesString(got), queuesString(r.m.Queues(queues)); g != w {
		r.fatalf("%s: Queues:\nengine %s\nmodel  %s", when, g, w)
	}
}

func queuesString(qs []engine.QueueInfo) string {
	var lines []string
	for _, q := range qs {
		lines = append(lines, fmt.Sprintf("%s/%s %+v oldest=%d %+v paused=%v %+v", q.Namespace, q.Name, q.Counts,
			Micros(q.OldestReady), q.Totals, q.Paused, q.Limits))
	}
	slices.Sort(lines)
	return strings.Join(lines, "; ")
}

// readView reads the whole observable state of db through List (paging with
// a small limit, so cursors are exercised) and Scan.
func readView(db *engine.DB) (View, error) { return readViewPaged(db, 3) }

func readViewPaged(db *engine.DB, limit int) (View, error) { return readViewVia(db, db, limit) }

// readViewVia is readViewPaged reading the tasks and entries through api.
func readViewVia(db *engine.DB, api engine.API, limit int) (View, error) {
	v := View{Seq: db.Stats().Seq, Tasks: map[QueueKey][][]Rec{}, KV: map[engine.Namespace][]engine.Entry{}}
	for _, q := range queues {
		per := make([][]Rec, len(States))
		for i, s := range States {
			cursor := ""
			for {
				page, err := api.Queue(q.NS, q.Name).List(ctx, engine.ListOptions{State: s, Limit: limit, Cursor: cursor})
				if err != nil {
					return v, err
				}
				for _, t := range page.Tasks {
					if t.Unreadable != "" {
						// A value left out, named: the damage is reported,
						// not a state to compare with the model's.
						return v, fmt.Errorf("%w: task %d: %s", engine.ErrCorrupt, t.ID, t.Unreadable)
					}
					per[i] = append(per[i], RecOf(t))
				}
				if page.Next == "" {
					break
				}
				cursor = page.Next
			}
		}
		v.Tasks[q] = per
	}
	for _, ns := range allNS {
		start := ""
		for {
			es, err := api.KV(ns).Scan(ctx, engine.ScanOptions{Start: start, Limit: min(limit, 2+limit/100)})
			if err != nil {
				return v, err
			}
			v.KV[ns] = append(v.KV[ns], es...)
			if len(es) < min(limit, 2+limit/100) {
				break
			}
			start = es[len(es)-1].Key + "\x00"
		}
	}
	return v, nil
}

// finish closes and reopens once more (on disk) and checks the final state.
func (r *runner) finish() {
	r.tb.Helper()
	if r.failed {
		return
	}
	r.checkState("at the end")
	r.reopen()
}

// genProgram returns a random program of n instructions whose opcodes are
// drawn with the given weights (indexed by opcode).
func genProgram(rng *rand.Rand, n int, weights [numOps]int, cfg byte) []byte {
	total := 0
	for _, w := range weights {
		total += w
	}
	out := []byte{cfg}
	for range n {
		x := rng.IntN(total)
		code := 0
		for x >= weights[code] {
			x -= weights[code]
			code++
		}
		out = append(out, byte(code))
		for range opSize - 1 {
			out = append(out, byte(rng.Uint32()))
		}
	}
	return out
}

// workload weights: mostly queue traffic, a little of everything else.
var workload = [numOps]int{
	opEnqueue: 14, opBatch: 4, opClaim: 14, opComplete: 10, opFail: 6, opHeartbeat: 4, opSnooze: 2,
	opCancel: 2, opRedrive: 2, opKV: 5, opAdvance: 6, opCheckpoint: 1, opReopen: 1, opForged: 3,
	opInvalid: 1, opRead: 3, opControl: 2, opDepend: 6, opBulk: 2,
}

// listFiles returns the regular files under dir (relative paths).
func listFiles(dir string) ([]string, error) {
	var out []string
	err := fs.WalkDir(walkFS{fsOf(dir)}, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}

// bulk searches a queue with a filter the bytes choose, or acts on every
// task it selects, in the engine and in the model: the same ids, the same
// counts and reasons.
func (r *runner) bulk(a [opSize - 1]byte) {
	q := queues[a[0]&3]
	var f engine.Filter
	for i, st := range []engine.State{engine.Ready, engine.Scheduled, engine.InFlight, engine.Dead, engine.Completed, engine.Waiting} {
		if a[1]>>i&1 != 0 {
			f.States = append(f.States, st)
		}
	}
	f.Retrying = engine.Retrying(a[2] & 3 % 3)
	if a[2]&4 != 0 {
		f.Kind = "job"
	}
	if a[2]&8 != 0 {
		f.Error = []string{"LEASE", "forged"}[a[2]>>4&1]
	}
	if a[3]&0x80 != 0 {
		f.MinID = uint64(a[3] & 0x3f)
	}
	if a[4]&4 != 0 {
		p, gerr := r.q(q).Search(ctx, engine.SearchOptions{Filter: f, Limit: engine.MaxBatch, Count: true})
		want, werr := r.m.Search(q, f)
		var got []uint64
		for _, t := range p.Tasks {
			got = append(got, t.ID)
		}
		desc := fmt.Sprintf("search %s %+v", q, f)
		if r.record(desc, gerr, werr, fmt.Sprint(got)) && (!slices.Equal(got, want) || p.Count != len(want)) {
			r.fatalf("%s: %v count %d, model %v", desc, got, p.Count, want)
		}
		return
	}
	act := engine.BulkAction(1 + a[4]&3)
	got, gerr := r.q(q).Bulk(ctx, f, act)
	want, werr := r.m.Bulk(q, f, act)
	desc := fmt.Sprintf("bulk %s %s %+v", act, q, f)
	if r.record(desc, gerr, werr, fmt.Sprint(got)) && fmt.Sprint(got) != fmt.Sprint(want) {
		r.fatalf("%s: %+v, model %+v", desc, got, want)
	}
}
