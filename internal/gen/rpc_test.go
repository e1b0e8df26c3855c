package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	v1 "github.com/docketdb/docket/proto/docket/v1"
)

const root = "../.."

// schema is the schema as the generated Go registers it, as buf build
// gives it to the rpc command (session.proto left out).
func schema(t *testing.T) *descriptorpb.FileDescriptorSet {
	t.Helper()
	_ = v1.File_docket_v1_types_proto
	fds := &descriptorpb.FileDescriptorSet{}
	protoregistry.GlobalFiles.RangeFilesByPackage(pkg, func(fd protoreflect.FileDescriptor) bool {
		if fd.Path() != sessionProto {
			fds.File = append(fds.File, protodesc.ToFileDescriptorProto(fd))
		}
		return true
	})
	if len(fds.File) < 5 {
		t.Fatalf("only %d files of %s registered", len(fds.File), pkg)
	}
	return fds
}

// TestGeneratedUpToDate: what the rpc command writes from the schema and the
// source is what the repository holds: a generated file edited by hand, a
// handler or client method added or removed by hand, or a schema change
// without `go generate ./proto/...`, fails here (and in CI's "generated
// code" stage, which runs the whole chain).
func TestGeneratedUpToDate(t *testing.T) {
	outs, err := generateRPC(root, schema(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 4 {
		t.Fatalf("%d files written, want 4", len(outs))
	}
	for _, o := range outs {
		have, err := os.ReadFile(filepath.Join(root, o.path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, o.src) {
			t.Errorf("%s is out of date: run go generate ./proto/...", o.path)
		}
		if o.path != filepath.Join("proto", "docket", "v1", "session.proto") && !bytes.HasPrefix(o.src, []byte("// Code generated ")) {
			t.Errorf("%s has no Code generated header", o.path)
		}
	}
}

// TestGeneratedCoversPlainCalls: the Queues calls the server and client no
// longer write by hand are written, and the session routes cover every
// session call, hand-written runs included.
func TestGeneratedCoversPlainCalls(t *testing.T) {
	outs, err := generateRPC(root, schema(t))
	if err != nil {
		t.Fatal(err)
	}
	src := map[string]string{}
	for _, o := range outs {
		src[filepath.Base(o.path)] = string(o.src)
	}
	for _, m := range []string{"Cancel", "Redrive", "RedriveAll", "RunNow", "Reschedule"} {
		if !strings.Contains(src["rpc_gen.go"], "func (h queuesRPC) "+m+"(") || !strings.Contains(src["rpc_gen.go"], "wire.Serve"+m+"(ctx, q, m)") {
			t.Errorf("server: no generated handler for %s", m)
		}
		if !strings.Contains(src["queue_gen.go"], "func (q *queue) "+m+"(") || !strings.Contains(src["queue_gen.go"], "wire.PB"+m+"(q.pb, q.name") {
			t.Errorf("client: no generated method for %s", m)
		}
		if !strings.Contains(src["queue_gen.go"], ", false, op"+m+",") {
			t.Errorf("client: %s is repeated after a lost answer", m)
		}
	}
	if !strings.Contains(src["queue_gen.go"], "func (q *queue) Get(") || !strings.Contains(src["queue_gen.go"], ", true, opGet,") {
		t.Errorf("client: Get (no side effects) is not generated as repeated after a lost answer")
	}
	for _, r := range []string{`to("enqueue", docketv1connect.QueuesEnqueueProcedure, s.runEnqueue)`,
		`to("kv_get", docketv1connect.KVGetProcedure, s.runKVGet)`, `to("reschedule", docketv1connect.QueuesRescheduleProcedure, s.runReschedule)`,
		`to("queues", docketv1connect.AdminQueuesProcedure, s.runQueues)`} {
		if !strings.Contains(src["session_routes_gen.go"], r) {
			t.Errorf("routes lack %s", r)
		}
	}
	rpcs, err := readRPCs(schema(t))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, r := range rpcs {
		if r.session != 0 {
			calls++
		}
	}
	if n := strings.Count(src["session_routes_gen.go"], "\t\tto("); n != calls || calls < 30 {
		t.Errorf("%d routes, want one for each of the schema's %d session calls", n, calls)
	}
}

// method finds a method of the schema to change.
func method(t *testing.T, fds *descriptorpb.FileDescriptorSet, service, name string) (*descriptorpb.ServiceDescriptorProto, int) {
	t.Helper()
	for _, f := range fds.File {
		for _, s := range f.Service {
			for i, m := range s.Method {
				if s.GetName() == service && m.GetName() == name {
					return s, i
				}
			}
		}
	}
	t.Fatalf("no %s.%s", service, name)
	return nil, 0
}

// TestGenerateRefuses: a schema or source the rpc command cannot write from is
// refused with the reason, naming the call, and nothing is written.
func TestGenerateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*testing.T, *descriptorpb.FileDescriptorSet)
		want   string
	}{
		{"handler neither written nor plain", func(t *testing.T, fds *descriptorpb.FileDescriptorSet) {
			s, _ := method(t, fds, "Queues", "Get")
			s.Method = append(s.Method, &descriptorpb.MethodDescriptorProto{Name: proto.String("Frob"),
				InputType: proto.String(".docket.v1.StatsRequest"), OutputType: proto.String(".docket.v1.StatsResponse")})
		}, "Queues.Frob has no handler (queuesRPC.Frob) written by hand and is not plain"},
		{"session number twice", func(t *testing.T, fds *descriptorpb.FileDescriptorSet) {
			s, i := method(t, fds, "Queues", "Redrive")
			proto.SetExtension(s.Method[i].Options, v1.E_Session, uint32(19))
		}, "Queues.Cancel and Queues.Redrive: both are session field 19"},
		{"session number taken by Call", func(t *testing.T, fds *descriptorpb.FileDescriptorSet) {
			s, i := method(t, fds, "Queues", "Redrive")
			proto.SetExtension(s.Method[i].Options, v1.E_Session, uint32(2))
		}, "session field 2 is not free"},
		{"session name twice", func(t *testing.T, fds *descriptorpb.FileDescriptorSet) {
			s, i := method(t, fds, "KV", "Get")
			proto.SetExtension(s.Method[i].Options, v1.E_SessionName, "get")
		}, `session field name "get" is taken`},
		{"session call without run", func(t *testing.T, fds *descriptorpb.FileDescriptorSet) {
			s, i := method(t, fds, "Admin", "Stats")
			s.Method[i].Options = &descriptorpb.MethodOptions{}
			proto.SetExtension(s.Method[i].Options, v1.E_Session, uint32(70))
		}, "session call stats (Admin.Stats) has no function runStats"},
		{"engine method without rpc", func(t *testing.T, fds *descriptorpb.FileDescriptorSet) {
			s, i := method(t, fds, "Queues", "Reschedule")
			s.Method = append(s.Method[:i], s.Method[i+1:]...)
		}, "engine.Queue.Reschedule has no method written by hand and Queues has no rpc Reschedule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fds := schema(t)
			tc.change(t, fds)
			outs, err := generateRPC(root, fds)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %d files, error %v; want %q", len(outs), err, tc.want)
			}
		})
	}
}

