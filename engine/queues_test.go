package engine

import (
	"fmt"
	"slices"
	"testing"
)

// TestQueuesVisitsGrantedNamespaces: among 50,000 queues each in a
// namespace of its own, a caller whose grants (a Policy) name one namespace
// or one project gets its own queues after visiting only those namespaces;
// with an Authorizer that cannot list grants every namespace is visited, a
// page at a time under the lock. Either way the answer is the program's
// listing cut to the readable namespaces.
func TestQueuesVisitsGrantedNamespaces(t *testing.T) {
	// Not parallel: it sets a hook of the package.
	policy := Policy{
		"alice": {{Project: "tenant-a", Scope: "prod", Perms: PermRead}, {Project: "other", Scope: "*", Perms: PermEnqueue}},
		"carol": {{Project: "tenant-a", Scope: "*", Perms: PermRead | PermWork}},
		"dave":  {{Project: "*", Scope: "s000007", Perms: PermRead}},
	}
	e := newEnv(t, true, func(o *Options) { o.Authorizer = policy })
	many := 50_000
	if testing.Short() {
		many = 5_000 // still 20 pages
	}
	for i := range many {
		if _, err := e.db.Queue(NS("other", fmt.Sprintf("s%06d", i)), "q").Enqueue(ctx, Task{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"b", "a", "c"} {
		e.enqueue(e.db.Queue(nsA, name), Task{})
	}
	e.enqueue(e.db.Queue(NS("tenant-a", "dev"), "x"), Task{})
	// Queues with settings and no task are listed too.
	if err := e.db.Queue(nsA, "paused").Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Queue(NS("tenant-a", "empty"), "paused").Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Queue(NS("other", "settings-only"), "paused").Pause(ctx); err != nil {
		t.Fatal(err)
	}
	everything, err := e.db.Queues(ctx)
	if err != nil || len(everything) != many+7 {
		t.Fatalf("the program sees %d queues, %v", len(everything), err)
	}
	want := func(keep func(Namespace) bool) []QueueInfo {
		var out []QueueInfo
		for _, q := range everything {
			if keep(q.Namespace) {
				out = append(out, q)
			}
		}
		return out
	}
	var pages []int
	testHookNamespacePage = func(n int) { pages = append(pages, n) }
	t.Cleanup(func() { testHookNamespacePage = nil })

	for _, c := range []struct {
		caller  string
		keep    func(Namespace) bool
		visited int // with the Policy
	}{
		{"alice", func(n Namespace) bool { return n == nsA }, 1},
		{"carol", func(n Namespace) bool { return n.Project == "tenant-a" }, 3},
		{"dave", func(n Namespace) bool { return n.Scope == "s000007" }, many + 4},
		{"nobody", func(Namespace) bool { return false }, 0},
	} {
		for _, a := range []Authorizer{policy, opaque{policy}} {
			_, lists := a.(GrantLister)
			e.db.c.opts.Authorizer = a
			pages = pages[:0]
			got, err := e.db.As(Caller{ID: c.caller}).Queues(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if w := want(c.keep); !slices.EqualFunc(got, w, func(a, b QueueInfo) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
				t.Fatalf("%s (grants listed: %v) sees %d queues %.300v, want %d %.300v", c.caller, lists, len(got), got, len(w), w)
			}
			visited := 0
			for _, n := range pages {
				visited += n
				if n > namespacePage {
					t.Fatalf("%d namespaces visited under one hold of the lock", n)
				}
			}
			wantVisited := many + 4 // every namespace
			if lists {
				wantVisited = c.visited
			}
			if visited != wantVisited {
				t.Fatalf("%s (grants listed: %v): %d namespaces visited in %d pages, want %d", c.caller, lists, visited, len(pages), wantVisited)
			}
		}
	}
}
