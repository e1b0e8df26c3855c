package index

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// checkAlloc fails when decoding took far more memory than the input holds
// (msgpack's own limit lets a string field take up to 1 MiB before the
// input runs out).
func checkAlloc(t *testing.T, data []byte, decode func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	decode()
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 2<<20+64*uint64(len(data)) {
		t.Fatalf("decoding %d bytes allocated %d bytes", len(data), n)
	}
}

// mayAllocate reports whether data holds a 16- or 32-bit bin or str header,
// the only way to ask the decoder for a large allocation; checkAlloc is
// too slow to run on every input.
func mayAllocate(data []byte) bool {
	for _, c := range data {
		if c == 0xc5 || c == 0xc6 || c == 0xda || c == 0xdb {
			return true
		}
	}
	return false
}

// Decoding never trusts its input: whatever bytes the log or a snapshot
// hands over (their checksums make damage unlikely, not impossible), the
// decoders must not panic or allocate without bound, whatever they accept
// must encode back to the same meaning, and the state machine must either
// refuse it or stay consistent.

func renderBytes(b []byte) string { return fmt.Sprintf("%q", b) }

func renderTask(t *Task) string {
	if t == nil {
		return "<nil task>"
	}
	x := t.Ex()
	f := t.Fields()
	var h []string
	for _, k := range slices.Sorted(maps.Keys(x.Headers)) {
		h = append(h, fmt.Sprintf("%q=%q", k, x.Headers[k]))
	}
	q := "<no queue>"
	if t.Queue != nil {
		q = fmt.Sprintf("%q/%q/%q", t.Queue.Key.Project, t.Queue.Key.Scope, t.Queue.Key.Name)
	}
	return fmt.Sprintf("task %d %s %d a=%d/%d p=%d nb=%d bo=%d/%d own=%q tok=%d sec=%d lease=%d c=%d u=%d pay=%s kind=%q idem=%q err=%q prog=%s res=%s h=%v errs=%q parent=%d follow=%v policy=%d part=%q",
		f.ID, q, f.State, f.Attempts, f.MaxAttempts, f.Priority, f.NotBefore, f.BackoffBase, f.BackoffMax, f.Owner, f.Token,
		f.Secret, f.LeaseUntil, f.Created, f.Updated, renderValue(f.Payload, t.PayloadRef()), x.Kind, x.IdemKey, x.LastError,
		renderValue(x.Progress, x.ProgressRef()), renderValue(x.Result, x.ResultRef()), h, x.Errors, x.Parent, x.FollowUps, x.DepPolicy, t.PartitionKey())
}

// renderValue renders a value in line or by reference.
func renderValue(b []byte, r ValueRef) string {
	if r.IsZero() {
		return renderBytes(b)
	}
	return fmt.Sprintf("%s@%d/%d/%d", renderBytes(b), r.File, r.Off, r.Len)
}

