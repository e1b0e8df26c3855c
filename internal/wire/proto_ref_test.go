package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// checkProtoRef is CheckProto as it walked the descriptors themselves on
// every call, before shapes: the reference the shapes must agree with.
func checkProtoRef(b []byte, md protoreflect.MessageDescriptor, maxValue, depth int) error {
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
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		fd := fields.ByNumber(num)
		if fd != nil && (fd.IsList() || fd.IsMap()) {
			i := 0
			for i < len(counts) && counts[i].num != num {
				i++
			}
			if i == len(counts) {
				if len(counts) == cap(counts) {
					return fmt.Errorf("%s has more list fields than the schema", md.FullName())
				}
				counts = append(counts, count{num: num})
			}
			elems := 1
			if typ == protowire.BytesType && fd.IsList() && packable(fd.Kind()) {
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return protowire.ParseError(n)
				}
				elems = packedElements(v, fd.Kind())
			}
			counts[i].n += elems
			if counts[i].n > elementLimit(fd) {
				return overLimit(fd)
			}
		}
		if fd != nil && typ == protowire.BytesType && fd.Kind() == protoreflect.StringKind {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if len(v) > MaxStringBytes {
				return stringTooLong(fd, len(v))
			}
			b = b[n:]
			continue
		}
		if fd != nil && typ == protowire.BytesType && fd.Kind() == protoreflect.BytesKind {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if maxValue > 0 && len(v) > maxValue {
				return valueTooLong(fd, len(v), maxValue)
			}
			b = b[n:]
			continue
		}
		if fd != nil && typ == protowire.BytesType && fd.Message() != nil {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if err := checkProtoRef(v, fd.Message(), maxValue, depth+1); err != nil {
				return err
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

// refCases are frames for the comparison: well-formed calls, calls over
// the element limits (repeated and packed), nesting, and damage.
func refCases(tb testing.TB) [][]byte {
	tb.Helper()
	mk := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	headers := map[string]string{}
	for i := range 65 {
		headers[fmt.Sprint(i)] = "v"
	}
	tasks := make([]*v1.Task, 10_001)
	for i := range tasks {
		tasks[i] = &v1.Task{}
	}
	ids := make([]uint64, 10_001)
	frame := enqueueCall(tb)
	cases := [][]byte{
		frame,
		mk(&v1.Call{Id: 1, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Task: &v1.Task{Headers: headers}}}}),
		mk(&v1.Call{Id: 2, Call: &v1.Call_EnqueueBatch{EnqueueBatch: &v1.EnqueueBatchRequest{Tasks: tasks}}}),
		mk(&v1.Call{Id: 3, Call: &v1.Call_EnqueueBatch{EnqueueBatch: &v1.EnqueueBatchRequest{Tasks: tasks[:10]}}}),
		mk(&v1.Call{Id: 4, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Task: &v1.Task{DependsOn: ids}}}}),
		mk(&v1.Call{Id: 5, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Task: &v1.Task{DependsOn: ids[:3]}}}}),
		{},
		{0xff},
		frame[:len(frame)-1],
		append(protowire.AppendTag(nil, 999, protowire.BytesType), 2, 1, 1),
	}
	// Strings at and over MaxStringBytes: a field, a map's value and key.
	long, over := strings.Repeat("k", MaxStringBytes), strings.Repeat("k", MaxStringBytes+1)
	for _, task := range []*v1.Task{{Kind: long}, {Kind: over}, {Headers: map[string]string{"h": over}}, {Headers: map[string]string{over: "v"}}} {
		cases = append(cases, mk(&v1.Call{Id: 6, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Task: task}}}))
	}
	cases = append(cases, mk(&v1.Call{Id: 7, Call: &v1.Call_KvGet{KvGet: &v1.KVGetRequest{Key: over}}}))
	// Values at and over refValueLimit: a payload, a KV value in an op.
	for _, n := range []int{refValueLimit, refValueLimit + 1} {
		v := bytes.Repeat([]byte("1"), n)
		cases = append(cases,
			mk(&v1.Call{Id: 8, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Task: &v1.Task{Payload: v}}}}),
			mk(&v1.Call{Id: 9, Call: &v1.Call_KvCommit{KvCommit: &v1.KVCommitRequest{Ops: []*v1.Op{{Op: &v1.Op_Set{Set: &v1.SetOp{Key: "k", Value: v}}}}}}}))
	}
	// An unpacked list over the limit: the same field repeated.
	var unpacked []byte
	for range 10_001 {
		unpacked = protowire.AppendTag(unpacked, 1, protowire.VarintType)
		unpacked = protowire.AppendVarint(unpacked, 7)
	}
	return append(cases, unpacked)
}

