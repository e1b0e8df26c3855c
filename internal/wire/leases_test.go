package wire

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// viaProto is what the client did before LeaseCodec: the generated
// message, then Leases.
func viaProto(b []byte) ([]engine.Lease, error) {
	var res v1.ClaimResponse
	if err := proto.Unmarshal(b, &res); err != nil {
		return nil, err
	}
	return Leases(res.GetLeases()), nil
}

func randomLeases(r *rand.Rand, n int) []engine.Lease {
	nss := []engine.Namespace{engine.NS("acme", "prod"), engine.NS("acme", "dev"), engine.NS("", "")}
	ls := make([]engine.Lease, n)
	for i := range ls {
		l := &ls[i]
		l.ID, l.Token, l.Secret = r.Uint64(), r.Uint64N(1000), r.Uint64()
		l.Namespace = nss[r.IntN(len(nss))]
		l.Queue, l.Owner = []string{"emails", "résumés", ""}[r.IntN(3)], "worker-7"
		if r.IntN(2) == 0 {
			l.Kind = "welcome"
		}
		if r.IntN(4) > 0 {
			l.Payload = []byte(`{"n":` + string(rune('0'+r.IntN(10))) + `}`)
		}
		if r.IntN(3) == 0 {
			l.Progress = []byte(`[1,2]`)
		}
		if r.IntN(3) == 0 {
			l.Headers = map[string]string{"trace": "t1", "": "empty key"}
		}
		l.Priority = []int{0, -5, math.MaxInt32 + 1, math.MinInt64}[r.IntN(4)]
		l.Attempt, l.MaxAttempts = 1+r.IntN(3), r.IntN(10)
		if r.IntN(4) > 0 {
			l.Deadline = time.Unix(1_732_900_000+r.Int64N(1000), r.Int64N(1e9)).UTC()
		}
		if r.IntN(4) > 0 {
			l.EnqueuedAt = time.Unix(r.Int64N(2_000_000_000), 0).UTC()
		}
		if r.IntN(3) == 0 {
			l.Partition = "tenant-" + string(rune('a'+r.IntN(26)))
		}
	}
	return ls
}

// TestUnmarshalLeasesAsProto decodes what a server sends both ways:
// UnmarshalLeases gives what proto.Unmarshal and Leases give, and that is
// what was claimed.
func TestUnmarshalLeasesAsProto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 100} {
		ls := randomLeases(r, n)
		b, err := proto.Marshal(&v1.ClaimResponse{Leases: PBLeases(ls)})
		if err != nil {
			t.Fatal(err)
		}
		want, err := viaProto(b)
		if err != nil {
			t.Fatal(err)
		}
		var got LeaseList
		if err := UnmarshalLeases(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Leases, want) {
			t.Fatalf("%d leases:\n got %+v\nwant %+v", n, got.Leases, want)
		}
		if n > 0 && !reflect.DeepEqual(got.Leases, ls) {
			t.Fatalf("%d leases do not round trip:\n got %+v\nwant %+v", n, got.Leases, ls)
		}
		// Each payload is its holder's own: appending to one leaves the
		// next alone.
		for i := 0; i+1 < len(got.Leases); i++ {
			if p := got.Leases[i].Payload; p != nil && got.Leases[i+1].Payload != nil {
				next := string(got.Leases[i+1].Payload)
				_ = append(p, "xxxxxxxx"...)
				if string(got.Leases[i+1].Payload) != next {
					t.Fatal("an append to one payload changed the next")
				}
			}
		}
	}
}

