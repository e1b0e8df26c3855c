package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

func TestJSONPayloadIsAJSONValue(t *testing.T) {
	c := NewJSONCodec(JSONName, false)
	body := `{"namespace":{"project":"acme","scope":"prod"},"queue":"emails","task":{"payload":{"to":"a@b", "n": 12345678901234567890123, "f":1e400}}}`
	var req v1.EnqueueRequest
	if err := c.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	want := `{"to":"a@b", "n": 12345678901234567890123, "f":1e400}`
	if got := string(req.GetTask().GetPayload()); got != want {
		t.Fatalf("payload %q; want the JSON text as sent %q", got, want)
	}
	if req.GetNamespace().GetProject() != "acme" || req.GetQueue() != "emails" {
		t.Fatalf("other fields: %v", &req)
	}

	// Out: the bytes come back as the JSON value, digits and all.
	lease := &v1.ClaimResponse{Leases: []*v1.Lease{{Id: 1, Payload: []byte(want), Progress: []byte(`[1,2]`), Secret: math.MaxUint64}}}
	out, err := c.Marshal(lease)
	if err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Leases []struct {
			Payload  json.RawMessage
			Progress json.RawMessage
			Secret   string
		}
	}
	if err := json.Unmarshal(out, &generic); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if l := generic.Leases[0]; string(l.Payload) != want || string(l.Progress) != "[1,2]" || l.Secret != "18446744073709551615" {
		t.Fatalf("marshalled %s", out)
	}
	var back v1.ClaimResponse
	if err := c.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&back, lease) {
		t.Fatalf("round trip: %v != %v", &back, lease)
	}
}

func TestJSONRawFieldsEverywhere(t *testing.T) {
	c := NewJSONCodec(JSONCharsetName, false)
	// Raw fields in lists, in oneofs, in optional fields, under the proto
	// names as well as the JSON names; an empty one is left out.
	msgs := []proto.Message{
		&v1.EnqueueBatchRequest{Tasks: []*v1.Task{{Payload: []byte(`1`)}, {}, {Payload: []byte(`"s"`)}},
			Ops: []*v1.Op{{Op: &v1.Op_Enqueue{Enqueue: &v1.EnqueueOp{Queue: "q", Task: &v1.Task{Payload: []byte(`{"a":[true,null]}`)}}}},
				{Op: &v1.Op_Set{Set: &v1.SetOp{Key: "k", Value: []byte{0, 1, 2}}}}}},
		&v1.CompleteRequest{Done: &v1.Done{Result: []byte(`{"ok":true}`), FollowUps: []*v1.FollowUp{{Queue: "next", Task: &v1.Task{Payload: []byte(`null`)}}}}},
		&v1.HeartbeatRequest{Progress: []byte(`{"pct":50}`), Extend: durationpb.New(time.Second)},
		&v1.HeartbeatRequest{},
		&v1.GetResponse{Task: &v1.TaskInfo{Payload: []byte(`[]`), Result: []byte(`0`), Headers: map[string]string{"a": "b"},
			NotBefore: timestamppb.New(time.Unix(5, 0))}},
	}
	for _, m := range msgs {
		out, err := c.Marshal(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if bytes.Contains(out, []byte(`"e30="`)) || bytes.Contains(out, []byte(`"payload":""`)) {
			t.Fatalf("%T: a raw field went out as base64 or empty: %s", m, out)
		}
		back := m.ProtoReflect().New().Interface()
		if err := c.Unmarshal(out, back); err != nil {
			t.Fatalf("%T: %s: %v", m, out, err)
		}
		if !proto.Equal(back, m) {
			t.Fatalf("%T: round trip through %s: %v", m, out, back)
		}
	}
	var req v1.EnqueueRequest
	if err := c.Unmarshal([]byte(`{"task":{"payload":{"x":1},"idempotency_key":"k"}}`), &req); err != nil {
		t.Fatal(err)
	}
	if string(req.Task.Payload) != `{"x":1}` || req.Task.IdempotencyKey != "k" {
		t.Fatalf("proto field names: %v", &req)
	}
	var hb v1.HeartbeatRequest
	if err := c.Unmarshal([]byte(`{"progress":null}`), &hb); err != nil || string(hb.Progress) != "null" {
		t.Fatalf("null progress: %q %v; want the JSON value null", hb.Progress, err)
	}
}

func TestJSONMalformedRefused(t *testing.T) {
	c := NewJSONCodec(JSONName, false)
	for _, body := range []string{
		``, `{`, `[]`, `null x`, `{} {}`, `{"task":{"payload":}}`, `{"task":{"payload":{"a":1}`,
		`{"task":{"payload":{"a":1}}}}`, `{"task":7}`, `{"task":{"payload":[1,]}}`, `{"queue":1}`,
		`{"task":{"payload":1,"payload":2}}`, `{"ops":[{"enqueue":{"task":"x"}}]}`, `{"ops":{}}`,
		`{"task":{"delay":"forever"}}`, `{"namespace":{"project":"\ud800"}}`,
		`{"later":` + strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000) + `}`, // deeper than encoding/json goes
	} {
		var req v1.EnqueueRequest
		if err := c.Unmarshal([]byte(body), &req); err == nil {
			t.Errorf("%.60q was accepted: %v", body, &req)
		}
	}
	// Unknown fields are ignored, as connect's own codec does, so that a
	// newer client can talk to an older server.
	var req v1.EnqueueRequest
	if err := c.Unmarshal([]byte(`{"queue":"q","later":{"payload":[1]}}`), &req); err != nil || req.Queue != "q" {
		t.Fatalf("unknown field: %v %v", &req, err)
	}
	// A reply holding bytes that are not JSON in a raw field is a bug of
	// the server: refused rather than sent as broken JSON.
	if _, err := c.Marshal(&v1.GetResponse{Task: &v1.TaskInfo{Payload: []byte("{")}}); err == nil {
		t.Fatal("a payload that is not JSON was marshalled")
	}
}