// renderBatch renders what a batch means: fields a kind does not carry,
// and update fields whose flag is off, are left out.
func renderBatch(b *Batch) string {
	var s strings.Builder
	fmt.Fprintf(&s, "seq=%d now=%d seed=%d\n", b.Seq, b.Now, b.Seed)
	for _, a := range b.Assertions {
		if a.Kind == AssertToken {
			fmt.Fprintf(&s, "assert token %d %d\n", a.ID, a.Token)
		} else {
			fmt.Fprintf(&s, "assert %d %q %q %q %d\n", a.Kind, a.NS.Project, a.NS.Scope, a.Key, a.Version)
		}
	}
	for _, m := range b.Mutations {
		switch m.Kind {
		case MutPutTask:
			fmt.Fprintf(&s, "put %s\n", renderTask(m.Task))
		case MutUpdateTask:
			u := m.Update
			fmt.Fprintf(&s, "update %d %d %d %d %q %d %d %d %d %d", u.ID, u.State, u.Attempts, u.NotBefore, u.Owner, u.Token,
				u.LeaseUntil, u.Updated, u.Secret, u.Flags)
			if u.Flags&UpdProgress != 0 {
				fmt.Fprintf(&s, " prog=%s", renderValue(u.Progress, u.ProgressRef))
			}
			if u.Flags&UpdResult != 0 {
				fmt.Fprintf(&s, " res=%s", renderValue(u.Result, u.ResultRef))
			}
			if u.Flags&UpdAddError != 0 {
				fmt.Fprintf(&s, " attempt=%d at=%d", u.ErrAttempt, u.ErrAt)
			}
			if u.Flags&UpdFollowUps != 0 {
				fmt.Fprintf(&s, " follow=%v", u.FollowUps)
			}
			fmt.Fprintf(&s, " err=%q\n", u.LastError)
		case MutDeleteTask:
			fmt.Fprintf(&s, "delete %d %d\n", m.Update.ID, m.Update.Flags)
		case MutSetKV, MutDeleteKV:
			fmt.Fprintf(&s, "kv %d %q %q %q %s\n", m.Kind, m.KV.Project, m.KV.Scope, m.KV.Key, renderValue(m.KV.Value, m.KV.ValueRef()))
		case MutPutIdem, MutDeleteIdem:
			fmt.Fprintf(&s, "idem %d %+v\n", m.Kind, m.Idem)
		case MutPutConf:
			fmt.Fprintf(&s, "conf %+v\n", m.Conf)
		case MutDeleteConf:
			fmt.Fprintf(&s, "conf delete %+v\n", m.Conf.Queue)
		case MutPutDep, MutDeleteDep:
			fmt.Fprintf(&s, "dep %d %d <- %d\n", m.Kind, m.Dep.Parent, m.Dep.Child)
		case MutPutBucket, MutDeleteBucket:
			fmt.Fprintf(&s, "bucket %d %+v\n", m.Kind, m.Bucket)
		case MutMoveValue:
			fmt.Fprintf(&s, "move %+v\n", m.Move)
		default:
			fmt.Fprintf(&s, "mutation %d\n", m.Kind)
		}
	}
	return s.String()
}

// fuzzStore returns a store holding a little of everything, for decoded
// batches to be applied to.
func fuzzStore(tb testing.TB) *Store {
	s := NewStore()
	q := s.Intern(QueueKey{Namespace{"p", "s"}, "q"})
	ns := Namespace{"p", "s"}
	b := &Batch{Seq: 1, Now: 100, Mutations: []Mutation{
		{Kind: MutPutTask, Task: (&Fields{ID: 1, Queue: q, State: StateReady, MaxAttempts: 5, NotBefore: 100}).Task()},
		{Kind: MutPutTask, Task: (&Fields{ID: 2, Queue: q, State: StateScheduled, MaxAttempts: 5, NotBefore: 200}).Task()},
		{Kind: MutPutTask, Task: (&Fields{ID: 3, Queue: q, State: StateInFlight, MaxAttempts: 5, Owner: "w", Token: 1, LeaseUntil: 300}).Task()},
		{Kind: MutPutTask, Task: (&Fields{ID: 4, Queue: q, State: StateDead, MaxAttempts: 1, Extra: &Extra{LastError: "x"}}).Task()},
		{Kind: MutPutTask, Task: (&Fields{ID: 5, Queue: q, State: StateCompleted, Updated: 150, Extra: &Extra{IdemKey: "k"}}).Task()},
		{Kind: MutSetKV, KV: KV{Namespace: ns, Key: "a", Value: []byte("1")}},
		{Kind: MutPutIdem, Idem: Idem{Queue: q.Key, Key: "k", ID: 5, Expires: 1000}},
		{Kind: MutPutIdem, Idem: Idem{Queue: q.Key, Key: "j", ID: 1}},
		{Kind: MutPutTask, Task: (&Fields{ID: 6, Queue: q, State: StateInFlight, MaxAttempts: 1, Attempts: 1, Owner: "w", Token: 1, LeaseUntil: 400}).Task()},
		{Kind: MutPutTask, Task: (&Fields{ID: 7, Queue: q, State: StateWaiting, MaxAttempts: 5, NotBefore: 100, Extra: &Extra{DepPolicy: 1}}).Task()},
		{Kind: MutPutDep, Dep: Dep{Parent: 1, Child: 7}},
		{Kind: MutPutDep, Dep: Dep{Parent: 6, Child: 7}},
	}}
	if _, err := s.Apply(b); err != nil {
		tb.Fatal(err)
	}
	if err := s.Verify(); err != nil {
		tb.Fatal(err)
	}
	return s
}

