package machine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
	"github.com/vmihailenco/msgpack/v5"
)

// Encoding of a command, the data of one entry of a replicated log (part
// of that log's format).
//
// A command is the MessagePack sequence
//
//	version(=1, 2, 3 or 4) op now seed retain idemTTL project scope queue args...
//
// where now, retain and idemTTL are Unix or plain microseconds, and args
// depend on op: each operation's type says them (Enqueue, Claim, ...), and
// the version it appeared in (an operation added since version 1 is
// refused in an older command). Its parts are
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
	Version  = 4
	Version3 = 3
	Version2 = 2
	Version1 = 1
)

// version is the oldest command version that can carry cmd.
func (cmd *Command) version() uint64 {
	v := uint64(Version1)
	if o := operationOf(cmd.Op()); o != nil {
		v = o.since
	}
	if a, ok := cmd.Args.(versioned); ok {
		v = max(v, a.version())
	}
	return v
}

// specsVersion is the oldest command version that can carry the tasks of
// specs and of the enqueues of ops.
func specsVersion(specs []Spec, ops []TxOp) uint64 {
	v := uint64(Version1)
	for i := range specs {
		v = max(v, specVersion(&specs[i]))
	}
	for i := range ops {
		if ops[i].Kind == dockettype.OpEnqueue {
			v = max(v, specVersion(&ops[i].Spec))
		}
	}
	return v
}

