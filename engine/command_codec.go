package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/docketdb/docket/internal/index"
)

// Encoding of a command, the data of one entry of a replicated log (part
// of that log's format).
//
// A command is the MessagePack sequence
//
//	version(=1, 2, 3 or 4) op now seed retain idemTTL project scope queue args...
//
// where now, retain and idemTTL are Unix or plain microseconds, and args
// depend on op:
//
//	enqueue         spec [vop...]
//	enqueue batch   [spec...] [vop...]
//	claim           owner lease max wait
//	complete        fence result [vop...]
//	complete batch  [fence...]
//	fail            fence error permanent retryAfter
//	heartbeat       fence extend hasProgress progress
//	snooze          fence delay
//	cancel          id
//	redrive         id
//	run now         id
//	redrive all     (nothing)
//	commit          [vop...]
//	set paused      paused                       (version 2 on)
//	set limits      maxInFlight rate per burst   (version 2 on; per in micros),
//	                then partitionMaxInFlight partitionRate partitionPer
//	                partitionBurst (version 4; partitionPer in micros)
//	complete and claim  fence result [vop...] owner lease max  (version 2 on)
//	heartbeat batch     [fence...] extend                      (version 2 on)
//	bulk                action from scan [state...] retrying kind error
//	                    partition headerKey headerValue minID maxID
//	                    since before                           (version 2 on;
//	                    since and before in Unix micros, the lowest and
//	                    highest int64 for no bound)
//
//	fence = [id token secret]
//	spec  = [payload kind delay at priority maxAttempts backoffBase
//	         backoffMax idempotencyKey {header: value}]
//	        (version 1), or the same with uniqueWindow uniqueStates
//	        appended (version 2; 0 0 for a task that is not unique by
//	        content, whose idempotencyKey is then the caller's), and then
//	        [dependsOn...] [dependsOnSibling...] policy (version 3), and
//	        then partition (version 4)
//	vop   = [kind key value version] for a KV write or assertion,
//	        [6 queue spec] for an enqueue
//
// Integers are compact, an empty byte string is nil, and a spec's headers
// are a map written in key order, so the same command always gives the same
// bytes; decoding refuses anything else (trailing bytes, headers out of
// order, lengths past the input or over the API's limits). A claim (and a
// complete and claim) always carries a seed other than 0, from which the
// lease secrets of its batch are derived. A spec's dependencies are
// ascending without repeats.
//
// A command is written in the oldest version that can say it: version 1
// for every operation but the queue controls, complete and claim and
// heartbeat batch, and for tasks that are neither unique by content nor
// dependent; version 2 for those operations and unique tasks; version 3
// once a task of the command has dependencies or a dependency policy;
// version 4 once a task names a partition or the limits set bound or
// rate-limit each partition. A
// node of an older build thus keeps applying the log until a command uses
// what it does not know; it then stops (ErrFailed) rather than plan
// something else. Operations added since version 2 need no new version as
// long as they change no field of an existing one: a build that does not
// know them refuses their operation number just as cleanly.
const (
	cmdVersion  = 4
	cmdVersion3 = 3
	cmdVersion2 = 2
	cmdVersion1 = 1
)

// version is the oldest command version that can carry cmd.
func (cmd *command) version() uint64 {
	v := cmd.task.version()
	switch cmd.op {
	case cmdSetPaused, cmdSetLimits, cmdCompleteClaim, cmdHeartbeatBatch, cmdBulk:
		v = max(v, cmdVersion2)
	}
	if cmd.op == cmdSetLimits && (cmd.limits.PartitionMaxInFlight != 0 || cmd.limits.PartitionRate != 0) {
		v = cmdVersion
	}
	for i := range cmd.tasks {
		v = max(v, cmd.tasks[i].version())
	}
	for i := range cmd.ops {
		if cmd.ops[i].kind == OpEnqueue {
			v = max(v, cmd.ops[i].spec.version())
		}
	}
	return v
}

// version is the oldest command version that can carry s.
func (s *spec) version() uint64 {
	switch {
	case s.part != "":
		return cmdVersion
	case len(s.deps) > 0 || len(s.sibs) > 0 || s.policy != 0:
		return cmdVersion3
	case s.uniq != 0:
		return cmdVersion2
	}
	return cmdVersion1
}

