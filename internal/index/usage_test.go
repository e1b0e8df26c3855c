package index

import (
	"testing"
)

// TestUsageFollowsRecords applies puts, updates and deletes of tasks, KV
// entries and idempotency keys in two namespaces and checks the usage of
// each namespace and of the store against what the records cost, after
// every batch, and that a namespace holding nothing is forgotten.
func TestUsageFollowsRecords(t *testing.T) {
	s := NewStore()
	other := QueueKey{Namespace{"p", "t"}, "q"}
	t1 := task(s, 1, StateReady)
	t2 := (&Fields{ID: 2, Queue: s.Intern(other), State: StateReady, MaxAttempts: 1, Payload: make([]byte, 1000), Created: 1}).Task()
	kv := KV{Namespace: qk.Namespace, Key: "key", Value: []byte("value")}
	idem := Idem{Queue: qk, Key: "idem", ID: 1}
	apply := func(seq uint64, ms ...Mutation) {
		t.Helper()
		if out, err := s.Apply(&Batch{Seq: seq, Now: 100, Mutations: ms}); err != nil || out.Refused != "" {
			t.Fatalf("batch %d: %v %s", seq, err, out.Refused)
		}
		if err := s.Verify(); err != nil {
			t.Fatalf("batch %d: %v", seq, err)
		}
	}
	apply(1, Mutation{Kind: MutPutTask, Task: t1}, Mutation{Kind: MutPutTask, Task: t2},
		Mutation{Kind: MutSetKV, KV: kv}, Mutation{Kind: MutPutIdem, Idem: idem})
	wantP := Usage{Tasks: 1, Bytes: TaskBytes(t1) + KVBytes(&kv) + IdemBytes(&idem)}
	wantT := Usage{Tasks: 1, Bytes: TaskBytes(t2)}
	if got := s.NamespaceUsage(qk.Namespace); got != wantP {
		t.Fatalf("namespace p/s uses %+v, want %+v", got, wantP)
	}
	if got := s.NamespaceUsage(other.Namespace); got != wantT || wantT.Bytes < 1000+TaskCost {
		t.Fatalf("namespace p/t uses %+v, want %+v", got, wantT)
	}
	if got := s.Usage(); got != (Usage{Tasks: 2, Bytes: wantP.Bytes + wantT.Bytes}) {
		t.Fatalf("store uses %+v", got)
	}

	// A claim adds a run record; a bigger value replaces the smaller.
	u := UpdateOf(t1)
	u.State, u.Owner, u.Token, u.LeaseUntil, u.Attempts = StateInFlight, "worker-1", 1, 500, 1
	kv2 := kv
	kv2.Value = make([]byte, 300)
	apply(2, Mutation{Kind: MutUpdateTask, Update: u}, Mutation{Kind: MutSetKV, KV: kv2})
	claimed := mustTask(t, s, 1)
	if claimed.Run == nil {
		t.Fatal("the claim set no run record")
	}
	wantP = Usage{Tasks: 1, Bytes: TaskBytes(claimed) + KVBytes(&kv2) + IdemBytes(&idem)}
	if got := s.NamespaceUsage(qk.Namespace); got != wantP || TaskBytes(claimed) <= TaskBytes(t1) {
		t.Fatalf("after the claim p/s uses %+v, want %+v", got, wantP)
	}

	// Deleting everything of p/t forgets the namespace.
	apply(3, Mutation{Kind: MutDeleteTask, Update: TaskUpdate{ID: 2}})
	if got := s.NamespaceUsage(other.Namespace); got != (Usage{}) {
		t.Fatalf("an emptied namespace uses %+v", got)
	}
	seen := 0
	s.NamespacesUsage(func(ns Namespace, u Usage) bool {
		seen++
		if ns != qk.Namespace {
			t.Fatalf("namespace %v listed after it was emptied", ns)
		}
		return true
	})
	if seen != 1 {
		t.Fatalf("%d namespaces listed, want 1", seen)
	}
	apply(4, Mutation{Kind: MutDeleteTask, Update: TaskUpdate{ID: 1}}, Mutation{Kind: MutDeleteKV, KV: kv},
		Mutation{Kind: MutDeleteIdem, Idem: idem})
	if got := s.Usage(); got != (Usage{}) {
		t.Fatalf("an empty store uses %+v", got)
	}
}

// TestVerifyFindsWrongUsage: a usage that drifted from the records is
// reported.
func TestVerifyFindsWrongUsage(t *testing.T) {
	s := NewStore()
	s.Apply(putBatch(s, 1, task(s, 1, StateReady)))
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	s.usage.Bytes++
	if err := s.Verify(); err == nil {
		t.Fatal("verify missed a wrong total")
	}
	s.usage.Bytes--
	s.nsUsage[qk.Namespace].Bytes++
	s.usage.Bytes++
	if err := s.Verify(); err == nil {
		t.Fatal("verify missed a wrong namespace usage")
	}
}
