// Package readable finds the namespaces a caller may read, for a listing
// over every queue (DB.Queues): each is asked about once, outside the
// engine lock, and only the namespaces the caller's grants name are
// visited when the Authorizer lists them.
package readable

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// Page is how many namespaces Spaces visits under one hold of the engine
// lock.
const Page = 256

// Visit calls fn, under the engine lock, with the namespaces of the
// state that hold a queue or a queue's settings, in order from from,
// until fn returns false.
type Visit func(from index.Namespace, fn func(ns index.Namespace) bool) error

// Spaces returns, in order, the namespaces that hold a queue (or a
// queue's settings) and that caller may read. With a GrantLister
// Authorizer only the namespaces its grants match are visited; otherwise
// every one, Page at a time under the lock, and the Authorizer is asked
// about each outside it. hook, if not nil, is told how many namespaces
// each page held.
func Spaces(ctx context.Context, auth dockettype.Authorizer, caller dockettype.Caller, visit Visit, hook func(n int)) ([]index.Namespace, error) {
	var out []index.Namespace
	check := func(page []index.Namespace) {
		for _, ns := range page {
			// The Authorizer's question, without the error a check of
			// the engine's makes (for each namespace refused).
			if auth.Allowed(caller, dockettype.Namespace(ns), dockettype.PermRead)&dockettype.PermRead != 0 {
				out = append(out, ns)
			}
		}
	}
	// walk visits the namespaces from from on while in(ns).
	walk := func(from index.Namespace, in func(index.Namespace) bool) error {
		for {
			page := make([]index.Namespace, 0, Page)
			more := false
			err := visit(from, func(ns index.Namespace) bool {
				if !in(ns) {
					return false
				}
				if len(page) == Page {
					more = true
					return false
				}
				page = append(page, ns)
				return true
			})
			if err != nil {
				return err
			}
			if hook != nil {
				hook(len(page))
			}
			check(page)
			if !more {
				return nil
			}
			last := page[len(page)-1]
			from = index.Namespace{Project: last.Project, Scope: last.Scope + "\x00"}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	all := func(index.Namespace) bool { return true }
	lister, ok := auth.(dockettype.GrantLister)
	if !ok {
		return out, walk(index.Namespace{}, all)
	}
	exact := map[index.Namespace]bool{}
	projects := map[string]bool{}
	for _, g := range lister.Grants(caller) {
		switch {
		case g.Perms&dockettype.PermRead == 0:
		case g.Project == "*":
			return out, walk(index.Namespace{}, all)
		case g.Scope == "*":
			projects[g.Project] = true
		default:
			exact[index.Namespace{Project: g.Project, Scope: g.Scope}] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(projects)) {
		if err := walk(index.Namespace{Project: p}, func(ns index.Namespace) bool { return ns.Project == p }); err != nil {
			return nil, err
		}
	}
	var named []index.Namespace
	for ns := range exact {
		if !projects[ns.Project] {
			named = append(named, ns)
		}
	}
	if hook != nil {
		hook(len(named))
	}
	check(named) // namespaces without queues are asked about, and list nothing
	slices.SortFunc(out, func(a, b index.Namespace) int {
		return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(a.Scope, b.Scope))
	})
	return out, nil
}
