package index

import "unsafe"

// payload is a task's payload, in line or by reference, in the place of a
// slice: a task whose payload is in the value log costs no more than one
// whose payload is in memory (TestPayloadSizes).
//
// In line, p is the first byte and n the length (p is nil for no payload).
// By reference, p is nil, n is the reference's offset and c its file and
// length (file<<32 | len), never 0 since a reference has Len > 0. So c
// alone says which: a slice with no pointer has no length. p is an
// ordinary pointer, which keeps the bytes alive; the other words hold no
// pointer.
type payload struct {
	p *byte
	n uint64
	c uint64
}

func inLine(b []byte) payload {
	return payload{p: unsafe.SliceData(b), n: uint64(len(b))}
}

func byRef(r ValueRef) payload {
	if r.IsZero() {
		return payload{}
	}
	return payload{n: uint64(r.Off), c: uint64(r.File)<<32 | uint64(r.Len)}
}

func (v payload) isRef() bool { return v.c != 0 }

func (v payload) bytes() []byte {
	if v.p == nil {
		return nil
	}
	return unsafe.Slice(v.p, v.n)
}

func (v payload) ref() ValueRef {
	if v.c == 0 {
		return ValueRef{}
	}
	return ValueRef{File: uint32(v.c >> 32), Off: int64(v.n), Len: uint32(v.c)}
}

// Payload is the task's payload in line, nil when it has none or when it
// is by reference (PayloadRef). The bytes are the record's: do not change
// them.
func (t *Task) Payload() []byte { return t.pay.bytes() }

// PayloadRef is the reference of the task's payload, zero when the payload
// is in line (Payload).
func (t *Task) PayloadRef() ValueRef { return t.pay.ref() }

// SetPayload sets the payload of t, which must not be stored yet, in line
// (no reference).
func (t *Task) SetPayload(b []byte) { t.pay = inLine(b) }

// SetPayloadRef sets the payload of t, which must not be stored yet, by
// reference: a zero r leaves t with no payload.
func (t *Task) SetPayloadRef(r ValueRef) { t.pay = byRef(r) }