// TestUnmarshalLeasesOddBytes covers what a server does not send but the
// protobuf rules allow or refuse: UnmarshalLeases agrees with proto.
func TestUnmarshalLeasesOddBytes(t *testing.T) {
	tag := protowire.AppendTag
	msg := func(fields ...[]byte) []byte {
		var b []byte
		for _, f := range fields {
			b = append(b, f...)
		}
		return b
	}
	bytesField := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(tag(nil, num, protowire.BytesType), v)
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(nil, num, protowire.VarintType), v)
	}
	lease := func(fields ...[]byte) []byte { return bytesField(1, msg(fields...)) }
	ts := func(sec, nanos uint64) []byte { return msg(varint(1, sec), varint(2, nanos)) }
	for _, tc := range []struct {
		name string
		b    []byte
		err  bool
	}{
		{"empty", nil, false},
		{"empty lease", lease(), false},
		{"scalars given twice", lease(varint(1, 5), varint(1, 7), varint(9, 1), varint(9, 3)), false},
		{"int32 beyond range", lease(varint(9, 1<<40+3), varint(10, math.MaxUint64)), false},
		{"namespace merged", lease(bytesField(2, bytesField(1, []byte("a"))), bytesField(2, bytesField(2, []byte("b")))), false},
		{"empty namespace", lease(bytesField(2, nil)), false},
		{"header twice", lease(bytesField(6, msg(bytesField(1, []byte("k")), bytesField(2, []byte("1")))),
			bytesField(6, msg(bytesField(1, []byte("k")), bytesField(2, []byte("2"))))), false},
		{"header without value", lease(bytesField(6, bytesField(1, []byte("k")))), false},
		{"empty payload", lease(bytesField(5, nil)), false},
		{"empty timestamp", lease(bytesField(14, nil)), false},
		{"timestamp merged", lease(bytesField(14, varint(1, 100)), bytesField(14, varint(2, 5))), false},
		{"timestamp out of range", lease(bytesField(14, ts(math.MaxInt64, 0)), bytesField(15, ts(0, 2e9))), false},
		{"negative time", lease(bytesField(15, ts(uint64(1<<64-100), 0))), false},
		{"unknown fields", msg(varint(7, 1), lease(varint(99, 1), bytesField(98, []byte("x")),
			protowire.AppendFixed32(tag(nil, 97, protowire.Fixed32Type), 1)), bytesField(2, []byte("y"))), false},
		{"wrong wire types", lease(bytesField(1, []byte("id")), varint(3, 1), varint(14, 1), varint(2, 4)), false},
		{"secret", lease(protowire.AppendFixed64(tag(nil, 13, protowire.Fixed64Type), math.MaxUint64)), false},
		{"lease as varint", varint(1, 1), false},
		{"queue not UTF-8", lease(bytesField(3, []byte{0xff, 0xfe})), true},
		{"owner not UTF-8", lease(bytesField(11, []byte{0xc3})), true},
		{"project not UTF-8", lease(bytesField(2, bytesField(1, []byte{0xff}))), true},
		{"header value not UTF-8", lease(bytesField(6, bytesField(2, []byte{0xff}))), true},
		{"truncated lease", lease(varint(1, 5))[:3], true},
		{"truncated varint", lease([]byte{8, 0x80}), true},
		{"bad tag", []byte{0}, true},
		{"truncated timestamp", lease(bytesField(14, []byte{8})), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, werr := viaProto(tc.b)
			var got LeaseList
			gerr := UnmarshalLeases(tc.b, &got)
			if (werr != nil) != tc.err || (gerr != nil) != tc.err {
				t.Fatalf("proto: %v, UnmarshalLeases: %v; want an error: %v", werr, gerr, tc.err)
			}
			if tc.err {
				return
			}
			if len(want) == 0 && len(got.Leases) == 0 {
				return
			}
			if !reflect.DeepEqual(got.Leases, want) {
				t.Fatalf("\n got %+v\nwant %+v", got.Leases, want)
			}
		})
	}
}

// FuzzUnmarshalLeases: on any bytes UnmarshalLeases fails exactly when
// proto.Unmarshal does and otherwise gives the same leases.
func FuzzUnmarshalLeases(f *testing.F) {
	b, _ := proto.Marshal(&v1.ClaimResponse{Leases: PBLeases(randomLeases(rand.New(rand.NewPCG(3, 4)), 3))})
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{10, 2, 8, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := viaProto(b)
		var got LeaseList
		gerr := UnmarshalLeases(b, &got)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("proto: %v, UnmarshalLeases: %v", werr, gerr)
		}
		if werr == nil && (len(want) > 0 || len(got.Leases) > 0) && !reflect.DeepEqual(got.Leases, want) {
			t.Fatalf("\n got %#v\nwant %#v", got.Leases, want)
		}
	})
}

// TestPBSlabsAsOne checks that the conversions that allocate once per
// batch give the messages the one-by-one conversions give.
func TestPBSlabsAsOne(t *testing.T) {
	ls := randomLeases(rand.New(rand.NewPCG(5, 6)), 20)
	pbs, refs := PBLeases(ls), PBLeaseRefs(ls)
	for i := range ls {
		if !proto.Equal(pbs[i], PBLease(ls[i])) || !proto.Equal(refs[i], PBLeaseRef(ls[i])) {
			t.Fatalf("lease %d: %v / %v, want %v / %v", i, pbs[i], refs[i], PBLease(ls[i]), PBLeaseRef(ls[i]))
		}
	}
	tasks := []engine.Task{{Payload: []byte(`{}`)}, {Kind: "k", Delay: time.Second, At: time.Unix(5, 0), Priority: 3,
		MaxAttempts: 2, BackoffBase: time.Millisecond, BackoffMax: time.Minute, IdempotencyKey: "i", Headers: map[string]string{"a": "b"}},
		{Kind: "u", Unique: &engine.Unique{Window: time.Hour, States: []engine.State{engine.Ready, engine.Scheduled, engine.InFlight}}},
		{DependsOn: []uint64{3, 4}, DependsOnSibling: []int{0, 1}, OnParentFailure: engine.RunOnFailure}}
	for i, m := range PBTasks(tasks) {
		if !proto.Equal(m, PBTask(tasks[i])) {
			t.Fatalf("task %d: %v, want %v", i, m, PBTask(tasks[i]))
		}
	}
	errs := []error{nil, engine.ErrLeaseLost, nil}
	for i, m := range PBErrors(errs) {
		if !proto.Equal(m, PBError(errs[i])) {
			t.Fatalf("error %d: %v, want %v", i, m, PBError(errs[i]))
		}
	}
	es := PBEnqueued(engine.Enqueued{ID: 1}, engine.Enqueued{ID: 2, Deduplicated: true})
	if len(es) != 2 || es[0].Id != 1 || es[1].Id != 2 || !es[1].Deduplicated || es[0].Deduplicated {
		t.Fatalf("enqueued %v", es)
	}
}

func BenchmarkDecodeLeases(b *testing.B) {
	ls := randomLeases(rand.New(rand.NewPCG(7, 8)), 100)
	data, _ := proto.Marshal(&v1.ClaimResponse{Leases: PBLeases(ls)})
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := viaProto(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UnmarshalLeases", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var l LeaseList
			if err := UnmarshalLeases(data, &l); err != nil {
				b.Fatal(err)
			}
		}
	})
}