func TestConversionsRoundTrip(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	task := engine.Task{Payload: []byte(`{"a":1}`), Kind: "k", Delay: time.Second, At: at, Priority: -7,
		MaxAttempts: 3, BackoffBase: time.Millisecond, BackoffMax: time.Hour, IdempotencyKey: "id",
		Headers: map[string]string{"h": "v"}, DependsOn: []uint64{3, 1 << 60}, DependsOnSibling: []int{0, 2},
		OnParentFailure: engine.RunOnFailure}
	got, err := Task(PBTask(task))
	if err != nil || fmt.Sprint(got) != fmt.Sprint(task) {
		t.Fatalf("task: %+v %v", got, err)
	}
	ops := []engine.Op{engine.Set("k", []byte{0xff}), engine.Delete("d"), engine.IfVersion("v", 9),
		engine.IfExists("e"), engine.IfAbsent("a"), engine.Enqueue("q", task)}
	back, err := Ops(PBOps(ops))
	if err != nil || fmt.Sprint(back) != fmt.Sprint(ops) {
		t.Fatalf("ops: %v %v", back, err)
	}
	l := engine.Lease{ID: 1, Namespace: engine.NS("p", "s"), Queue: "q", Kind: "k", Payload: []byte(`1`),
		Headers: map[string]string{"a": "b"}, Progress: []byte(`2`), Priority: 3, Attempt: 1, MaxAttempts: 5,
		Owner: "o", Token: 7, Secret: math.MaxUint64, Deadline: at, EnqueuedAt: at.Add(-time.Hour)}
	if got := Lease(PBLease(l)); fmt.Sprint(got) != fmt.Sprint(l) {
		t.Fatalf("lease: %+v", got)
	}
	if ref := LeaseRef(PBLeaseRef(l)); ref.ID != l.ID || ref.Token != l.Token || ref.Secret != l.Secret {
		t.Fatalf("lease ref: %+v", ref)
	}
	info := engine.TaskInfo{ID: 4, Namespace: engine.NS("p", "s"), Queue: "q", State: engine.Dead, Payload: []byte(`{}`),
		Attempts: 2, MaxAttempts: 2, LastError: "boom", CreatedAt: at, UpdatedAt: at,
		Errors:    []engine.AttemptError{{Attempt: 1, At: at, Error: "e1"}},
		WaitingOn: []uint64{1, 2}, Dependents: []uint64{9}, OnParentFailure: engine.WaitOnFailure,
		Unreadable: "the payload of task 4 cannot be read"}
	if got := TaskInfo(PBTaskInfo(info)); fmt.Sprint(got) != fmt.Sprint(info) {
		t.Fatalf("task info: %+v", got)
	}
	d := engine.Done{Result: []byte(`"r"`), Ops: ops[:1], FollowUps: []engine.FollowUp{{Queue: "n", Task: task}}}
	if got, err := Done(PBDone(d)); err != nil || fmt.Sprint(got) != fmt.Sprint(d) {
		t.Fatalf("done: %+v %v", got, err)
	}
	st := engine.Stats{Seq: 1, Tasks: 2, Commits: 3, Enqueued: 4, Claimed: 5, Completed: 6, Retried: 7,
		DeadLettered: 8, Reclaimed: 9, LeaseLost: 10, Denied: 11, LogSyncs: 12, LogBytes: 13, Snapshots: 14,
		UnreadableValues: 15}
	if got := Stats(PBStats(st)); got != st {
		t.Fatalf("stats: %+v", got)
	}
	qi := engine.QueueInfo{Namespace: engine.NS("p", "s"), Name: "q", Counts: engine.Counts{Ready: 1, Scheduled: 2, InFlight: 3, Dead: 4, Completed: 5, Waiting: 6},
		OldestReady: at, Totals: engine.Totals{Enqueued: 1, Claimed: 2, Completed: 3, Retried: 4, DeadLettered: 5}}
	if got := QueueInfo(PBQueueInfo(qi)); got != qi {
		t.Fatalf("queue info: %+v", got)
	}
}