// TestSessionOptionsUnknown: the rpc command, which links no generated Go, reads the
// session options buf writes as fields its MethodOptions does not know.
func TestSessionOptionsUnknown(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, 34, protowire.VarintType) // idempotency_level
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 60001, protowire.BytesType) // another option
	b = protowire.AppendString(b, "x")
	b = protowire.AppendTag(b, 50703, protowire.BytesType)
	b = protowire.AppendString(b, "kv_get")
	b = protowire.AppendTag(b, 50702, protowire.VarintType)
	b = protowire.AppendVarint(b, 40)
	o := &descriptorpb.MethodOptions{}
	if err := (proto.UnmarshalOptions{Resolver: (*protoregistry.Types)(nil)}).Unmarshal(b, o); err != nil {
		t.Fatal(err)
	}
	if len(o.ProtoReflect().GetUnknown()) == 0 {
		t.Fatal("the options were read as known fields")
	}
	num, name, err := sessionOptions(o, 50702, 50703)
	if err != nil || num != 40 || name != "kv_get" {
		t.Fatalf("read %d %q %v", num, name, err)
	}
	if o.GetIdempotencyLevel() != descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
		t.Fatalf("idempotency level %v", o.GetIdempotencyLevel())
	}
}

// TestBetweenMarkers: session.proto without one pair of markers is
// refused; with them, only what they enclose changes.
func TestBetweenMarkers(t *testing.T) {
	s := "a\n" + beginCalls + "old\n" + endCalls + "b\n"
	got, err := between(s, beginCalls, endCalls, "new\n")
	if err != nil || got != "a\n"+beginCalls+"new\n"+endCalls+"b\n" {
		t.Fatalf("%q %v", got, err)
	}
	for _, bad := range []string{"a\nb\n", "a\n" + endCalls + beginCalls, s + beginCalls} {
		if _, err := between(bad, beginCalls, endCalls, "new\n"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestNames: the names the rpc command derives.
func TestNames(t *testing.T) {
	for in, want := range map[string]string{"RunNow": "run_now", "CompleteAndClaim": "complete_and_claim", "Get": "get"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%s) = %s", in, got)
		}
	}
	for in, want := range map[string]string{"kv_get": "KvGet", "run_now": "RunNow", "queues": "Queues"} {
		if got := camel(in); got != want {
			t.Errorf("camel(%s) = %s", in, got)
		}
	}
	for in, want := range map[string]string{"Queues": "queuesRPC", "KV": "kvRPC", "KVStore": "kvStoreRPC", "Admin": "adminRPC"} {
		if got := handlerType(in); got != want {
			t.Errorf("handlerType(%s) = %s", in, got)
		}
	}
}
