package readable

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// only is an Authorizer that is not a GrantLister: it reads the
// namespaces of the project it names.
type only string

func (o only) Allowed(_ dockettype.Caller, ns dockettype.Namespace, want dockettype.Perm) dockettype.Perm {
	if ns.Project == string(o) {
		return want
	}
	return 0
}

// TestSpaces: the namespaces a caller may read, in order; every one is
// visited, a page at a time, unless the Authorizer lists its grants, and
// then only those the grants name are (a named namespace with no queue is
// asked about too).
func TestSpaces(t *testing.T) {
	t.Parallel()
	var state []index.Namespace
	for _, p := range []string{"a", "b", "c"} {
		for i := range Page + 10 {
			state = append(state, index.Namespace{Project: p, Scope: fmt.Sprintf("s%04d", i)})
		}
	}
	caller := dockettype.Caller{ID: "x"}
	for _, c := range []struct {
		name    string
		auth    dockettype.Authorizer
		want    func(index.Namespace) bool
		visited int
	}{
		{"every namespace asked", only("b"), func(ns index.Namespace) bool { return ns.Project == "b" }, len(state)},
		{"a project granted", dockettype.Policy{"x": {{Project: "c", Scope: "*", Perms: dockettype.PermRead}}},
			func(ns index.Namespace) bool { return ns.Project == "c" }, Page + 10},
		{"one scope granted", dockettype.Policy{"x": {{Project: "a", Scope: "s0003", Perms: dockettype.PermRead},
			{Project: "b", Scope: "s0001", Perms: dockettype.PermWork}}},
			func(ns index.Namespace) bool { return ns == index.Namespace{Project: "a", Scope: "s0003"} }, 0},
		{"every project granted", dockettype.Policy{"x": {{Project: "*", Scope: "*", Perms: dockettype.PermRead}}},
			func(index.Namespace) bool { return true }, len(state)},
	} {
		visited, pages := 0, 0
		visit := func(from index.Namespace, fn func(index.Namespace) bool) error {
			i, _ := slices.BinarySearchFunc(state, from, func(a, b index.Namespace) int {
				return strings.Compare(a.Project+"\x00"+a.Scope, b.Project+"\x00"+b.Scope)
			})
			for _, ns := range state[i:] {
				if !fn(ns) {
					break
				}
				visited++
			}
			return nil
		}
		got, err := Spaces(context.Background(), c.auth, caller, visit, func(n int) {
			pages++
			if n > Page {
				t.Errorf("%s: a page of %d namespaces", c.name, n)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []index.Namespace
		for _, ns := range state {
			if c.want(ns) {
				want = append(want, ns)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d namespaces %v..., want %d", c.name, len(got), got[:min(len(got), 2)], len(want))
		}
		if visited != c.visited {
			t.Errorf("%s: visited %d namespaces, want %d", c.name, visited, c.visited)
		}
		if pages == 0 {
			t.Errorf("%s: no page", c.name)
		}
	}
}