func TestConversionsRefuseMalformed(t *testing.T) {
	for name, pb := range map[string]*v1.Task{
		"nanos out of range": {Delay: &durationpb.Duration{Nanos: 2e9}},
		"signs disagree":     {BackoffBase: &durationpb.Duration{Seconds: 1, Nanos: -1}},
		"too long":           {BackoffMax: &durationpb.Duration{Seconds: math.MaxInt64}},
		"bad timestamp":      {At: &timestamppb.Timestamp{Seconds: math.MinInt64}},
		"negative policy":    {OnParentFailure: -1},
		"policy too large":   {OnParentFailure: 256},
	} {
		if _, err := Task(pb); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
	if _, err := Ops([]*v1.Op{{Op: &v1.Op_Delete{Delete: &v1.DeleteOp{Key: "k"}}}, {}}); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "op 1") {
		t.Fatalf("empty op: %v", err)
	}
	if _, err := Tasks([]*v1.Task{{}, {Delay: &durationpb.Duration{Nanos: -2e9}}}); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "task 1") {
		t.Fatalf("bad task in a batch: %v", err)
	}
	if _, err := Failure(&v1.Failure{RetryAfter: &durationpb.Duration{Seconds: -1, Nanos: 1}}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("bad retry after: %v", err)
	}
	if _, err := Done(&v1.Done{FollowUps: []*v1.FollowUp{{Task: &v1.Task{Delay: &durationpb.Duration{Nanos: 1e9}}}}}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("bad follow-up: %v", err)
	}
}

func TestSentinelsCrossAsConnectErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code connect.Code
	}{
		{engine.ErrInvalid, connect.CodeInvalidArgument},
		{engine.ErrNotFound, connect.CodeNotFound},
		{engine.ErrLeaseLost, connect.CodeFailedPrecondition},
		{engine.ErrConflict, connect.CodeAborted},
		{engine.ErrPermission, connect.CodePermissionDenied},
		{engine.ErrClosed, connect.CodeUnavailable},
		{engine.ErrFailed, connect.CodeUnavailable},
		{engine.ErrCorrupt, connect.CodeDataLoss},
		{engine.ErrLocked, connect.CodeUnavailable},
		{engine.ErrReadOnly, connect.CodeFailedPrecondition},
		{engine.ErrFull, connect.CodeResourceExhausted},
		{engine.ErrNotCaughtUp, connect.CodeUnavailable},
	} {
		err := fmt.Errorf("%w: task 3 in detail", tc.err)
		ce := ToConnect(err)
		if ce.Code() != tc.code || ce.Message() != err.Error() {
			t.Errorf("%v: code %v message %q", tc.err, ce.Code(), ce.Message())
		}
		// What a client gets after the error went over the wire.
		wired := connect.NewWireError(ce.Code(), errors.New(ce.Message()))
		for _, d := range ce.Details() {
			wired.AddDetail(d)
		}
		back := FromConnect(wired)
		var got *connect.Error
		if !errors.Is(back, tc.err) || back.Error() != err.Error() || !errors.As(back, &got) || got.Code() != tc.code {
			t.Errorf("%v: rebuilt as %v (%T)", tc.err, back, back)
		}
		if Error(PBError(err)).Error() != err.Error() || !errors.Is(Error(PBError(err)), tc.err) {
			t.Errorf("%v: outcome in a reply rebuilt as %v", tc.err, Error(PBError(err)))
		}
	}
	if Error(PBError(nil)) != nil {
		t.Fatal("a nil outcome came back as an error")
	}
	plain := connect.NewError(connect.CodeUnauthenticated, errors.New("who?"))
	if FromConnect(plain) != error(plain) {
		t.Fatal("an error without a detail was changed")
	}
	if ToConnect(errors.New("x")).Code() != connect.CodeInternal {
		t.Fatal("an error without a sentinel is not Internal")
	}
}

