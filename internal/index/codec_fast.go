package index

import (
	"encoding/binary"
	"math"
)

// The snapshot's bulk, when it is large, is task records without extra
// fields (with or without a partition), written by this version's
// Encoder. fastTask reads those straight from the bytes, with no
// MessagePack decoder between, and reuses the queue key strings of the
// record before when they are the same bytes: a restore then allocates
// the task and its payload and nothing else.
//
// It accepts a subset of what the general decoder (Decoder.task) accepts,
// the encodings the Encoder writes, and decodes it to the same values;
// anything else, corrupt or merely unusual, it leaves to the general
// decoder, which is the one that says what is wrong. FuzzFastTask checks
// the two agree.

// fastKey is the queue key of the last record fastTask read, with the
// bytes it was read from.
type fastKey struct {
	raw [3][]byte
	key QueueKey
	q   *Queue // the store's queue for key, or a detached one
}

// fastTask decodes data as a snapshot task record [RecTask task] whose
// task has 19 fields, or 20 with a partition, and no extra (its payload
// in line or by reference); ok is false when data is not one.
func (d *Decoder) fastTask(data []byte) (t *Task, ok bool) {
	p := fastReader{b: data}
	if p.byte() != 0x92 || p.byte() != RecTask {
		return nil, false
	}
	if p.byte() != 0xdc || p.byte() != 0 {
		return nil, false
	}
	nf := p.byte()
	if nf != 19 && nf != 20 {
		return nil, false
	}
	id := p.uint()
	var raw [3][]byte
	for i := range raw {
		raw[i] = p.str()
	}
	st, att, maxAtt := p.uint(), p.uint(), p.uint()
	var r Retry
	var run Run
	prio, nb, created := p.int(), p.int(), int64(0)
	r.BackoffBase, r.BackoffMax = p.int(), p.int()
	owner := p.str()
	run.Token = p.uint()
	run.LeaseUntil, created, run.Updated = p.int(), p.int(), p.int()
	var payload []byte
	var payRef ValueRef
	if p.i < len(p.b) && p.b[p.i] == 0x93 { // the payload by reference
		p.i++
		f, off, n := p.uint(), p.uint(), p.uint()
		var err error
		if payRef, err = decodeRef(f, off, n); err != nil {
			return nil, false
		}
	} else {
		payload = p.bin()
	}
	if p.byte() != 0xc0 { // extra: nil
		return nil, false
	}
	run.Secret = p.uint()
	var part []byte
	if nf == 20 {
		if part = p.str(); len(part) == 0 {
			return nil, false // an empty partition is damage: the general decoder says so
		}
	}
	if p.bad || p.i != len(data) {
		return nil, false
	}
	if !TaskState(st).Valid() || att > math.MaxUint32 || maxAtt > math.MaxUint32 || id == 0 || id == maxID {
		return nil, false
	}
	t = d.slabs.task()
	t.ID, t.Priority, t.NotBefore, t.Created = id, prio, nb, created
	t.State, t.Attempts, r.MaxAttempts = TaskState(st), uint32(att), uint32(maxAtt)
	if part == nil {
		d.retry.set(t, r)
	}
	if len(owner) > 0 {
		run.Owner = string(owner)
	}
	t.SetRun(run.Owner, run.Token, run.LeaseUntil, run.Secret, run.Updated)
	if len(payload) > 0 {
		t.pay = inLine(d.slabs.bytes(payload))
	}
	if !payRef.IsZero() {
		t.pay = byRef(payRef)
	}
	c := &d.last
	if c.q == nil || string(raw[0]) != string(c.raw[0]) || string(raw[1]) != string(c.raw[1]) ||
		string(raw[2]) != string(c.raw[2]) {
		c.key = QueueKey{Namespace{string(raw[0]), string(raw[1])}, string(raw[2])}
		for i := range raw {
			c.raw[i] = append(c.raw[i][:0], raw[i]...)
		}
		c.q = nil
	}
	if c.q == nil || c.q.Ready == nil && d.s != nil {
		// Not yet a queue of the store (a detached one carries the key):
		// look again, since the last record's restore may have made it.
		c.q = d.queueRef(c.key)
	}
	t.Queue = c.q
	if part != nil {
		t.sh = d.retry.handle(shared{r, d.partRefBytes(c.key, part)})
	}
	return t, true
}

