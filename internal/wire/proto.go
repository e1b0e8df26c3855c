package wire

import (
	"errors"
	"fmt"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/docketdb/docket/engine"
)

// ProtoName is the name of the protobuf codec (application/proto).
const ProtoName = "proto"

// ProtoCodec is the protobuf codec of a server: it checks a request's
// shape (CheckRequest) before it builds the message.
type ProtoCodec struct {
	// MaxValueBytes, if positive, bounds every bytes field (a payload,
	// result, progress record or KV value): the engine's payload limit.
	MaxValueBytes int
}

var _ connect.Codec = ProtoCodec{}

// Name implements connect.Codec.
func (ProtoCodec) Name() string { return ProtoName }

// IsBinary tells connect the codec is binary (for GET requests).
func (ProtoCodec) IsBinary() bool { return true }

// Marshal implements connect.Codec.
func (c ProtoCodec) Marshal(m any) ([]byte, error) { return c.MarshalAppend(nil, m) }

// MarshalAppend lets connect marshal into a pooled buffer.
func (ProtoCodec) MarshalAppend(b []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return proto.MarshalOptions{}.MarshalAppend(b, pm)
}

// MarshalStable implements connect's stable codec (for GET requests).
func (ProtoCodec) MarshalStable(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(pm)
}

// Unmarshal implements connect.Codec.
func (c ProtoCodec) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", m)
	}
	if err := CheckRequest(b, pm.ProtoReflect().Descriptor(), c.MaxValueBytes); err != nil {
		return err
	}
	return proto.Unmarshal(b, pm)
}

// Element limits of a request: no list holds more than the engine's
// largest batch (tasks, ops, leases), no map more than a task's headers.
// Anything over them the engine would refuse; refusing it before it is
// decoded keeps a request of two bytes per element (an empty task) from
// making the server build millions of messages.
func elementLimit(fd protoreflect.FieldDescriptor) int {
	if fd.IsMap() {
		return engine.MaxHeaders
	}
	return max(engine.MaxBatch, engine.MaxOps)
}

func overLimit(fd protoreflect.FieldDescriptor) error {
	return fmt.Errorf("%s holds more than %d elements, over the engine's limit", fd.FullName(), elementLimit(fd))
}

// MaxStringBytes bounds every string field of a request, a map's keys and
// values included. The longest string the engine keeps is a failure's
// error text, cut at engine.MaxErrorBytes (8 KiB); names, keys, headers
// and filters are shorter still. A string over it is refused before the
// request is built, so that a frame of megabytes in one string costs the
// server its bytes once, not once more as a string it then refuses.
// Payloads, results, progress and KV values are bytes, held to the
// engine's payload limit (CheckRequest).
const MaxStringBytes = 64 << 10

func stringTooLong(fd protoreflect.FieldDescriptor, n int) error {
	return fmt.Errorf("%s is %d bytes, over the limit of %d for a string", fd.FullName(), n, MaxStringBytes)
}

func valueTooLong(fd protoreflect.FieldDescriptor, n, max int) error {
	return fmt.Errorf("%s is %d bytes, over the limit of %d (the payload limit)", fd.FullName(), n, max)
}

// CheckProto walks protobuf bytes of a message of type md and refuses them
// when a list or map field of any message in them holds more elements than
// the engine accepts, when a string field (a map's keys and values too) is
// longer than MaxStringBytes, or when they do not parse. It allocates
// nothing once it has seen md (the first call for a type builds the
// type's shape).
func CheckProto(b []byte, md protoreflect.MessageDescriptor) error {
	return checkProto(b, shapeOf(md), 0, 0)
}

// CheckRequest is CheckProto holding, too, every bytes field (a payload,
// result, progress record or KV value, which the engine bounds by its
// payload limit) to maxValue bytes when maxValue is positive.
func CheckRequest(b []byte, md protoreflect.MessageDescriptor, maxValue int) error {
	return checkProto(b, shapeOf(md), maxValue, 0)
}

// shape is what checkProto needs of a message type, found once: its list,
// map and message fields by number.
type shape struct {
	md     protoreflect.MessageDescriptor
	fields []fieldShape                     // by field number, below maxShapeField
	far    map[protowire.Number]*fieldShape // the others (none in docket's schema)
}

// fieldShape is one field of a shape: a list or map and its limit, a
// message (or a map's entry) to walk into, a string or bytes to measure,
// or none of these (zero: skipped).
type fieldShape struct {
	fd       protoreflect.FieldDescriptor
	limit    int // > 0 for a list or map: the elements it may hold
	kind     protoreflect.Kind
	packable bool   // a list that may come packed
	msg      *shape // a message (or a list or map of them) to walk into
	str      bool   // a string (or a list of them): at most MaxStringBytes
	bytes    bool   // bytes: at most the payload limit, when one is given
}

