package engine

import "testing"

// TestNamespaceDenialsDiffer: permission refusals name the namespace
// unambiguously.
func TestNamespaceDenialsDiffer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) { o.Authorizer = Policy{} })
	v := e.db.As(Caller{ID: "bob"})
	_, errA := v.Queue(NS("a/b", "c"), "q").Enqueue(ctx, Task{})
	_, errB := v.Queue(NS("a", "b/c"), "q").Enqueue(ctx, Task{})
	wantErr(t, errA, ErrPermission)
	wantErr(t, errB, ErrPermission)
	if errA.Error() == errB.Error() {
		t.Fatalf("two namespaces refused with the same message: %v", errA)
	}
}
