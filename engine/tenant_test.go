package engine

import (
	"strings"
	"testing"
	"time"
)

// TestWhatATenantObservesOfOthers pins the README's security model: of
// another namespace's activity a caller sees only the two engine-wide
// sequences (task ids, and KV versions, which every batch of every
// namespace moves), never its tasks, queue names or keys.
func TestWhatATenantObservesOfOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) {
		o.Authorizer = Policy{
			"a": {{Project: "tenant-a", Scope: "*", Perms: PermAll}},
			"b": {{Project: "tenant-b", Scope: "*", Perms: PermAll}},
		}
	})
	nsA, nsB := NS("tenant-a", "p"), NS("tenant-b", "p")
	a, b := e.db.As(Caller{ID: "a"}), e.db.As(Caller{ID: "b"})
	first, err := a.KV(nsA).Commit(ctx, Set("mine", []byte("1")))
	if err != nil {
		t.Fatal(err)
	}
	// Tenant b: an enqueue, a claim, a heartbeat, a completion, a KV write.
	bq := b.Queue(nsB, "secret-queue-name")
	res, err := bq.Enqueue(ctx, Task{})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := bq.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 {
		t.Fatal(ls, err)
	}
	if err := bq.Heartbeat(ctx, &ls[0], time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := bq.Complete(ctx, ls[0], Done{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.KV(nsB).Commit(ctx, Set("secret-key", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	// An assertion-only commit of a returns the engine-wide sequence: it
	// moved by b's five batches.
	now, err := a.KV(nsA).Commit(ctx, IfExists("mine"))
	if err != nil {
		t.Fatal(err)
	}
	if now.Version != first.Version+5 {
		t.Fatalf("version went %d -> %d, want +5 (one per batch of the other tenant)", first.Version, now.Version)
	}
	// The next id a gets counts b's task.
	mine, err := a.Queue(nsA, "q").Enqueue(ctx, Task{})
	if err != nil || mine.ID != res.ID+1 {
		t.Fatalf("a's task id %d after b's %d: %v", mine.ID, res.ID, err)
	}
	// Nothing else: b's task is reported like one that never existed,
	// without naming b's namespace or queue, and b's queue is not listed.
	b2, err := bq.Enqueue(ctx, Task{})
	if err != nil {
		t.Fatal(err)
	}
	aq := a.Queue(nsA, "q")
	_, errTheirs := aq.Get(ctx, b2.ID)
	_, errNone := aq.Get(ctx, b2.ID+100)
	wantErr(t, errTheirs, ErrNotFound)
	if strings.Replace(errTheirs.Error(), "task "+itoa(b2.ID), "task "+itoa(b2.ID+100), 1) != errNone.Error() {
		t.Fatalf("a foreign task reads differently from a missing one: %q vs %q", errTheirs, errNone)
	}
	for _, s := range []string{"tenant-b", "secret"} {
		if strings.Contains(errTheirs.Error(), s) {
			t.Fatalf("the error names %q: %v", s, errTheirs)
		}
	}
	qs, err := a.Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Namespace != nsA {
		t.Fatalf("a lists %+v (%v)", qs, err)
	}
	if st := a.Stats(); st != (Stats{}) {
		t.Fatalf("a view's stats: %+v", st)
	}
}