func batchSeeds(tb testing.TB) [][]byte {
	s := fuzzStore(tb)
	q := s.Queue(QueueKey{Namespace{"p", "s"}, "q"})
	ns := Namespace{"p", "s"}
	enc := NewEncoder()
	var out [][]byte
	for _, b := range []*Batch{
		{Seq: 2, Now: 500},
		{Seq: 2, Now: 500, Assertions: []Assertion{{Kind: AssertToken, ID: 3, Token: 1}, {Kind: AssertKVVersion, NS: ns, Key: "a", Version: 1}},
			Mutations: []Mutation{
				{Kind: MutUpdateTask, Update: TaskUpdate{ID: 3, State: StateReady, Attempts: 1, NotBefore: 500, Updated: 500,
					Flags: UpdLastError | UpdProgress, LastError: "lease expired", Progress: []byte(`{"p":1}`)}},
				{Kind: MutSetKV, KV: KV{Namespace: ns, Key: "b", Value: []byte("v")}},
				{Kind: MutDeleteKV, KV: KV{Namespace: ns, Key: "a"}},
			}},
		{Seq: 3, Now: 600, Assertions: []Assertion{{Kind: AssertKVAbsent, NS: ns, Key: "z"}, {Kind: AssertKVExists, NS: ns, Key: "a"}},
			Mutations: []Mutation{
				{Kind: MutPutTask, Task: (&Fields{ID: 9, Queue: q, State: StateScheduled, MaxAttempts: 3, Priority: -2, NotBefore: 900,
					BackoffBase: 1e6, BackoffMax: 6e7, Created: 600, Updated: 600, Payload: []byte(`{"x":1}`),
					Extra: &Extra{Kind: "k", IdemKey: "i", Headers: map[string]string{"h": "v"}}}).Task()},
				{Kind: MutPutIdem, Idem: Idem{Queue: q.Key, Key: "i", ID: 9}},
				{Kind: MutPutTask, Task: (&Fields{ID: 10, Queue: q, State: StateReady, MaxAttempts: 3, NotBefore: 600,
					Created: 600, Updated: 600, Part: PartRef("tenant")}).Task()},
				{Kind: MutPutConf, Conf: QueueConf{Queue: q.Key, MaxInFlight: 4, PartMaxInFlight: 2}},
				{Kind: MutPutConf, Conf: QueueConf{Queue: q.Key, PartRate: 2, PartPer: 100, PartBurst: 3}},
				{Kind: MutPutBucket, Bucket: PartBucket{Queue: q.Key, Key: "tenant", Credit: 150, At: 600}},
				{Kind: MutDeleteBucket, Bucket: PartBucket{Queue: q.Key, Key: ""}},
				{Kind: MutDeleteIdem, Idem: Idem{Queue: q.Key, Key: "k", ID: 5, Expires: 1000}},
				{Kind: MutDeleteTask, Update: TaskUpdate{ID: 5}},
				{Kind: MutUpdateTask, Update: TaskUpdate{ID: 1, State: StateCompleted, Updated: 600, Flags: UpdResult | UpdFollowUps,
					Result: []byte("1"), FollowUps: []uint64{9}}},
			}},
		{Seq: 4, Now: 700, Mutations: []Mutation{
			{Kind: MutUpdateTask, Update: TaskUpdate{ID: 3, State: StateDead, Attempts: 1, Updated: 300,
				Flags: UpdLastError | UpdAddError, LastError: "lease expired", ErrAttempt: 1, ErrAt: 300}},
			{Kind: MutDeleteTask, Update: TaskUpdate{ID: 2, Flags: UpdCompleted}},
			{Kind: MutPutTask, Task: (&Fields{ID: 10, Queue: q, State: StateReady, MaxAttempts: 2, NotBefore: 700,
				Extra: &Extra{Parent: 1, Errors: []AttemptError{{Attempt: 1, At: 5, Error: "e"}}, FollowUps: []uint64{3}}}).Task()},
		}},
		{Seq: 5, Now: 800, Mutations: []Mutation{
			{Kind: MutPutConf, Conf: QueueConf{Queue: q.Key, MaxInFlight: 1, Rate: 3, Per: 100, Burst: 2, Credit: 150, At: 800}},
			{Kind: MutPutIdem, Idem: Idem{Queue: q.Key, Key: "docket/unique/x", ID: 1, Expires: 2000, States: 0x2e}},
			{Kind: MutDeleteConf, Conf: QueueConf{Queue: QueueKey{ns, "other"}}},
			{Kind: MutUpdateTask, Update: TaskUpdate{ID: 3, State: StateReady, Updated: 800, NotBefore: 800}},
		}},
		{Seq: 6, Now: 800, Mutations: []Mutation{
			{Kind: MutPutTask, Task: (&Fields{ID: 11, Queue: q, State: StateWaiting, MaxAttempts: 5, NotBefore: 900, Extra: &Extra{DepPolicy: 2}}).Task()},
			{Kind: MutPutDep, Dep: Dep{Parent: 7, Child: 11}},
			{Kind: MutPutDep, Dep: Dep{Parent: 2, Child: 11}},
			{Kind: MutDeleteDep, Dep: Dep{Parent: 1, Child: 7}},
			{Kind: MutDeleteDep, Dep: Dep{Parent: 6, Child: 7}},
			{Kind: MutUpdateTask, Update: TaskUpdate{ID: 7, State: StateReady, NotBefore: 800, Updated: 800}},
		}},
	} {
		data, err := enc.Batch(b)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, slices.Clone(data))
	}
	return out
}

