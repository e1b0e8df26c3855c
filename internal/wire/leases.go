package wire

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// LeaseList is a reply that holds leases (docket.v1.ClaimResponse and
// ClaimWaitResponse, whose only field is 1, repeated Lease) read straight
// into engine leases by a client's LeaseCodec.
type LeaseList struct {
	Leases []engine.Lease
}

// LeaseCodec is a client's codec: Inner's, except that it reads a reply
// into a *LeaseList. With protobuf it decodes the bytes itself, without
// building the messages of every lease first (ten objects per lease for
// the collector, most of a claim's cost on the client); with any other
// codec it decodes a ClaimResponse and converts it.
type LeaseCodec struct {
	Inner connect.Codec
}

var _ connect.Codec = LeaseCodec{}

// Name is Inner's name.
func (c LeaseCodec) Name() string { return c.Inner.Name() }

// Marshal is Inner's.
func (c LeaseCodec) Marshal(m any) ([]byte, error) { return c.Inner.Marshal(m) }

// MarshalAppend lets connect marshal a request into a pooled buffer.
func (c LeaseCodec) MarshalAppend(b []byte, m any) ([]byte, error) {
	if a, ok := c.Inner.(interface {
		MarshalAppend([]byte, any) ([]byte, error)
	}); ok {
		return a.MarshalAppend(b, m)
	}
	out, err := c.Inner.Marshal(m)
	return append(b, out...), err
}

// Unmarshal reads a *LeaseList, or anything else as Inner does.
func (c LeaseCodec) Unmarshal(b []byte, m any) error {
	dst, ok := m.(*LeaseList)
	if !ok {
		return c.Inner.Unmarshal(b, m)
	}
	if c.Inner.Name() == ProtoName {
		return UnmarshalLeases(b, dst)
	}
	var res v1.ClaimResponse
	if err := c.Inner.Unmarshal(b, &res); err != nil {
		return err
	}
	dst.Leases = Leases(res.GetLeases())
	return nil
}

// ClientProto is the protobuf codec connect uses by default, for the
// client's LeaseCodec to wrap.
type ClientProto struct{}

// Name implements connect.Codec.
func (ClientProto) Name() string { return ProtoName }

// Marshal implements connect.Codec.
func (ClientProto) Marshal(m any) ([]byte, error) { return ClientProto{}.MarshalAppend(nil, m) }

// MarshalAppend marshals into b.
func (ClientProto) MarshalAppend(b []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return proto.MarshalOptions{}.MarshalAppend(b, pm)
}

// Unmarshal implements connect.Codec.
func (ClientProto) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", m)
	}
	return proto.Unmarshal(b, pm)
}

// errLeaseBytes is the error of bytes that are not a reply of leases.
var errLeaseBytes = errors.New("docket: malformed leases in a reply")

// UnmarshalLeases decodes the protobuf bytes of a ClaimResponse (or
// ClaimWaitResponse) into dst, with the result proto.Unmarshal and Leases
// would give: unknown fields and fields of an unexpected wire type are
// skipped, a scalar given twice keeps its last value, a message given
// twice is merged, a string that is not UTF-8 is an error. The payloads
// and progress of all the leases share one allocation (each its own
// part of it), and so do the strings the leases repeat.
func UnmarshalLeases(b []byte, dst *LeaseList) error {
	dst.Leases = nil
	if n := countLeases(b); n > 0 {
		dst.Leases = make([]engine.Lease, 0, n)
	}
	d := leaseDecoder{bytes: make([]byte, 0, len(b))}
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errLeaseBytes, protowire.ParseError(n))
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: %v", errLeaseBytes, protowire.ParseError(n))
			}
			b = b[n:]
			var l engine.Lease
			if err := d.lease(v, &l); err != nil {
				return err
			}
			dst.Leases = append(dst.Leases, l)
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return fmt.Errorf("%w: %v", errLeaseBytes, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

// countLeases counts the leases in a reply's bytes, to size the slice;
// what does not parse is left for the decoding to report.
func countLeases(b []byte) int {
	n := 0
	for len(b) > 0 {
		num, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			break
		}
		b = b[m:]
		if m = protowire.ConsumeFieldValue(num, typ, b); m < 0 {
			break
		}
		b = b[m:]
		if num == 1 && typ == protowire.BytesType {
			n++
		}
	}
	return n
}

// leaseDecoder keeps what the leases of one reply share.
type leaseDecoder struct {
	bytes   []byte   // payloads and progress, one after the other
	strings []string // strings seen, to give a repeat the same string
}

// str returns b as a string, the same one as an earlier equal string.
func (d *leaseDecoder) str(b []byte) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: a string is not UTF-8", errLeaseBytes)
	}
	for _, s := range d.strings {
		if s == string(b) {
			return s, nil
		}
	}
	s := string(b)
	if len(d.strings) < 8 {
		d.strings = append(d.strings, s)
	}
	return s, nil
}

// copyBytes returns a copy of b in the shared buffer, its capacity its
// length so that an append by its holder cannot reach the next one's; nil
// for none, as proto3 gives an empty bytes field.
func (d *leaseDecoder) copyBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if len(b) > cap(d.bytes)-len(d.bytes) {
		return append([]byte{}, b...)
	}
	start := len(d.bytes)
	d.bytes = append(d.bytes, b...)
	return d.bytes[start:len(d.bytes):len(d.bytes)]
}