// errCommand marks bytes that are not a command this version can plan.
var errCommand = errors.New("command does not decode")

// cmdEncoder is the reusable state of one encoding.
type cmdEncoder struct {
	buf  bytes.Buffer
	enc  *msgpack.Encoder
	keys []string
	err  error
	ver  uint64
}

var cmdEncoders = sync.Pool{New: func() any {
	e := &cmdEncoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	e.enc.UseCompactInts(true)
	return e
}}

// encode returns cmd's bytes in a new slice: a replicated log keeps it.
func (cmd *command) encode() ([]byte, error) {
	e := cmdEncoders.Get().(*cmdEncoder)
	defer cmdEncoders.Put(e)
	e.buf.Reset()
	e.err = nil
	e.ver = cmd.version()
	e.uint(e.ver)
	e.uint(uint64(cmd.op))
	e.int(cmd.now)
	e.uint(cmd.seed)
	e.int(cmd.retain)
	e.int(cmd.idemTTL)
	e.str(cmd.ns.Project)
	e.str(cmd.ns.Scope)
	e.str(cmd.queue)
	switch cmd.op {
	case cmdEnqueue:
		e.spec(&cmd.task)
		e.vops(cmd.ops)
	case cmdEnqueueBatch:
		e.array(len(cmd.tasks))
		for i := range cmd.tasks {
			e.spec(&cmd.tasks[i])
		}
		e.vops(cmd.ops)
	case cmdClaim:
		e.str(cmd.owner)
		e.int(cmd.lease)
		e.int(int64(cmd.max))
		e.bool(cmd.wait)
	case cmdComplete:
		e.fence(&cmd.fence)
		e.bytes(cmd.result)
		e.vops(cmd.ops)
	case cmdCompleteBatch:
		e.array(len(cmd.fences))
		for i := range cmd.fences {
			e.fence(&cmd.fences[i])
		}
	case cmdFail:
		e.fence(&cmd.fence)
		e.str(cmd.errMsg)
		e.bool(cmd.permanent)
		e.int(cmd.delay)
	case cmdHeartbeat:
		e.fence(&cmd.fence)
		e.int(cmd.lease)
		e.bool(cmd.hasProg)
		e.bytes(cmd.progress)
	case cmdSnooze:
		e.fence(&cmd.fence)
		e.int(cmd.delay)
	case cmdCancel, cmdRedrive, cmdRunNow:
		e.uint(cmd.id)
	case cmdRedriveAll:
	case cmdCommit:
		e.vops(cmd.ops)
	case cmdSetPaused:
		e.bool(cmd.paused)
	case cmdSetLimits:
		l := &cmd.limits
		e.int(int64(l.MaxInFlight))
		e.int(int64(l.Rate))
		e.int(l.Per.Microseconds())
		e.int(int64(l.Burst))
		if e.ver >= cmdVersion {
			e.int(int64(l.PartitionMaxInFlight))
			e.int(int64(l.PartitionRate))
			e.int(l.PartitionPer.Microseconds())
			e.int(int64(l.PartitionBurst))
		}
	case cmdCompleteClaim:
		e.fence(&cmd.fence)
		e.bytes(cmd.result)
		e.vops(cmd.ops)
		e.str(cmd.owner)
		e.int(cmd.lease)
		e.int(int64(cmd.max))
	case cmdHeartbeatBatch:
		e.array(len(cmd.fences))
		for i := range cmd.fences {
			e.fence(&cmd.fences[i])
		}
		e.int(cmd.lease)
	case cmdBulk:
		b := &cmd.bulk
		f := &b.filter
		e.uint(uint64(b.action))
		e.uint(b.from)
		e.int(int64(b.scan))
		e.array(len(f.States))
		for _, st := range f.States {
			e.uint(uint64(st))
		}
		e.uint(uint64(f.Retrying))
		e.str(f.Kind)
		e.str(f.Error)
		e.str(f.Partition)
		e.str(f.HeaderKey)
		e.str(f.HeaderValue)
		e.uint(f.MinID)
		e.uint(f.MaxID)
		since, before := int64(math.MinInt64), int64(math.MaxInt64)
		if !f.EnqueuedSince.IsZero() {
			since = f.EnqueuedSince.UnixMicro()
		}
		if !f.EnqueuedBefore.IsZero() {
			before = f.EnqueuedBefore.UnixMicro()
		}
		e.int(since)
		e.int(before)
	default:
		return nil, fmt.Errorf("%w: command %d", ErrInvalid, cmd.op)
	}
	if e.err != nil {
		return nil, e.err
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

func (e *cmdEncoder) put(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *cmdEncoder) uint(v uint64)  { e.put(e.enc.EncodeUint(v)) }
func (e *cmdEncoder) int(v int64)    { e.put(e.enc.EncodeInt(v)) }
func (e *cmdEncoder) str(s string)   { e.put(e.enc.EncodeString(s)) }
func (e *cmdEncoder) bool(b bool)    { e.put(e.enc.EncodeBool(b)) }
func (e *cmdEncoder) array(n int)    { e.put(e.enc.EncodeArrayLen(n)) }
func (e *cmdEncoder) fence(l *Lease) { e.array(3); e.uint(l.ID); e.uint(l.Token); e.uint(l.Secret) }

func (e *cmdEncoder) bytes(b []byte) {
	if len(b) == 0 {
		e.put(e.enc.EncodeNil())
		return
	}
	e.put(e.enc.EncodeBytes(b))
}

func (e *cmdEncoder) spec(s *spec) {
	switch e.ver {
	case cmdVersion1:
		e.array(10)
	case cmdVersion2:
		e.array(12)
	case cmdVersion3:
		e.array(15)
	default:
		e.array(16)
	}
	e.bytes(s.payload)
	e.str(s.kind)
	e.int(s.delay)
	e.int(s.at)
	e.int(s.prio)
	e.uint(uint64(s.maxAttempts))
	e.int(s.base)
	e.int(s.max)
	e.str(s.idem)
	e.keys = e.keys[:0]
	for k := range s.headers {
		e.keys = append(e.keys, k)
	}
	slices.Sort(e.keys)
	e.put(e.enc.EncodeMapLen(len(e.keys)))
	for _, k := range e.keys {
		e.str(k)
		e.str(s.headers[k])
	}
	if e.ver == cmdVersion1 {
		return
	}
	e.int(s.window)
	e.uint(uint64(s.uniq))
	if e.ver == cmdVersion2 {
		return
	}
	e.array(len(s.deps))
	for _, id := range s.deps {
		e.uint(id)
	}
	e.array(len(s.sibs))
	for _, i := range s.sibs {
		e.uint(uint64(i))
	}
	e.uint(uint64(s.policy))
	if e.ver >= cmdVersion {
		e.str(s.part)
	}
}

func (e *cmdEncoder) vops(ops []vop) {
	e.array(len(ops))
	for i := range ops {
		op := &ops[i]
		if op.kind == OpEnqueue {
			e.array(3)
			e.uint(uint64(op.kind))
			e.str(op.queue)
			e.spec(&op.spec)
			continue
		}
		e.array(4)
		e.uint(uint64(op.kind))
		e.str(op.key)
		e.bytes(op.value)
		e.uint(op.version)
	}
}

// cmdDecoder reads one command. Every length is checked against the bytes
// left before anything is allocated for it.
type cmdDecoder struct {
	r    bytes.Reader
	dec  *msgpack.Decoder
	data []byte
	err  error
	ver  uint64
}

// decodeCommand decodes data into cmd. An error wraps ErrCorrupt, or
// ErrFailed for a version this build does not know.
func decodeCommand(data []byte, cmd *command) error {
	d := &cmdDecoder{data: data}
	d.r.Reset(data)
	d.dec = msgpack.NewDecoder(&d.r)
	if d.ver = d.uint(); d.err == nil && (d.ver < cmdVersion1 || d.ver > cmdVersion) {
		return fmt.Errorf("%w: command version %d (this build plans versions %d to %d)", ErrFailed, d.ver, cmdVersion1, cmdVersion)
	}
	*cmd = command{op: cmdOp(d.uint())}
	cmd.now = d.int()
	cmd.seed = d.uint()
	cmd.retain = d.int()
	cmd.idemTTL = d.int()
	cmd.ns.Project = d.str()
	cmd.ns.Scope = d.str()
	cmd.queue = d.str()
	switch cmd.op {
	case cmdEnqueue:
		d.spec(&cmd.task)
		cmd.ops = d.vops()
	case cmdEnqueueBatch:
		n := d.array(MaxBatch)
		cmd.tasks = make([]spec, n)
		for i := range cmd.tasks {
			d.spec(&cmd.tasks[i])
		}
		cmd.ops = d.vops()
	case cmdClaim:
		cmd.owner = d.str()
		cmd.lease = d.int()
		cmd.max = int(d.int())
		cmd.wait = d.bool()
		if d.err == nil && (cmd.max < 1 || cmd.max > MaxBatch || cmd.lease < 1 || cmd.seed == 0) {
			d.fail(fmt.Errorf("claim of %d for %d µs with seed %d", cmd.max, cmd.lease, cmd.seed))
		}
	case cmdComplete:
		d.fence(&cmd.fence)
		cmd.result = d.bytes()
		cmd.ops = d.vops()
	case cmdCompleteBatch:
		n := d.array(MaxBatch)
		cmd.fences = make([]Lease, n)
		for i := range cmd.fences {
			d.fence(&cmd.fences[i])
		}
		cmd.dup = repeatedLeases(cmd.fences)
	case cmdFail:
		d.fence(&cmd.fence)
		cmd.errMsg = d.str()
		cmd.permanent = d.bool()
		cmd.delay = d.int()
	case cmdHeartbeat:
		d.fence(&cmd.fence)
		cmd.lease = d.int()
		cmd.hasProg = d.bool()
		cmd.progress = d.bytes()
	case cmdSnooze:
		d.fence(&cmd.fence)
		cmd.delay = d.int()
	case cmdCancel, cmdRedrive, cmdRunNow:
		cmd.id = d.uint()
	case cmdRedriveAll:
	case cmdCommit:
		cmd.ops = d.vops()
	case cmdSetPaused, cmdSetLimits:
		if d.ver == cmdVersion1 {
			d.fail(fmt.Errorf("operation %d in a version 1 command", cmd.op))
			break
		}
		if cmd.op == cmdSetPaused {
			cmd.paused = d.bool()
			break
		}
		l := &cmd.limits
		l.MaxInFlight, l.Rate = int(d.small()), int(d.small())
		l.Per, l.Burst = micros(d.int()), int(d.small())
		if d.ver >= cmdVersion {
			l.PartitionMaxInFlight, l.PartitionRate = int(d.small()), int(d.small())
			l.PartitionPer, l.PartitionBurst = micros(d.int()), int(d.small())
		}
		if d.err == nil {
			d.fail(checkLimits(*l))
		}
	case cmdCompleteClaim:
		if d.ver == cmdVersion1 {
			d.fail(fmt.Errorf("operation %d in a version 1 command", cmd.op))
			break
		}
		d.fence(&cmd.fence)
		cmd.result = d.bytes()
		cmd.ops = d.vops()
		cmd.owner = d.str()
		cmd.lease = d.int()
		cmd.max = int(d.int())
		if d.err == nil && (cmd.max < 1 || cmd.max > MaxBatch || cmd.lease < 1 || cmd.seed == 0) {
			d.fail(fmt.Errorf("complete and claim of %d for %d µs with seed %d", cmd.max, cmd.lease, cmd.seed))
		}
	case cmdHeartbeatBatch:
		if d.ver == cmdVersion1 {
			d.fail(fmt.Errorf("operation %d in a version 1 command", cmd.op))
			break
		}
		n := d.array(MaxBatch)
		cmd.fences = make([]Lease, n)
		for i := range cmd.fences {
			d.fence(&cmd.fences[i])
		}
		cmd.dup = repeatedLeases(cmd.fences)
		cmd.lease = d.int()
		if d.err == nil && cmd.lease < 1 {
			d.fail(fmt.Errorf("heartbeat batch extending by %d µs", cmd.lease))
		}
	case cmdBulk:
		if d.ver == cmdVersion1 {
			d.fail(fmt.Errorf("operation %d in a version 1 command", cmd.op))
			break
		}
		d.bulk(&cmd.bulk)
	default:
		d.fail(fmt.Errorf("unknown operation %d", cmd.op))
	}
	if d.err == nil && d.r.Len() != 0 {
		d.fail(fmt.Errorf("%d bytes after the %s command", d.r.Len(), cmd.op))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %w: %w", ErrCorrupt, errCommand, d.err)
	}
	return nil
}

func (d *cmdDecoder) bulk(b *bulkArgs) {
	f := &b.filter
	b.action = BulkAction(d.uint())
	b.from = d.uint()
	b.scan = int(d.small())
	if n := d.array(8); n > 0 {
		f.States = make([]State, n)
		for i := range f.States {
			f.States[i] = State(d.small())
		}
	}
	f.Retrying = Retrying(d.small())
	f.Kind, f.Error, f.Partition = d.str(), d.str(), d.str()
	f.HeaderKey, f.HeaderValue = d.str(), d.str()
	f.MinID, f.MaxID = d.uint(), d.uint()
	if since := d.int(); since != math.MinInt64 {
		f.EnqueuedSince = time.UnixMicro(since).UTC()
	}
	if before := d.int(); before != math.MaxInt64 {
		f.EnqueuedBefore = time.UnixMicro(before).UTC()
	}
	if d.err != nil {
		return
	}
	if !b.action.valid() || b.from == 0 || b.scan < 1 || b.scan > MaxBatch {
		d.fail(fmt.Errorf("bulk %s from %d scanning %d", b.action, b.from, b.scan))
		return
	}
	d.fail(f.Validate())
}

func (d *cmdDecoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *cmdDecoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, err := d.dec.DecodeUint64()
	d.fail(err)
	return v
}

func (d *cmdDecoder) int() int64 {
	if d.err != nil {
		return 0
	}
	v, err := d.dec.DecodeInt64()
	d.fail(err)
	return v
}

// small decodes an integer that must fit in 32 bits (every count of
// Limits does, or checkLimits refuses it).
func (d *cmdDecoder) small() int64 {
	v := d.int()
	if d.err == nil && (v < -1<<31 || v > 1<<31) {
		d.fail(fmt.Errorf("integer %d out of range", v))
	}
	return v
}

func (d *cmdDecoder) bool() bool {
	if d.err != nil {
		return false
	}
	v, err := d.dec.DecodeBool()
	d.fail(err)
	return v
}

// fits checks that the str or bin value at the read position declares no
// more bytes than are left (index.FitsAt).
func (d *cmdDecoder) fits() bool {
	if err := index.FitsAt(d.data, len(d.data)-d.r.Len()); err != nil {
		d.fail(err)
		return false
	}
	return true
}

func (d *cmdDecoder) str() string {
	if d.err != nil || !d.fits() {
		return ""
	}
	s, err := d.dec.DecodeString()
	d.fail(err)
	return s
}

// bytes decodes a bin or nil value; empty is nil.
func (d *cmdDecoder) bytes() []byte {
	if d.err != nil || !d.fits() {
		return nil
	}
	b, err := d.dec.DecodeBytes()
	d.fail(err)
	if len(b) == 0 {
		return nil
	}
	return b
}

// array decodes an array length of at most max, and at most the bytes left
// (every element takes at least one).
func (d *cmdDecoder) array(max int) int {
	if d.err != nil {
		return 0
	}
	n, err := d.dec.DecodeArrayLen()
	if err == nil && (n < 0 || n > max || n > d.r.Len()) {
		err = fmt.Errorf("array of %d", n)
	}
	d.fail(err)
	if d.err != nil {
		return 0
	}
	return n
}

// tuple decodes an array header that must have exactly n elements.
func (d *cmdDecoder) tuple(what string, n int) {
	if d.err != nil {
		return
	}
	if got, err := d.dec.DecodeArrayLen(); err != nil || got != n {
		d.fail(fmt.Errorf("%s: array of %d, not %d (%v)", what, got, n, err))
	}
}

func (d *cmdDecoder) fence(l *Lease) {
	d.tuple("fence", 3)
	l.ID, l.Token, l.Secret = d.uint(), d.uint(), d.uint()
}

func (d *cmdDecoder) spec(s *spec) {
	switch d.ver {
	case cmdVersion1:
		d.tuple("task", 10)
	case cmdVersion2:
		d.tuple("task", 12)
	case cmdVersion3:
		d.tuple("task", 15)
	default:
		d.tuple("task", 16)
	}
	s.payload = d.bytes()
	s.kind = d.str()
	s.delay = d.int()
	s.at = d.int()
	s.prio = d.int()
	ma := d.uint()
	if ma > MaxAttemptsLimit {
		d.fail(fmt.Errorf("max attempts %d", ma))
	}
	s.maxAttempts = uint32(ma)
	s.base = d.int()
	s.max = d.int()
	s.idem = d.str()
	if d.err != nil {
		return
	}
	n, err := d.dec.DecodeMapLen()
	if err == nil && (n < -1 || n > MaxHeaders || n > d.r.Len()) {
		err = fmt.Errorf("%d headers", n)
	}
	if d.fail(err); d.err != nil {
		return
	}
	if n > 0 {
		s.headers = make(map[string]string, n)
		prev := ""
		for i := range n {
			k, v := d.str(), d.str()
			if d.err == nil && i > 0 && k <= prev {
				d.fail(fmt.Errorf("header %q out of order", k))
			}
			prev = k
			s.headers[k] = v
		}
	}
	if d.ver == cmdVersion1 {
		return
	}
	s.window = d.int()
	uniq := d.uint()
	if d.err == nil && (uniq > 0xff || (uniq == 0) != (s.window == 0) ||
		uniq != 0 && (checkUniqueStates(uint8(uniq)) != nil || s.window < 1 || s.window > MaxDuration.Microseconds() || s.idem == "")) {
		d.fail(fmt.Errorf("unique by content for %d µs in states %#x", s.window, uniq))
	}
	s.uniq = uint8(uniq)
	d.deps(s)
	if d.ver >= cmdVersion {
		if s.part = d.str(); d.err == nil && s.part != "" {
			d.fail(checkName("partition", s.part))
		}
	}
}

// deps decodes the dependencies that end a version 3 spec.
func (d *cmdDecoder) deps(s *spec) {
	if d.ver < cmdVersion3 {
		return
	}
	n := d.array(MaxDependencies)
	if n > 0 {
		s.deps = make([]uint64, n)
	}
	for i := range s.deps {
		s.deps[i] = d.uint()
		if d.err == nil && (s.deps[i] == 0 || i > 0 && s.deps[i] <= s.deps[i-1]) {
			d.fail(fmt.Errorf("dependency %d out of order", s.deps[i]))
		}
	}
	n = d.array(MaxDependencies - len(s.deps))
	if n > 0 {
		s.sibs = make([]int, n)
	}
	for i := range s.sibs {
		v := d.uint()
		if d.err == nil && (v >= MaxOps+MaxBatch || i > 0 && int(v) <= s.sibs[i-1]) {
			d.fail(fmt.Errorf("sibling dependency %d out of order", v))
		}
		s.sibs[i] = int(v)
	}
	if p := d.uint(); d.err == nil && p > uint64(RunOnFailure) {
		d.fail(fmt.Errorf("dependency policy %d", p))
	} else {
		s.policy = uint8(p)
	}
}

func (d *cmdDecoder) vops() []vop {
	n := d.array(MaxOps)
	if n == 0 {
		return nil
	}
	ops := make([]vop, n)
	for i := range ops {
		op := &ops[i]
		if d.err != nil {
			return nil
		}
		fields, err := d.dec.DecodeArrayLen()
		if err != nil {
			d.fail(err)
			return nil
		}
		op.kind = OpKind(d.uint())
		switch {
		case op.kind == OpEnqueue && fields == 3:
			op.queue = d.str()
			d.spec(&op.spec)
		case op.kind >= OpSet && op.kind <= OpIfAbsent && fields == 4:
			op.key = d.str()
			op.value = d.bytes()
			op.version = d.uint()
			if op.kind == OpSet && op.value == nil {
				op.value = []byte{} // as checkOps leaves it
			}
		default:
			d.fail(fmt.Errorf("op %d of kind %d with %d fields", i, op.kind, fields))
		}
	}
	return ops
}