// FuzzDecodeBatch decodes arbitrary bytes as a log batch. A batch that
// decodes must encode to bytes that decode to the same batch, and applying
// it to a store must either be refused or leave every index consistent
// with the records.
func FuzzDecodeBatch(f *testing.F) {
	for _, s := range append(batchSeeds(f), refBatchSeeds(f)...) {
		f.Add(s)
		f.Add(s[:len(s)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 0x90, 0x91, 0x92, 3, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzStore(t)
		var b Batch
		var err error
		if mayAllocate(data) {
			checkAlloc(t, data, func() { err = NewDecoder(s).Batch(data, &b) })
		} else {
			err = NewDecoder(s).Batch(data, &b)
		}
		if err != nil {
			return
		}
		want := renderBatch(&b)
		again, err := NewEncoder().Batch(&b)
		if err != nil {
			t.Fatalf("a decoded batch does not encode: %v\n%s", err, want)
		}
		var b2 Batch
		if err := NewDecoder(s).Batch(again, &b2); err != nil {
			t.Fatalf("a re-encoded batch does not decode: %v\n%s", err, want)
		}
		if got := renderBatch(&b2); got != want {
			t.Fatalf("round trip changed the batch:\n%s\nwant\n%s", got, want)
		}
		if breaksFieldRules(&b) {
			// A record Apply takes as it is but Verify's per-record rules
			// reject (an in-flight task with no owner or token): the planner
			// never writes one and the log's checksums keep damage out, so
			// it is outside what Apply promises.
			return
		}
		if out, err := s.Apply(&b); err != nil || out.Refused != "" {
			return // refused, or corrupt and the caller discards the store
		}
		if err := s.Verify(); err != nil {
			t.Fatalf("an applied batch left the indexes inconsistent: %v\n%s", err, want)
		}
	})
}

// breaksFieldRules reports a mutation that makes an in-flight task without
// an owner or a token.
func breaksFieldRules(b *Batch) bool {
	for _, m := range b.Mutations {
		switch {
		case m.Kind == MutPutTask && m.Task != nil && m.Task.State == StateInFlight && (m.Task.Owner() == "" || m.Task.Token() == 0):
			return true
		case m.Kind == MutUpdateTask && m.Update.State == StateInFlight && (m.Update.Owner == "" || m.Update.Token == 0):
			return true
		}
	}
	return false
}

func recordSeeds(tb testing.TB) [][]byte {
	s := fuzzStore(tb)
	enc := NewEncoder()
	var out [][]byte
	add := func(b []byte, err error) {
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, slices.Clone(b))
	}
	add(enc.Header(7, 12, 345))
	for id := uint64(1); id <= 5; id++ {
		t, _ := s.Task(id)
		add(enc.TaskRecord(t))
	}
	add(enc.KVRecord(KV{Namespace: Namespace{"p", "s"}, Key: "a", Value: []byte("v"), Version: 3}))
	add(enc.IdemRecord(Idem{Queue: QueueKey{Namespace{"p", "s"}, "q"}, Key: "k", ID: 5, Expires: 1000}))
	add(enc.TotalsRecord(QueueTotals{Queue: QueueKey{Namespace{"p", "s"}, "q"}, Totals: Totals{Enqueued: 5, Claimed: 1}}))
	add(enc.TotalsRecord(QueueTotals{Queue: QueueKey{Namespace{"p", "s"}, "idle"}, Totals: Totals{Completed: 2}, Idle: 50}))
	add(enc.IdemRecord(Idem{Queue: QueueKey{Namespace{"p", "s"}, "q"}, Key: "u", ID: 1, Expires: 900, States: 0x2e}))
	add(enc.ConfRecord(QueueConf{Queue: QueueKey{Namespace{"p", "s"}, "q"}, Paused: true, Rate: 2, Per: 10, Burst: 3, Credit: 25, At: 99}))
	add(enc.DepRecord(Dep{Parent: 1, Child: 7}))
	add(enc.TaskRecord((&Fields{ID: 20, Queue: s.QueueRef(QueueKey{Namespace{"p", "s"}, "q"}), State: StateReady, MaxAttempts: 1,
		Part: PartRef("tenant")}).Task()))
	add(enc.ConfRecord(QueueConf{Queue: QueueKey{Namespace{"p", "s"}, "q"}, PartMaxInFlight: 3}))
	add(enc.ConfRecord(QueueConf{Queue: QueueKey{Namespace{"p", "s"}, "q"}, PartRate: 2, PartPer: 10, PartBurst: 4}))
	add(enc.BucketRecord(PartBucket{Queue: QueueKey{Namespace{"p", "s"}, "q"}, Key: "tenant", Credit: 15, At: 99}))
	return out
}