// specVersion is the oldest command version that can carry s.
func specVersion(s *Spec) uint64 {
	switch {
	case s.Part != "":
		return Version
	case len(s.Deps) > 0 || len(s.Sibs) > 0 || s.Policy != 0:
		return Version3
	case s.Uniq != 0:
		return Version2
	}
	return Version1
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

// Encode returns cmd's bytes in a new slice: a replicated log keeps it.
func (cmd *Command) Encode() ([]byte, error) {
	e := cmdEncoders.Get().(*cmdEncoder)
	defer cmdEncoders.Put(e)
	e.buf.Reset()
	e.err = nil
	if cmd.Args == nil {
		return nil, invalid("command without an operation")
	}
	e.ver = cmd.version()
	e.uint(e.ver)
	e.uint(uint64(cmd.Op()))
	e.int(cmd.Now)
	e.uint(cmd.Seed)
	e.int(cmd.Retain)
	e.int(cmd.IdemTTL)
	e.str(cmd.NS.Project)
	e.str(cmd.NS.Scope)
	e.str(cmd.Queue)
	cmd.Args.encode(e)
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

func (e *cmdEncoder) uint(v uint64) { e.put(e.enc.EncodeUint(v)) }
func (e *cmdEncoder) int(v int64)   { e.put(e.enc.EncodeInt(v)) }
func (e *cmdEncoder) str(s string)  { e.put(e.enc.EncodeString(s)) }
func (e *cmdEncoder) bool(b bool)   { e.put(e.enc.EncodeBool(b)) }
func (e *cmdEncoder) array(n int)   { e.put(e.enc.EncodeArrayLen(n)) }
func (e *cmdEncoder) fence(l *dockettype.Lease) {
	e.array(3)
	e.uint(l.ID)
	e.uint(l.Token)
	e.uint(l.Secret)
}

func (e *cmdEncoder) fences(ls []dockettype.Lease) {
	e.array(len(ls))
	for i := range ls {
		e.fence(&ls[i])
	}
}

func (e *cmdEncoder) bytes(b []byte) {
	if len(b) == 0 {
		e.put(e.enc.EncodeNil())
		return
	}
	e.put(e.enc.EncodeBytes(b))
}

func (e *cmdEncoder) spec(s *Spec) {
	switch e.ver {
	case Version1:
		e.array(10)
	case Version2:
		e.array(12)
	case Version3:
		e.array(15)
	default:
		e.array(16)
	}
	e.bytes(s.Payload)
	e.str(s.Kind)
	e.int(s.Delay)
	e.int(s.At)
	e.int(s.Prio)
	e.uint(uint64(s.MaxAttempts))
	e.int(s.Base)
	e.int(s.Max)
	e.str(s.Idem)
	e.keys = e.keys[:0]
	for k := range s.Headers {
		e.keys = append(e.keys, k)
	}
	slices.Sort(e.keys)
	e.put(e.enc.EncodeMapLen(len(e.keys)))
	for _, k := range e.keys {
		e.str(k)
		e.str(s.Headers[k])
	}
	if e.ver == Version1 {
		return
	}
	e.int(s.Window)
	e.uint(uint64(s.Uniq))
	if e.ver == Version2 {
		return
	}
	e.array(len(s.Deps))
	for _, id := range s.Deps {
		e.uint(id)
	}
	e.array(len(s.Sibs))
	for _, i := range s.Sibs {
		e.uint(uint64(i))
	}
	e.uint(uint64(s.Policy))
	if e.ver >= Version {
		e.str(s.Part)
	}
}

func (e *cmdEncoder) vops(ops []TxOp) {
	e.array(len(ops))
	for i := range ops {
		op := &ops[i]
		if op.Kind == dockettype.OpEnqueue {
			e.array(3)
			e.uint(uint64(op.Kind))
			e.str(op.Queue)
			e.spec(&op.Spec)
			continue
		}
		e.array(4)
		e.uint(uint64(op.Kind))
		e.str(op.Key)
		e.bytes(op.Value)
		e.uint(op.Version)
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

// Decode decodes data into cmd. An error wraps ErrCorrupt, or
// ErrFailed for a version this build does not know.
func Decode(data []byte, cmd *Command) error {
	d := &cmdDecoder{data: data}
	d.r.Reset(data)
	d.dec = msgpack.NewDecoder(&d.r)
	if d.ver = d.uint(); d.err == nil && (d.ver < Version1 || d.ver > Version) {
		return fmt.Errorf("%w: command version %d (this build plans versions %d to %d)", dockettype.ErrFailed, d.ver, Version1, Version)
	}
	op := CmdOp(d.uint())
	*cmd = Command{}
	cmd.Now = d.int()
	cmd.Seed = d.uint()
	cmd.Retain = d.int()
	cmd.IdemTTL = d.int()
	cmd.NS.Project = d.str()
	cmd.NS.Scope = d.str()
	cmd.Queue = d.str()
	switch o := operationOf(op); {
	case d.err != nil:
	case o == nil:
		d.fail(fmt.Errorf("unknown operation %d", op))
	case d.ver < o.since:
		d.fail(fmt.Errorf("operation %s in a version %d command", op, d.ver))
	default:
		a := o.new()
		a.decode(d, cmd)
		cmd.Args = a
	}
	if d.err == nil && d.r.Len() != 0 {
		d.fail(fmt.Errorf("%d bytes after the %s command", d.r.Len(), op))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %w: %w", dockettype.ErrCorrupt, errCommand, d.err)
	}
	return nil
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
// Limits does, or CheckLimits refuses it).
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

func (d *cmdDecoder) fence(l *dockettype.Lease) {
	d.tuple("fence", 3)
	l.ID, l.Token, l.Secret = d.uint(), d.uint(), d.uint()
}

// fences decodes an array of fences, and marks those whose task appears
// earlier in it (RepeatedLeases).
func (d *cmdDecoder) fences() ([]dockettype.Lease, []error) {
	ls := make([]dockettype.Lease, d.array(dockettype.MaxBatch))
	for i := range ls {
		d.fence(&ls[i])
	}
	return ls, RepeatedLeases(ls)
}

func (d *cmdDecoder) spec(s *Spec) {
	switch d.ver {
	case Version1:
		d.tuple("task", 10)
	case Version2:
		d.tuple("task", 12)
	case Version3:
		d.tuple("task", 15)
	default:
		d.tuple("task", 16)
	}
	s.Payload = d.bytes()
	s.Kind = d.str()
	s.Delay = d.int()
	s.At = d.int()
	s.Prio = d.int()
	ma := d.uint()
	if ma > dockettype.MaxAttemptsLimit {
		d.fail(fmt.Errorf("max attempts %d", ma))
	}
	s.MaxAttempts = uint32(ma)
	s.Base = d.int()
	s.Max = d.int()
	s.Idem = d.str()
	if d.err != nil {
		return
	}
	n, err := d.dec.DecodeMapLen()
	if err == nil && (n < -1 || n > dockettype.MaxHeaders || n > d.r.Len()) {
		err = fmt.Errorf("%d headers", n)
	}
	if d.fail(err); d.err != nil {
		return
	}
	if n > 0 {
		s.Headers = make(map[string]string, n)
		prev := ""
		for i := range n {
			k, v := d.str(), d.str()
			if d.err == nil && i > 0 && k <= prev {
				d.fail(fmt.Errorf("header %q out of order", k))
			}
			prev = k
			s.Headers[k] = v
		}
	}
	if d.ver == Version1 {
		return
	}
	s.Window = d.int()
	uniq := d.uint()
	if d.err == nil && (uniq > 0xff || (uniq == 0) != (s.Window == 0) ||
		uniq != 0 && (validate.UniqueStates(uint8(uniq)) != nil || s.Window < 1 || s.Window > dockettype.MaxDuration.Microseconds() || s.Idem == "")) {
		d.fail(fmt.Errorf("unique by content for %d µs in states %#x", s.Window, uniq))
	}
	s.Uniq = uint8(uniq)
	d.deps(s)
	if d.ver >= Version {
		if s.Part = d.str(); d.err == nil && s.Part != "" {
			d.fail(validate.Name("partition", s.Part))
		}
	}
}

// deps decodes the dependencies that end a version 3 spec.
func (d *cmdDecoder) deps(s *Spec) {
	if d.ver < Version3 {
		return
	}
	n := d.array(dockettype.MaxDependencies)
	if n > 0 {
		s.Deps = make([]uint64, n)
	}
	for i := range s.Deps {
		s.Deps[i] = d.uint()
		if d.err == nil && (s.Deps[i] == 0 || i > 0 && s.Deps[i] <= s.Deps[i-1]) {
			d.fail(fmt.Errorf("dependency %d out of order", s.Deps[i]))
		}
	}
	n = d.array(dockettype.MaxDependencies - len(s.Deps))
	if n > 0 {
		s.Sibs = make([]int, n)
	}
	for i := range s.Sibs {
		v := d.uint()
		if d.err == nil && (v >= dockettype.MaxOps+dockettype.MaxBatch || i > 0 && int(v) <= s.Sibs[i-1]) {
			d.fail(fmt.Errorf("sibling dependency %d out of order", v))
		}
		s.Sibs[i] = int(v)
	}
	if p := d.uint(); d.err == nil && p > uint64(dockettype.RunOnFailure) {
		d.fail(fmt.Errorf("dependency policy %d", p))
	} else {
		s.Policy = uint8(p)
	}
}

func (d *cmdDecoder) vops() []TxOp {
	n := d.array(dockettype.MaxOps)
	if n == 0 {
		return nil
	}
	ops := make([]TxOp, n)
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
		op.Kind = dockettype.OpKind(d.uint())
		switch {
		case op.Kind == dockettype.OpEnqueue && fields == 3:
			op.Queue = d.str()
			d.spec(&op.Spec)
		case op.Kind >= dockettype.OpSet && op.Kind <= dockettype.OpIfAbsent && fields == 4:
			op.Key = d.str()
			op.Value = d.bytes()
			op.Version = d.uint()
			if op.Kind == dockettype.OpSet && op.Value == nil {
				op.Value = []byte{} // as checkOps leaves it
			}
		default:
			d.fail(fmt.Errorf("op %d of kind %d with %d fields", i, op.Kind, fields))
		}
	}
	return ops
}
