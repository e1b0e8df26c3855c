package index

import (
	"encoding/binary"
	"math"
	"slices"
)

// The MessagePack appenders below write exactly the bytes the msgpack
// library's Encoder writes for the same calls (EncodeUint, EncodeInt,
// EncodeString, EncodeBytes, EncodeNil, EncodeArrayLen, EncodeMapLen),
// straight into a slice: a task record is written on every commit that
// makes or changes a task, and through the library's io.Writer calls
// one byte at a time it was most of what encoding a batch cost.
// TestAppendersMatchTheLibrary and FuzzAppenders hold them to it.

func appendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), n)
}

func appendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(b, uint64(n))
	case n >= -32:
		return append(b, byte(n)) // negative fixint
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

func appendString(b []byte, s string) []byte {
	if l := len(s); l < 32 {
		b = append(b, 0xa0|byte(l)) // fixstr
	} else {
		b = appendLen(b, l, 0xd9, 0xda, 0xdb)
	}
	return append(b, s...)
}

// appendBytes is encodeBytes of a present value: nil when it is empty.
func appendBytes(b []byte, v []byte) []byte {
	if len(v) == 0 {
		return append(b, 0xc0)
	}
	return append(appendLen(b, len(v), 0xc4, 0xc5, 0xc6), v...)
}

// appendValue writes a value slot: the reference [file off len] when r is
// set, else the bytes as appendBytes does.
func appendValue(b []byte, v []byte, r ValueRef) []byte {
	if r.IsZero() {
		return appendBytes(b, v)
	}
	b = append(b, 0x93)
	return appendUint(appendUint(appendUint(b, uint64(r.File)), uint64(r.Off)), uint64(r.Len))
}

func appendArrayLen(b []byte, l int) []byte {
	if l < 16 {
		return append(b, 0x90|byte(l)) // fixarray
	}
	return appendLen(b, l, 0, 0xdc, 0xdd)
}

func appendMapLen(b []byte, l int) []byte {
	if l < 16 {
		return append(b, 0x80|byte(l)) // fixmap
	}
	return appendLen(b, l, 0, 0xde, 0xdf)
}

// appendLen writes the code of the 8-, 16- or 32-bit form that holds l,
// then l (c8 is 0 for a type without an 8-bit form).
func appendLen(b []byte, l int, c8, c16, c32 byte) []byte {
	switch {
	case c8 != 0 && l <= math.MaxUint8:
		return append(b, c8, byte(l))
	case l <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, c16), uint16(l))
	}
	return binary.BigEndian.AppendUint32(append(b, c32), uint32(l))
}

// task writes [kind task]: a record or mutation kind (a fixint), then t's
// fields as an array, the encoding the decoders read back (Decoder.task,
// fastTask).
func (e *Encoder) task(kind uint64, t *Task) {
	b := appendUint(append(e.buf.AvailableBuffer(), 0x92), kind)
	b = e.appendTask(b, t)
	e.buf.Write(b) // b is the buffer's own free space unless it grew
}

func (e *Encoder) appendTask(b []byte, t *Task) []byte {
	if t.Part() != nil {
		b = appendArrayLen(b, 20)
	} else {
		b = appendArrayLen(b, 19)
	}
	b = appendUint(b, t.ID)
	b = appendString(b, t.Queue.Key.Project)
	b = appendString(b, t.Queue.Key.Scope)
	b = appendString(b, t.Queue.Key.Name)
	b = appendUint(b, uint64(t.State))
	b = appendUint(b, uint64(t.Attempts))
	r, run := t.Retry(), t.run()
	b = appendUint(b, uint64(r.MaxAttempts))
	b = appendInt(b, t.Priority)
	b = appendInt(b, t.NotBefore)
	b = appendInt(b, r.BackoffBase)
	b = appendInt(b, r.BackoffMax)
	b = appendString(b, run.Owner)
	b = appendUint(b, run.Token)
	b = appendInt(b, run.LeaseUntil)
	b = appendInt(b, t.Created)
	b = appendInt(b, t.Updated())
	b = appendValue(b, t.Payload(), t.PayloadRef())
	if t.Extra.empty() {
		b = append(b, 0xc0)
	} else {
		x := t.Extra
		b = appendArrayLen(b, 10)
		b = appendString(b, x.Kind)
		b = appendString(b, x.IdemKey)
		b = appendString(b, x.LastError)
		b = appendValue(b, x.Progress, x.ProgressRef())
		b = appendValue(b, x.Result, x.ResultRef())
		b = appendMapLen(b, len(x.Headers))
		if len(x.Headers) > 0 {
			keys := e.keys[:0]
			for k := range x.Headers {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				b = appendString(b, k)
				b = appendString(b, x.Headers[k])
			}
			clear(keys)
			e.keys = keys[:0]
		}
		b = appendArrayLen(b, len(x.Errors))
		for _, ae := range x.Errors {
			b = appendArrayLen(b, 3)
			b = appendUint(b, uint64(ae.Attempt))
			b = appendInt(b, ae.At)
			b = appendString(b, ae.Error)
		}
		b = appendUint(b, x.Parent)
		b = appendArrayLen(b, len(x.FollowUps))
		for _, id := range x.FollowUps {
			b = appendUint(b, id)
		}
		b = appendUint(b, uint64(x.DepPolicy))
	}
	b = appendUint(b, run.Secret)
	if p := t.Part(); p != nil {
		b = appendString(b, p.Key)
	}
	return b
}