// refBatchSeeds are batches with values by reference and moves, against
// fuzzStore.
func refBatchSeeds(tb testing.TB) [][]byte {
	s := fuzzStore(tb)
	b := refBatch(s.Queue(QueueKey{Namespace{"p", "s"}, "q"}))
	b.Seq = 2
	enc := NewEncoder()
	var out [][]byte
	for i := range b.Mutations {
		one := *b
		one.Mutations = b.Mutations[i : i+1]
		data, err := enc.Batch(&one)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, slices.Clone(data))
	}
	data, err := enc.Batch(b)
	if err != nil {
		tb.Fatal(err)
	}
	return append(out, slices.Clone(data))
}

// refRecordSeeds are snapshot records with values by reference.
func refRecordSeeds(tb testing.TB) [][]byte {
	s := NewStore()
	enc := NewEncoder()
	var out [][]byte
	for _, m := range refBatch(s.QueueRef(QueueKey{Namespace{"p", "s"}, "q"})).Mutations {
		var data []byte
		var err error
		switch m.Kind {
		case MutPutTask:
			data, err = enc.TaskRecord(m.Task)
		case MutSetKV:
			m.KV.Version = 4
			data, err = enc.KVRecord(m.KV)
		default:
			continue
		}
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, slices.Clone(data))
	}
	return out
}

func renderRecord(r Record) string {
	switch r.Kind {
	case RecHeader:
		return fmt.Sprintf("header %d %d %d", r.Seq, r.NextID, r.Now)
	case RecTask:
		return renderTask(r.Task)
	case RecKV:
		return fmt.Sprintf("kv %q %q %q %s %d", r.KV.Project, r.KV.Scope, r.KV.Key, renderValue(r.KV.Value, r.KV.ValueRef()), r.KV.Version)
	case RecIdem:
		return fmt.Sprintf("idem %+v", r.Idem)
	case RecTotals:
		return fmt.Sprintf("totals %+v", r.Totals)
	case RecConf:
		return fmt.Sprintf("conf %+v", r.Conf)
	case RecDep:
		return fmt.Sprintf("dep %+v", r.Dep)
	case RecBucket:
		return fmt.Sprintf("bucket %+v", r.Bucket)
	}
	return fmt.Sprintf("kind %d", r.Kind)
}