// A restore allocates its records and their payloads in slabs: a million
// tasks are then some tens of thousands of allocations instead of two
// million, which is most of a restore's time and its garbage collector's.
// A slab lives as long as any record in it; the records are immutable
// like any others (a change installs a new record, allocated alone), so
// a slab is at worst kept by one long-lived task: slabTasks records and
// slabBytes of payload.
const (
	slabTasks = 32
	slabBytes = 4 << 10
)

type slabs struct {
	tasks []Task
	buf   []byte
}

// task returns a new zero record from a slab.
func (s *slabs) task() *Task {
	if len(s.tasks) == 0 {
		s.tasks = make([]Task, slabTasks)
	}
	t := &s.tasks[0]
	s.tasks = s.tasks[1:]
	return t
}

// bytes returns a copy of b, from a slab when it is small. Its capacity is
// its length, so that nobody appending to it writes over its neighbour.
func (s *slabs) bytes(b []byte) []byte {
	if len(b) > slabBytes/8 {
		return append([]byte(nil), b...)
	}
	if cap(s.buf)-len(s.buf) < len(b) {
		s.buf = make([]byte, 0, slabBytes)
	}
	i := len(s.buf)
	s.buf = append(s.buf, b...)
	return s.buf[i:len(s.buf):len(s.buf)]
}

// fastReader reads MessagePack values from b; bad is set, and every later
// read returns nothing, at the first value it does not take.
type fastReader struct {
	b   []byte
	i   int
	bad bool
}

func (r *fastReader) byte() byte {
	if r.bad || r.i >= len(r.b) {
		r.bad = true
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

// be reads an n-byte big-endian number.
func (r *fastReader) be(n int) uint64 {
	if r.bad || len(r.b)-r.i < n {
		r.bad = true
		return 0
	}
	b := r.b[r.i : r.i+n]
	r.i += n
	switch n {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(b))
	case 4:
		return uint64(binary.BigEndian.Uint32(b))
	case 8:
		return binary.BigEndian.Uint64(b)
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// uint reads a positive fixint or a uint8 to uint64.
func (r *fastReader) uint() uint64 {
	switch c := r.byte(); {
	case c <= 0x7f:
		return uint64(c)
	case c == 0xcc:
		return r.be(1)
	case c == 0xcd:
		return r.be(2)
	case c == 0xce:
		return r.be(4)
	case c == 0xcf:
		return r.be(8)
	}
	r.bad = true
	return 0
}

// int reads a fixint, a uint8 to uint64 or an int8 to int64, as the
// general decoder converts them.
func (r *fastReader) int() int64 {
	switch c := r.byte(); {
	case c <= 0x7f:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	case c == 0xcc:
		return int64(r.be(1))
	case c == 0xcd:
		return int64(r.be(2))
	case c == 0xce:
		return int64(r.be(4))
	case c == 0xcf:
		return int64(r.be(8))
	case c == 0xd0:
		return int64(int8(r.be(1)))
	case c == 0xd1:
		return int64(int16(r.be(2)))
	case c == 0xd2:
		return int64(int32(r.be(4)))
	case c == 0xd3:
		return int64(r.be(8))
	}
	r.bad = true
	return 0
}

// raw returns the next n bytes.
func (r *fastReader) raw(n uint64) []byte {
	if r.bad || uint64(len(r.b)-r.i) < n {
		r.bad = true
		return nil
	}
	b := r.b[r.i : r.i+int(n)]
	r.i += int(n)
	return b
}

// str reads a str value's bytes.
func (r *fastReader) str() []byte {
	switch c := r.byte(); {
	case c >= 0xa0 && c <= 0xbf:
		return r.raw(uint64(c & 0x1f))
	case c == 0xd9:
		return r.raw(r.be(1))
	case c == 0xda:
		return r.raw(r.be(2))
	case c == 0xdb:
		return r.raw(r.be(4))
	}
	r.bad = true
	return nil
}

// bin reads a bin or nil value's bytes.
func (r *fastReader) bin() []byte {
	switch c := r.byte(); c {
	case 0xc0:
		return nil
	case 0xc4:
		return r.raw(r.be(1))
	case 0xc5:
		return r.raw(r.be(2))
	case 0xc6:
		return r.raw(r.be(4))
	}
	r.bad = true
	return nil
}