func TestRequestsOverTheElementLimitsRefused(t *testing.T) {
	many := &v1.EnqueueBatchRequest{Tasks: make([]*v1.Task, engine.MaxBatch+1)}
	for i := range many.Tasks {
		many.Tasks[i] = &v1.Task{}
	}
	headers := map[string]string{}
	for i := 0; i <= engine.MaxHeaders; i++ {
		headers[fmt.Sprint(i)] = ""
	}
	wide := &v1.EnqueueRequest{Ops: []*v1.Op{{Op: &v1.Op_Enqueue{Enqueue: &v1.EnqueueOp{Task: &v1.Task{Headers: headers}}}}}}
	limitOK := &v1.EnqueueBatchRequest{Tasks: many.Tasks[:engine.MaxBatch]}
	jsonCodec, lax := NewJSONCodec(JSONName, true), NewJSONCodec(JSONName, false)
	for _, m := range []proto.Message{many, wide} {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := (ProtoCodec{}).Unmarshal(b, m.ProtoReflect().New().Interface()); err == nil || !strings.Contains(err.Error(), "over the engine's limit") {
			t.Errorf("%T in protobuf: %v", m, err)
		}
		j, err := lax.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := jsonCodec.Unmarshal(j, m.ProtoReflect().New().Interface()); err == nil || !strings.Contains(err.Error(), "over the engine's limit") {
			t.Errorf("%T in JSON: %v", m, err)
		}
		if err := lax.Unmarshal(j, m.ProtoReflect().New().Interface()); err != nil {
			t.Errorf("%T: a client's codec has no limits: %v", m, err)
		}
	}
	b, _ := proto.Marshal(limitOK)
	var back v1.EnqueueBatchRequest
	if err := (ProtoCodec{}).Unmarshal(b, &back); err != nil || len(back.Tasks) != engine.MaxBatch {
		t.Fatalf("a batch at the limit: %d tasks, %v", len(back.Tasks), err)
	}
	j, _ := lax.Marshal(limitOK)
	if err := jsonCodec.Unmarshal(j, &back); err != nil || len(back.Tasks) != engine.MaxBatch {
		t.Fatalf("a JSON batch at the limit: %d tasks, %v", len(back.Tasks), err)
	}
	for _, bad := range [][]byte{{0x1a}, {0x1a, 0x05, 0x0a}, {0xff}, {0x1a, 0x02, 0x0a, 0x09}} {
		if err := (ProtoCodec{}).Unmarshal(bad, &back); err == nil {
			t.Errorf("malformed protobuf %x accepted", bad)
		}
	}
}

func TestParseLimits(t *testing.T) {
	for v, want := range map[string][3]int{
		"calls=256, parked=1024":        {256, 1024, 1},
		"calls=2,parked=3":              {2, 3, 1},
		" parked=3 , calls=2, later=9 ": {2, 3, 1},
		"":                              {0, 0, 0},
		"calls=2":                       {0, 0, 0},
		"calls=0, parked=3":             {0, 0, 0},
		"calls=-1, parked=3":            {0, 0, 0},
		"calls=x, parked=3":             {0, 0, 0},
		"calls 2, parked=3":             {0, 0, 0},
	} {
		c, p, ok := ParseLimits(v)
		if c != want[0] || p != want[1] || ok != (want[2] == 1) {
			t.Errorf("ParseLimits(%q) = %d, %d, %v; want %v", v, c, p, ok, want)
		}
	}
}