// refValueLimit is the payload limit the comparisons hold values to, as
// well as none.
const refValueLimit = 128

// TestCheckProtoAgreesWithReference: the shapes give every frame the
// verdict, and the error, the descriptors' own walk gave, with a payload
// limit and without.
func TestCheckProtoAgreesWithReference(t *testing.T) {
	md := (&v1.Call{}).ProtoReflect().Descriptor()
	refused := 0
	for i, b := range refCases(t) {
		if got, want := errText(CheckProto(b, md)), errText(checkProtoRef(b, md, 0, 0)); got != want {
			t.Errorf("case %d: %q, reference %q", i, got, want)
		}
		got, want := errText(CheckRequest(b, md, refValueLimit)), errText(checkProtoRef(b, md, refValueLimit, 0))
		if got != want {
			t.Errorf("case %d within %d: %q, reference %q", i, refValueLimit, got, want)
		}
		if strings.Contains(got, "(the payload limit)") {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("%d cases over the payload limit refused, want the 2 made so", refused)
	}
	for _, m := range []proto.Message{&v1.Call{}, &v1.EnqueueBatchRequest{}, &v1.Task{}} {
		d := m.ProtoReflect().Descriptor()
		for i, b := range refCases(t) {
			for _, limit := range []int{0, refValueLimit} {
				if got, want := errText(CheckRequest(b, d, limit)), errText(checkProtoRef(b, d, limit, 0)); got != want {
					t.Errorf("%s case %d within %d: %q, reference %q", d.FullName(), i, limit, got, want)
				}
			}
		}
	}
}

// FuzzCheckProto: on any bytes, the shapes and the reference agree.
func FuzzCheckProto(f *testing.F) {
	for _, b := range refCases(f) {
		if len(b) < 4096 {
			f.Add(b)
		}
	}
	md := (&v1.Call{}).ProtoReflect().Descriptor()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, limit := range []int{0, 8} {
			if got, want := errText(CheckRequest(b, md, limit)), errText(checkProtoRef(b, md, limit, 0)); got != want {
				t.Fatalf("within %d: %q, reference %q", limit, got, want)
			}
		}
	})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestCheckProtoFarFields: list fields numbered past maxShapeField are
// checked as the others (docket's schema has none; a type made here has).
func TestCheckProtoFarFields(t *testing.T) {
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("far.proto"),
		Package: proto.String("far"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Far"),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name:   proto.String("ids"),
				Number: proto.Int32(5000),
				Label:  descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum(),
				Type:   descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
			}},
		}},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().Get(0)
	var over, under []byte
	for i := range max(engine.MaxBatch, engine.MaxOps) + 1 {
		over = protowire.AppendTag(over, 5000, protowire.BytesType)
		over = protowire.AppendString(over, "x")
		if i < 10 {
			under = append(under, over[len(over)-5:]...)
		}
	}
	if err := CheckProto(over, md); err == nil || errText(err) != errText(checkProtoRef(over, md, 0, 0)) {
		t.Fatalf("a far list over the limit: %v, reference %v", err, checkProtoRef(over, md, 0, 0))
	}
	if err := CheckProto(under, md); err != nil {
		t.Fatalf("a far list under the limit: %v", err)
	}
}
