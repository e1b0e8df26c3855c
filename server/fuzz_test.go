package server

import (
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

type requestType struct {
	msg    func() proto.Message
	decode func(proto.Message) error
}

// requestTypes are the request messages of every procedure with the
// decoder its handler runs on it (nil where the handler only reads plain
// fields).
var requestTypes = []requestType{
	{func() proto.Message { return new(v1.EnqueueRequest) }, func(m proto.Message) error {
		_, _, err := decodeEnqueue(m.(*v1.EnqueueRequest))
		return err
	}},
	{func() proto.Message { return new(v1.EnqueueBatchRequest) }, func(m proto.Message) error {
		_, _, err := decodeEnqueueBatch(m.(*v1.EnqueueBatchRequest))
		return err
	}},
	{func() proto.Message { return new(v1.ClaimRequest) }, func(m proto.Message) error {
		r := m.(*v1.ClaimRequest)
		_, err := decodeClaim(r.GetOwner(), r.GetLease(), r.GetMax())
		return err
	}},
	{func() proto.Message { return new(v1.ClaimWaitRequest) }, func(m proto.Message) error {
		_, _, err := decodeClaimWait(m.(*v1.ClaimWaitRequest))
		return err
	}},
	{func() proto.Message { return new(v1.CompleteRequest) }, func(m proto.Message) error {
		_, _, err := decodeComplete(m.(*v1.CompleteRequest))
		return err
	}},
	{func() proto.Message { return new(v1.CompleteBatchRequest) }, func(m proto.Message) error {
		decodeCompleteBatch(m.(*v1.CompleteBatchRequest))
		return nil
	}},
	{func() proto.Message { return new(v1.FailRequest) }, func(m proto.Message) error {
		_, _, err := decodeFail(m.(*v1.FailRequest))
		return err
	}},
	{func() proto.Message { return new(v1.HeartbeatRequest) }, func(m proto.Message) error {
		_, _, _, err := decodeHeartbeat(m.(*v1.HeartbeatRequest))
		return err
	}},
	{func() proto.Message { return new(v1.SnoozeRequest) }, func(m proto.Message) error {
		_, _, err := decodeSnooze(m.(*v1.SnoozeRequest))
		return err
	}},
	{func() proto.Message { return new(v1.ListRequest) }, func(m proto.Message) error {
		if st := decodeList(m.(*v1.ListRequest)).State; st != 0 && int32(st) != int32(m.(*v1.ListRequest).GetState()) {
			return errors.New("a list state out of range became another state")
		}
		return nil
	}},
	{func() proto.Message { return new(v1.KVScanRequest) }, func(m proto.Message) error {
		decodeScan(m.(*v1.KVScanRequest))
		return nil
	}},
	{func() proto.Message { return new(v1.KVCommitRequest) }, func(m proto.Message) error {
		_, err := decodeCommit(m.(*v1.KVCommitRequest))
		return err
	}},
	{func() proto.Message { return new(v1.CompleteAndClaimRequest) }, func(m proto.Message) error {
		_, _, _, err := decodeCompleteAndClaim(m.(*v1.CompleteAndClaimRequest))
		return err
	}},
	{func() proto.Message { return new(v1.HeartbeatBatchRequest) }, func(m proto.Message) error {
		_, err := wire.Duration("extend", m.(*v1.HeartbeatBatchRequest).GetExtend())
		return err
	}},
	// The Each calls: the bound on their items, then each item's own
	// decoder, as their handlers run them.
	{func() proto.Message { return new(v1.EnqueueEachRequest) }, func(m proto.Message) error {
		return decodeEach(m.(*v1.EnqueueEachRequest).GetItems(), func(r *v1.EnqueueRequest) error {
			_, _, err := decodeEnqueue(r)
			return err
		})
	}},
	{func() proto.Message { return new(v1.CompleteEachRequest) }, func(m proto.Message) error {
		return decodeEach(m.(*v1.CompleteEachRequest).GetItems(), func(r *v1.CompleteRequest) error {
			_, _, err := decodeComplete(r)
			return err
		})
	}},
	{func() proto.Message { return new(v1.FailEachRequest) }, func(m proto.Message) error {
		return decodeEach(m.(*v1.FailEachRequest).GetItems(), func(r *v1.FailRequest) error {
			_, _, err := decodeFail(r)
			return err
		})
	}},
	{func() proto.Message { return new(v1.HeartbeatEachRequest) }, func(m proto.Message) error {
		return decodeEach(m.(*v1.HeartbeatEachRequest).GetItems(), func(r *v1.HeartbeatRequest) error {
			_, _, _, err := decodeHeartbeat(r)
			return err
		})
	}},
	{func() proto.Message { return new(v1.CompleteAndClaimEachRequest) }, func(m proto.Message) error {
		return decodeEach(m.(*v1.CompleteAndClaimEachRequest).GetItems(), func(r *v1.CompleteAndClaimRequest) error {
			_, _, _, err := decodeCompleteAndClaim(r)
			return err
		})
	}},
	{func() proto.Message { return new(v1.CancelRequest) }, nil},
	{func() proto.Message { return new(v1.RedriveRequest) }, nil},
	{func() proto.Message { return new(v1.RedriveAllRequest) }, nil},
	{func() proto.Message { return new(v1.RunNowRequest) }, nil},
	{func() proto.Message { return new(v1.GetRequest) }, nil},
	{func() proto.Message { return new(v1.CountsRequest) }, nil},
	{func() proto.Message { return new(v1.KVGetRequest) }, nil},
	{func() proto.Message { return new(v1.QueuesRequest) }, nil},
	{func() proto.Message { return new(v1.StatsRequest) }, nil},
	{func() proto.Message { return new(v1.CheckpointRequest) }, nil},
	{func() proto.Message { return new(v1.VerifyRequest) }, nil},
	{func() proto.Message { return new(v1.HealthRequest) }, nil},
	{func() proto.Message { return new(v1.RescheduleRequest) }, func(m proto.Message) error {
		_, err := wire.Reschedule(m.(*v1.RescheduleRequest))
		return err
	}},
}

// decodeEach checks the bound on the items of an Each call and decodes
// each item, returning the first refusal that is not ErrInvalid (an item
// refused with ErrInvalid fails alone, which is fine).
func decodeEach[T any](items []*T, decode func(*T) error) error {
	if err := checkEach(len(items)); err != nil {
		return err
	}
	for _, it := range items {
		if err := decode(it); err != nil && !errors.Is(err, engine.ErrInvalid) {
			return err
		}
	}
	return nil
}

// FuzzDecodeRequest feeds arbitrary bytes, as protobuf and as JSON, to the
// server's codecs and then to the decoder of the request type: nothing may
// panic, a decoder may refuse only with ErrInvalid, and what is allocated
// stays proportional to the input (no length or count read from the input
// sizes an allocation on its own).
func FuzzDecodeRequest(f *testing.F) {
	task := &v1.Task{Payload: []byte(`{"to":"a@b"}`), Kind: "k", Delay: durationpb.New(time.Second),
		At: timestamppb.New(time.Unix(2e9, 0)), Priority: 3, MaxAttempts: 2, IdempotencyKey: "i",
		Headers: map[string]string{"h": "v"}}
	ops := []*v1.Op{{Op: &v1.Op_Set{Set: &v1.SetOp{Key: "k", Value: []byte{1}}}},
		{Op: &v1.Op_IfVersion{IfVersion: &v1.IfVersionOp{Key: "k", Version: 3}}},
		{Op: &v1.Op_Enqueue{Enqueue: &v1.EnqueueOp{Queue: "q", Task: task}}}}
	ref := &v1.LeaseRef{Id: 1, Token: 2, Secret: 3}
	// Seeds by their message: each goes to the row of requestTypes that
	// decodes its type, wherever that row is.
	prio := int64(-2)
	seeds := []proto.Message{
		&v1.EnqueueRequest{Namespace: acme, Queue: "emails", Task: task, Ops: ops},
		&v1.EnqueueBatchRequest{Namespace: acme, Queue: "q", Tasks: []*v1.Task{task, {}}, Ops: ops},
		&v1.ClaimWaitRequest{Namespace: acme, Queue: "q", Owner: "w", Lease: durationpb.New(time.Minute), Max: 10, MaxWait: durationpb.New(time.Second)},
		&v1.CompleteRequest{Lease: ref, Done: &v1.Done{Result: []byte(`1`), Ops: ops, FollowUps: []*v1.FollowUp{{Queue: "n", Task: task}}}},
		&v1.FailRequest{Lease: ref, Failure: &v1.Failure{Error: "e", RetryAfter: durationpb.New(time.Second)}},
		&v1.HeartbeatRequest{Lease: ref, Extend: durationpb.New(time.Second), Progress: []byte(`{"p":1}`)},
		&v1.ListRequest{State: v1.State_STATE_DEAD, Limit: 5, Cursor: "1:2"},
		&v1.KVCommitRequest{Namespace: acme, Ops: ops},
		&v1.CompleteAndClaimRequest{Lease: ref, Done: &v1.Done{Ops: ops}, Owner: "w", ClaimLease: durationpb.New(time.Minute), Max: 3},
		&v1.EnqueueEachRequest{Items: []*v1.EnqueueRequest{{Namespace: acme, Queue: "emails", Task: task, Ops: ops}, {}}},
		&v1.CompleteEachRequest{Items: []*v1.CompleteRequest{{Lease: ref, Done: &v1.Done{Result: []byte(`1`)}}, {}}},
		&v1.HeartbeatEachRequest{Items: []*v1.HeartbeatRequest{{Lease: ref, Extend: durationpb.New(time.Second)}}},
		&v1.RescheduleRequest{Namespace: acme, Queue: "q", Id: 3, At: timestamppb.New(time.Unix(2e9, 0)), Priority: &prio},
	}
	lax := wire.NewJSONCodec(wire.JSONName, false)
	for _, m := range seeds {
		kind := slices.IndexFunc(requestTypes, func(r requestType) bool {
			return r.msg().ProtoReflect().Descriptor() == m.ProtoReflect().Descriptor()
		})
		if kind < 0 {
			f.Fatalf("no request type decodes the seed %T", m)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(kind), false, b)
		j, err := lax.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(kind), true, j)
	}
	f.Add(uint8(0), true, []byte(`{"namespace":{"project":"acme","scope":"prod"},"queue":"emails","task":{"payload":{"to":"a@b"}}}`))
	f.Add(uint8(1), false, []byte{0x1a, 0x00, 0x1a, 0x00, 0x1a, 0x00})
	f.Add(uint8(0), false, []byte{0x1a, 0x0a, 0x52, 0x08, 0x0a, 0x02, 'k', 'k', 0x12, 0x02, 'v', 'v'})

	codecs := []connect.Codec{wire.ProtoCodec{}, wire.NewJSONCodec(wire.JSONName, true)}
	f.Fuzz(func(t *testing.T, kind uint8, asJSON bool, data []byte) {
		rt := requestTypes[int(kind)%len(requestTypes)]
		codec := codecs[0]
		if asJSON {
			codec = codecs[1]
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := rt.msg()
		if err := codec.Unmarshal(data, m); err == nil && rt.decode != nil {
			if err := rt.decode(m); err != nil && !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("decoder refused %x without ErrInvalid: %v", data, err)
			}
		}
		runtime.ReadMemStats(&after)
		// An empty task costs two bytes of protobuf and a few hundred of
		// memory (its message and the engine's Task): a generous constant
		// factor, which a count or length taken from the input would blow.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1024*uint64(len(data))+1<<20 {
			t.Fatalf("decoding %d bytes allocated %d", len(data), alloc)
		}
	})
}

// TestFuzzCoversEveryRequest keeps requestTypes in step with the schema.
func TestFuzzCoversEveryRequest(t *testing.T) {
	t.Parallel()
	have := map[string]bool{}
	for _, rt := range requestTypes {
		have[string(rt.msg().ProtoReflect().Descriptor().FullName())] = true
	}
	for _, fd := range []protoreflect.FileDescriptor{v1.File_docket_v1_queues_proto, v1.File_docket_v1_kv_proto, v1.File_docket_v1_admin_proto,
		v1.File_docket_v1_pipeline_proto} {
		for i := 0; i < fd.Services().Len(); i++ {
			ms := fd.Services().Get(i).Methods()
			for j := 0; j < ms.Len(); j++ {
				if in := string(ms.Get(j).Input().FullName()); !have[in] {
					t.Errorf("%s is not fuzzed", in)
				}
			}
		}
	}
}