// TestRequestsWithLongStringsRefused: a string field over MaxStringBytes,
// a map's key or value too, is refused by both of a server's codecs before
// the request is built; one at the limit is taken.
func TestRequestsWithLongStringsRefused(t *testing.T) {
	long, over := strings.Repeat("k", MaxStringBytes), strings.Repeat("é", MaxStringBytes/2+1)
	for _, tc := range []struct {
		m     proto.Message
		field string // "" for a request the codecs take
	}{
		{&v1.KVGetRequest{Key: over}, "docket.v1.KVGetRequest.key"},
		{&v1.EnqueueRequest{Task: &v1.Task{Kind: over}}, "docket.v1.Task.kind"},
		{&v1.EnqueueRequest{Task: &v1.Task{Headers: map[string]string{"h": over}}}, "docket.v1.Task.HeadersEntry.value"},
		{&v1.EnqueueRequest{Task: &v1.Task{Headers: map[string]string{over: "v"}}}, "docket.v1.Task.HeadersEntry.key"},
		{&v1.FailRequest{Failure: &v1.Failure{Error: over}}, "docket.v1.Failure.error"},
		{&v1.KVGetRequest{Key: long}, ""},
		{&v1.EnqueueRequest{Task: &v1.Task{Headers: map[string]string{long: long}}}, ""},
	} {
		wantCodecs(t, tc.m, 0, tc.field, " is 65538 bytes, over the limit of 65536 for a string")
	}
}

// wantCodecs has a server's two codecs, with the payload limit maxValue,
// read m in protobuf and in JSON: both refuse it with an error naming
// field followed by want, or take it when field is "". A client's codec
// takes it either way.
func wantCodecs(t *testing.T, m proto.Message, maxValue int, field, want string) {
	t.Helper()
	jsonCodec, lax := NewJSONCodec(JSONName, true), NewJSONCodec(JSONName, false)
	jsonCodec.MaxValueBytes = maxValue
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	j, err := lax.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for codec, err := range map[string]error{
		"protobuf": (ProtoCodec{MaxValueBytes: maxValue}).Unmarshal(b, m.ProtoReflect().New().Interface()),
		"JSON":     jsonCodec.Unmarshal(j, m.ProtoReflect().New().Interface()),
	} {
		switch {
		case field == "" && err != nil:
			t.Errorf("%T within the limits in %s: %v", m, codec, err)
		case field != "" && (err == nil || !strings.Contains(err.Error(), field+want)):
			t.Errorf("%s over the limit in %s: %v", field, codec, err)
		}
	}
	if err := lax.Unmarshal(j, m.ProtoReflect().New().Interface()); err != nil {
		t.Errorf("%T: a client's codec has no limits: %v", m, err)
	}
}

// TestFailureTextCutAsTheEngineRecordsIt: a client sends at most what the
// engine keeps of a failure's text, valid UTF-8, well within the string
// limit a server holds requests to.
func TestFailureTextCutAsTheEngineRecordsIt(t *testing.T) {
	text := strings.Repeat("€", engine.MaxErrorBytes) // 3 bytes: a rune across the cut
	got := PBFailure(engine.Failure{Err: text}).GetError()
	if got != engine.ErrorText(text) || len(got) != engine.MaxErrorBytes-2 || !strings.HasPrefix(text, got) {
		t.Fatalf("cut to %d bytes, %q...", len(got), got[:min(len(got), 8)])
	}
	if _, err := proto.Marshal(PBFailure(engine.Failure{Err: "bad \xff byte"})); err != nil {
		t.Fatalf("a failure whose text is not UTF-8: %v", err)
	}
	if got := PBFailure(engine.Failure{Err: "short"}).GetError(); got != "short" {
		t.Fatalf("a short text: %q", got)
	}
}