// shapes holds the shapes built so far, by message descriptor.
var shapes sync.Map

// shapeOf returns md's shape, building it and those of the messages it
// holds the first time.
func shapeOf(md protoreflect.MessageDescriptor) *shape {
	if sh, ok := shapes.Load(md); ok {
		return sh.(*shape)
	}
	built := map[protoreflect.MessageDescriptor]*shape{}
	sh := buildShape(md, built)
	for d, s := range built {
		shapes.LoadOrStore(d, s)
	}
	v, _ := shapes.Load(md)
	if v != nil {
		return v.(*shape)
	}
	return sh
}

// buildShape builds md's shape and, through built (which breaks the
// cycles of recursive types), those of its message fields.
func buildShape(md protoreflect.MessageDescriptor, built map[protoreflect.MessageDescriptor]*shape) *shape {
	if sh, ok := built[md]; ok {
		return sh
	}
	if v, ok := shapes.Load(md); ok {
		return v.(*shape)
	}
	sh := &shape{md: md}
	built[md] = sh
	fds := md.Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		var f fieldShape
		if fd.IsList() || fd.IsMap() {
			f.limit = elementLimit(fd)
			f.packable = fd.IsList() && packable(fd.Kind())
		}
		if fd.Message() != nil {
			f.msg = buildShape(fd.Message(), built) // a map's entries are messages
		}
		f.str = fd.Kind() == protoreflect.StringKind
		f.bytes = fd.Kind() == protoreflect.BytesKind
		if f.limit == 0 && f.msg == nil && !f.str && !f.bytes {
			continue // a scalar: nothing to check
		}
		f.fd, f.kind = fd, fd.Kind()
		num := int(fd.Number())
		if num >= maxShapeField {
			if sh.far == nil {
				sh.far = map[protowire.Number]*fieldShape{}
			}
			sh.far[fd.Number()] = &f
			continue
		}
		if num >= len(sh.fields) {
			sh.fields = append(sh.fields, make([]fieldShape, num+1-len(sh.fields))...)
		}
		sh.fields[num] = f
	}
	return sh
}

// maxShapeField bounds the field numbers a shape indexes in a slice:
// docket's messages number their list, map and message fields well under
// it; a field past it is looked up in a map.
const maxShapeField = 1 << 10

func checkProto(b []byte, sh *shape, maxValue, depth int) error {
	if depth > maxDepth {
		return errors.New("protobuf message nested too deep")
	}
	// The few list fields of one message and how many elements each has
	// held so far; docket's messages have at most two.
	type count struct {
		num protowire.Number
		n   int
	}
	var buf [4]count
	counts := buf[:0]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var f *fieldShape
		if int(num) < len(sh.fields) {
			f = &sh.fields[num]
		} else if sh.far != nil {
			f = sh.far[num]
		}
		if f != nil && f.limit > 0 {
			i := 0
			for i < len(counts) && counts[i].num != num {
				i++
			}
			if i == len(counts) {
				if len(counts) == cap(counts) {
					return fmt.Errorf("%s has more list fields than the schema", sh.md.FullName())
				}
				counts = append(counts, count{num: num})
			}
			elems := 1
			if typ == protowire.BytesType && f.packable {
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return protowire.ParseError(n)
				}
				elems = packedElements(v, f.kind)
			}
			counts[i].n += elems
			if counts[i].n > f.limit {
				return overLimit(f.fd)
			}
		}
		if f != nil && (f.msg != nil || f.str || f.bytes) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			switch {
			case f.str && len(v) > MaxStringBytes:
				return stringTooLong(f.fd, len(v))
			case f.bytes && maxValue > 0 && len(v) > maxValue:
				return valueTooLong(f.fd, len(v), maxValue)
			}
			if f.msg != nil {
				if err := checkProto(v, f.msg, maxValue, depth+1); err != nil {
					return err
				}
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}

// packable reports whether a list of kind k may be sent packed: one field
// of many elements, each of which counts against the list's limit.
func packable(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return false
	}
	return true
}

// packedElements counts the elements of packed list bytes v: one per
// varint (a byte without its high bit ends one), or per fixed-size value.
func packedElements(v []byte, k protoreflect.Kind) int {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return (len(v) + 3) / 4
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return (len(v) + 7) / 8
	}
	n := 0
	for _, c := range v {
		if c < 0x80 {
			n++
		}
	}
	if len(v) > 0 && v[len(v)-1] >= 0x80 {
		n++ // a truncated last varint: proto.Unmarshal refuses it
	}
	return n
}