// consumeTag is protowire.ConsumeTag refusing, as proto.Unmarshal does,
// a field number beyond the largest valid one.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -2 // ParseError: invalid field number
	}
	return num, typ, n
}

// field reads the next field of a message: its number, wire type, and
// its value (the bytes of a length-delimited one, or v for a varint or
// fixed64); n is what it took, negative when malformed.
func field(b []byte) (num protowire.Number, typ protowire.Type, bs []byte, v uint64, n int) {
	num, typ, n = consumeTag(b)
	if n < 0 {
		return 0, 0, nil, 0, n
	}
	var m int
	switch typ {
	case protowire.VarintType:
		v, m = protowire.ConsumeVarint(b[n:])
	case protowire.Fixed64Type:
		v, m = protowire.ConsumeFixed64(b[n:])
	case protowire.BytesType:
		bs, m = protowire.ConsumeBytes(b[n:])
	default:
		m = protowire.ConsumeFieldValue(num, typ, b[n:])
	}
	if m < 0 {
		return 0, 0, nil, 0, m
	}
	return num, typ, bs, v, n + m
}

func (d *leaseDecoder) lease(b []byte, l *engine.Lease) error {
	var project, scope string
	var deadline, enqueued stamp
	for len(b) > 0 {
		num, typ, bs, v, n := field(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errLeaseBytes, protowire.ParseError(n))
		}
		b = b[n:]
		var err error
		switch {
		case num == 1 && typ == protowire.VarintType:
			l.ID = v
		case num == 2 && typ == protowire.BytesType:
			err = d.pair(bs, &project, &scope)
		case num == 3 && typ == protowire.BytesType:
			l.Queue, err = d.str(bs)
		case num == 4 && typ == protowire.BytesType:
			l.Kind, err = d.str(bs)
		case num == 5 && typ == protowire.BytesType:
			l.Payload = d.copyBytes(bs)
		case num == 6 && typ == protowire.BytesType:
			err = d.header(bs, l)
		case num == 6 && l.Headers == nil:
			// proto.Unmarshal makes the map before it finds the wire type
			// wrong and skips the field.
			l.Headers = map[string]string{}
		case num == 7 && typ == protowire.BytesType:
			l.Progress = d.copyBytes(bs)
		case num == 8 && typ == protowire.VarintType:
			l.Priority = int(int64(v))
		case num == 9 && typ == protowire.VarintType:
			l.Attempt = int(int32(v))
		case num == 10 && typ == protowire.VarintType:
			l.MaxAttempts = int(int32(v))
		case num == 11 && typ == protowire.BytesType:
			l.Owner, err = d.str(bs)
		case num == 12 && typ == protowire.VarintType:
			l.Token = v
		case num == 13 && typ == protowire.Fixed64Type:
			l.Secret = v
		case num == 14 && typ == protowire.BytesType:
			err = deadline.read(bs)
		case num == 15 && typ == protowire.BytesType:
			err = enqueued.read(bs)
		case num == 16 && typ == protowire.BytesType:
			l.Partition, err = d.str(bs)
		}
		if err != nil {
			return err
		}
	}
	l.Namespace = engine.NS(project, scope)
	l.Deadline, l.EnqueuedAt = deadline.time(), enqueued.time()
	return nil
}

// pair reads a message of two string fields, numbers 1 and 2 (a
// Namespace, or one entry of a map<string, string>), into first and second;
// a field given twice keeps its last value, as proto.Unmarshal does.
func (d *leaseDecoder) pair(b []byte, first, second *string) error {
	for len(b) > 0 {
		num, typ, bs, _, n := field(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errLeaseBytes, protowire.ParseError(n))
		}
		b = b[n:]
		var err error
		switch {
		case num == 1 && typ == protowire.BytesType:
			*first, err = d.str(bs)
		case num == 2 && typ == protowire.BytesType:
			*second, err = d.str(bs)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// header reads one entry of the headers map; a key given twice keeps its
// last value.
func (d *leaseDecoder) header(b []byte, l *engine.Lease) error {
	var key, val string
	if err := d.pair(b, &key, &val); err != nil {
		return err
	}
	if l.Headers == nil {
		l.Headers = map[string]string{}
	}
	l.Headers[key] = val
	return nil
}

// stamp is a google.protobuf.Timestamp being read.
type stamp struct {
	set     bool
	seconds int64
	nanos   int32
}

// The range of a valid Timestamp (0001-01-01 to 9999-12-31, as
// timestamppb's CheckValid).
const (
	minStampSeconds = -62135596800
	maxStampSeconds = 253402300799
)

// read merges the fields in b, as proto.Unmarshal merges a message given
// twice.
func (t *stamp) read(b []byte) error {
	t.set = true
	for len(b) > 0 {
		num, typ, _, v, n := field(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errLeaseBytes, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			t.seconds = int64(v)
		case num == 2 && typ == protowire.VarintType:
			t.nanos = int32(v)
		}
	}
	return nil
}

// time is timeOf of the message read: the zero time when there was none
// or it is out of range.
func (t *stamp) time() time.Time {
	if !t.set || t.seconds < minStampSeconds || t.seconds > maxStampSeconds || t.nanos < 0 || t.nanos >= 1e9 {
		return time.Time{}
	}
	return time.Unix(t.seconds, int64(t.nanos)).UTC()
}