// TestNotCaughtUpCrossesWithItsCause: a Join that made the node a member
// but did not see it catch up is answered with its cause's code and
// headers (a client follows a leader that changed, or stops at the
// deadline) and rebuilt as ErrNotCaughtUp.
func TestNotCaughtUpCrossesWithItsCause(t *testing.T) {
	for _, tc := range []struct {
		cause  error
		code   connect.Code
		header string // UnavailableHeader
	}{
		{fmt.Errorf("%w: the leader is n2", engine.ErrNotLeader), connect.CodeUnavailable, "not the leader"},
		{context.DeadlineExceeded, connect.CodeDeadlineExceeded, ""},
		{context.Canceled, connect.CodeCanceled, ""},
		{fmt.Errorf("%w: the node stopped", engine.ErrClosed), connect.CodeUnavailable, "closed"},
		{errors.New("no code of its own"), connect.CodeUnavailable, ""},
	} {
		err := fmt.Errorf("%w: n3 has not acknowledged entry 9: %w", engine.ErrNotCaughtUp, tc.cause)
		ce := ToConnect(err)
		if ce.Code() != tc.code || ce.Meta().Get(UnavailableHeader) != tc.header || ce.Message() != err.Error() {
			t.Errorf("%v: code %v, header %q, message %q", tc.cause, ce.Code(), ce.Meta().Get(UnavailableHeader), ce.Message())
		}
		wired := connect.NewWireError(ce.Code(), errors.New(ce.Message()))
		for _, d := range ce.Details() {
			wired.AddDetail(d)
		}
		if back := FromConnect(wired); !errors.Is(back, engine.ErrNotCaughtUp) || back.Error() != err.Error() {
			t.Errorf("%v: rebuilt as %v", tc.cause, back)
		}
	}
	if SentinelOf(fmt.Errorf("%w: %w", engine.ErrNotCaughtUp, engine.ErrClosed)) != v1.Sentinel_SENTINEL_NOT_CAUGHT_UP {
		t.Error("ErrNotCaughtUp with ErrClosed is named as ErrClosed")
	}
}

// TestRequestsWithLongValuesRefused: with a payload limit, both of a
// server's codecs refuse a payload (JSON text), result, progress record or
// KV value (bytes; base64 in JSON) over it before the request is built,
// and take one at it; without a limit they take either.
func TestRequestsWithLongValuesRefused(t *testing.T) {
	const limit = 1 << 10
	value := func(n int) []byte { return []byte(`"` + strings.Repeat("v", n-2) + `"`) } // a JSON string of n bytes
	kv := func(n int) proto.Message {
		return &v1.KVCommitRequest{Ops: []*v1.Op{{Op: &v1.Op_Set{Set: &v1.SetOp{Key: "k", Value: bytes.Repeat([]byte{0xff}, n)}}}}}
	}
	for _, tc := range []struct {
		m     proto.Message
		field string // "" for a request within the limit
	}{
		{&v1.EnqueueRequest{Task: &v1.Task{Payload: value(limit + 1)}}, "docket.v1.Task.payload"},
		{&v1.CompleteRequest{Done: &v1.Done{Result: value(limit + 1)}}, "docket.v1.Done.result"},
		{kv(limit + 1), "docket.v1.SetOp.value"},
		{&v1.EnqueueRequest{Task: &v1.Task{Payload: value(limit)}}, ""},
		{kv(limit), ""},
	} {
		wantCodecs(t, tc.m, limit, tc.field, " is 1025 bytes, over the limit of 1024 (the payload limit)")
		wantCodecs(t, tc.m, 0, "", "") // no payload limit: taken
	}
}

// TestLongestString: the longest JSON string's text, escapes as written,
// against a byte-by-byte reference, on fixed cases and on random text of
// quotes, backslashes and letters.
func TestLongestString(t *testing.T) {
	ref := func(b []byte) int {
		longest, n, in, esc := 0, 0, false, false
		for _, c := range b {
			switch {
			case !in:
				if c == '"' {
					in, n = true, 0
				}
			case esc:
				esc, n = false, n+1
			case c == '\\':
				esc, n = true, n+1
			case c == '"':
				in, longest = false, max(longest, n)
			default:
				n++
			}
		}
		if in {
			longest = max(longest, n)
		}
		return longest
	}
	for in, want := range map[string]int{
		`{}`: 0, `{"a":"bcd"}`: 3, `{"a":"b\"cd"}`: 5, `"\\\\"`: 4, `"abc`: 3, `"ab\`: 3, `"ab\"`: 4, `["", "xy", "z"]`: 2,
	} {
		if got := longestString([]byte(in)); got != want || got != ref([]byte(in)) {
			t.Errorf("longestString(%s) = %d, want %d (reference %d)", in, got, want, ref([]byte(in)))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = `"\a`[rng.IntN(3)]
		}
		if got, want := longestString(b), ref(b); got != want {
			t.Fatalf("longestString(%q) = %d, reference %d", b, got, want)
		}
	}
}