// FuzzDecodeRecord decodes arbitrary bytes as a snapshot record. A record
// that decodes must encode to bytes that decode to the same record, and
// loading it must either be refused or leave the store consistent.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range append(recordSeeds(f), refRecordSeeds(f)...) {
		f.Add(s)
		f.Add(s[:len(s)-1])
	}
	f.Add([]byte{})
	f.Add([]byte{0x93, 1, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewStore()
		s.Restore(10, 100, 0)
		var r Record
		var err error
		if mayAllocate(data) {
			checkAlloc(t, data, func() { r, err = NewDecoder(s).Record(data) })
		} else {
			r, err = NewDecoder(s).Record(data)
		}
		if err != nil {
			return
		}
		want := renderRecord(r)
		enc := NewEncoder()
		var again []byte
		switch r.Kind {
		case RecHeader:
			again, err = enc.Header(r.Seq, r.NextID, r.Now)
		case RecTask:
			again, err = enc.TaskRecord(r.Task)
		case RecKV:
			again, err = enc.KVRecord(r.KV)
		case RecIdem:
			again, err = enc.IdemRecord(r.Idem)
		case RecTotals:
			again, err = enc.TotalsRecord(r.Totals)
		case RecConf:
			again, err = enc.ConfRecord(r.Conf)
		case RecDep:
			again, err = enc.DepRecord(r.Dep)
		case RecBucket:
			again, err = enc.BucketRecord(r.Bucket)
		default:
			t.Fatalf("decoded a record of unknown kind %d", r.Kind)
		}
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v\n%s", err, want)
		}
		r2, err := NewDecoder(s).Record(again)
		if err != nil {
			t.Fatalf("a re-encoded record does not decode: %v\n%s", err, want)
		}
		if got := renderRecord(r2); got != want {
			t.Fatalf("round trip changed the record:\n%s\nwant\n%s", got, want)
		}
		switch r.Kind {
		case RecTask:
			err = s.LoadTask(r.Task)
		case RecKV:
			err = s.LoadKV(r.KV)
		case RecIdem:
			err = s.LoadIdem(r.Idem)
		case RecTotals:
			err = s.LoadTotals(r.Totals)
		case RecConf:
			err = s.LoadConf(r.Conf)
		case RecDep:
			err = s.LoadDep(r.Dep)
		}
		if err != nil || r.Kind == RecTask && r.Task.State == StateInFlight && (r.Task.Owner() == "" || r.Task.Token() == 0) {
			return
		}
		if err := s.Loaded(); err != nil {
			return // a waiting task's dependency records come after it
		}
		if err := s.Verify(); err != nil {
			t.Fatalf("a loaded record left the store inconsistent: %v\n%s", err, want)
		}
	})
}

// FuzzFastTask: whatever the fast task decoder accepts, the general one
// accepts too, as the same task on the same queue; and every task record
// the Encoder writes without extra fields takes the fast path.
func FuzzFastTask(f *testing.F) {
	for _, s := range recordSeeds(f) {
		f.Add(s)
	}
	enc := NewEncoder()
	s := NewStore()
	for _, tf := range []Fields{
		{ID: 1, State: StateReady, MaxAttempts: 5, Priority: -3, NotBefore: 1 << 50, BackoffBase: 1_000_000,
			BackoffMax: 60_000_000, Created: 1 << 50, Updated: 1<<50 + 1, Payload: []byte(`{"a":1}`)},
		{ID: 1<<40 + 7, State: StateInFlight, Attempts: 3, MaxAttempts: 1 << 31, Priority: 1 << 40, Owner: "worker-1",
			Token: 1 << 33, Secret: 1<<64 - 1, LeaseUntil: -5, Created: -1 << 40, Payload: make([]byte, 300)},
		{ID: 9, State: StateDead, Payload: []byte(strings.Repeat("x", 70_000))},
		{ID: 10, State: StateReady, MaxAttempts: 3, Created: 5, Updated: 5, Payload: []byte(`1`), Part: PartRef("tenant-7")},
		{ID: 11, State: StateInFlight, Owner: "w", Token: 2, Created: 5, Updated: 6, Part: PartRef(strings.Repeat("p", 300))},
		{ID: 12, State: StateReady, Created: 5, Updated: 5, PayloadRef: ValueRef{File: 3, Off: 1 << 33, Len: 70_000}},
		{ID: 13, State: StateReady, Created: 5, Updated: 5, Part: PartRef("t"), PayloadRef: ValueRef{Len: 1}},
	} {
		tf.Queue = s.QueueRef(QueueKey{Namespace{"p", strings.Repeat("s", 40)}, "q"})
		tk := tf.Task()
		data, err := enc.TaskRecord(tk)
		if err != nil {
			f.Fatal(err)
		}
		if _, ok := NewDecoder(s).fastTask(data); !ok {
			f.Fatalf("the Encoder's record of %s does not take the fast path", renderTask(tk))
		}
		f.Add(slices.Clone(data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewStore()
		fast, ok := NewDecoder(s).fastTask(data)
		if !ok {
			return
		}
		r, err := NewDecoder(s).record(data)
		if err != nil {
			t.Fatalf("the fast decoder took %s, the general one refuses it: %v", renderTask(fast), err)
		}
		if r.Kind != RecTask || renderTask(r.Task) != renderTask(fast) {
			t.Fatalf("the decoders disagree:\nfast    %s\ngeneral %s", renderTask(fast), renderTask(r.Task))
		}
	})
}