// TestJSONStringOverAnyFieldRefusedUnread: with a payload limit, a JSON
// request holding a string longer than any field may hold (jsonStringBound)
// is refused before the rewrite reads it: the refusal allocates next to
// nothing for a body of 4 MiB; one just within the bound goes on to the
// field's own check.
func TestJSONStringOverAnyFieldRefusedUnread(t *testing.T) {
	const limit = 1 << 10
	c := NewJSONCodec(JSONName, true)
	c.MaxValueBytes = limit
	body := func(n int) []byte {
		return []byte(`{"queue":"q","task":{"kind":"` + strings.Repeat("k", n) + `"}}`)
	}
	big := body(4 << 20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := c.Unmarshal(big, &v1.EnqueueRequest{})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("a JSON string of %d bytes, over the longest a request may hold (%d)", 4<<20, jsonStringBound(limit))) {
		t.Fatalf("a 4 MiB string: %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Fatalf("refusing a 4 MiB string allocated %d bytes", got)
	}
	err = c.Unmarshal(body(jsonStringBound(limit)), &v1.EnqueueRequest{})
	if err == nil || !strings.Contains(err.Error(), "docket.v1.Task.kind is") {
		t.Fatalf("a string at the bound reaches the field's check: %v", err)
	}
}

// TestValueLen: the length of a JSON value measured in place is the length
// of the text the decoder reads as that value, for values of every kind,
// nested, with escapes and brackets inside strings, after a key's colon.
func TestValueLen(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var gen func(depth int) string
	gen = func(depth int) string {
		switch k := rng.IntN(7); {
		case k == 0 || depth > 3:
			return []string{`"a\"b]}"`, `"x\\"`, `""`, `"{[,"`}[rng.IntN(4)]
		case k == 1:
			return []string{`-12.5e3`, `0`, `true`, `null`}[rng.IntN(4)]
		case k == 2:
			var parts []string
			for range rng.IntN(4) {
				parts = append(parts, gen(depth+1))
			}
			return "[" + strings.Join(parts, ", ") + "]"
		default:
			var parts []string
			for i := range rng.IntN(4) {
				parts = append(parts, fmt.Sprintf(`"k%d" : %s`, i, gen(depth+1)))
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
	}
	for range 5_000 {
		v := gen(0)
		doc := []byte(`{"key" :  ` + v + ` , "after": 1}`)
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.Token() // {
		dec.Token() // "key"
		off := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if got := valueLen(doc[off:]); got != len(raw) || string(raw) != v {
			t.Fatalf("valueLen of %s = %d, the decoder read %d bytes (%s)", v, got, len(raw), raw)
		}
	}
	// Cut short: measured to the end, for the decoder to refuse.
	if got := valueLen([]byte(`: [1, "a`)); got != 6 {
		t.Fatalf("a value cut short: %d", got)
	}
}

// TestJSONRequestBufferReused: the buffer a server's codec rewrote a
// request into goes back to requestBufs for the next request, and the
// request decoded from it holds none of its bytes: scribbling over the
// buffer leaves the request as it was.
func TestJSONRequestBufferReused(t *testing.T) {
	c := NewJSONCodec(JSONName, true)
	payload := `{"pad":"` + strings.Repeat("v", 256<<10) + `"}`
	body := []byte(`{"queue":"one","task":{"kind":"k1","payload":` + payload + `}}`)
	var m v1.EnqueueRequest
	var buf *bytes.Buffer
	// The pool may drop what it is given (at a collection; at random
	// under the race detector): a few tries find the buffer again.
	for try := 0; try < 20 && buf == nil; try++ {
		m = v1.EnqueueRequest{}
		if err := c.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		if b := requestBufs.Get().(*bytes.Buffer); b.Cap() >= len(body) {
			buf = b
		}
	}
	if buf == nil {
		t.Fatal("no rewritten request's buffer came back to the pool in 20 requests")
	}
	if buf.Len() != 0 {
		t.Fatalf("a buffer of %d bytes came back unreset", buf.Len())
	}
	scribble := buf.Bytes()[:buf.Cap()]
	for i := range scribble {
		scribble[i] = 'x'
	}
	if m.Queue != "one" || m.Task.GetKind() != "k1" || string(m.Task.GetPayload()) != payload {
		t.Fatalf("the request changed with the buffer it was rewritten into: queue %q kind %q", m.Queue, m.Task.GetKind())
	}
}
