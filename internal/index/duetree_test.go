package index

import (
	"math/rand/v2"
	"slices"
	"testing"
)

type dueItem struct {
	prio int64
	id   uint64
	at   int64
}

// TestDueTreeAgreesWithAScan drives a dueTree and a plain slice with the
// same random inserts and deletes and compares every due walk, from random
// starting points, with the slice sorted and filtered.
func TestDueTreeAgreesWithAScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tree dueTree
	var all []dueItem
	nextID := uint64(1)
	for step := range 20000 {
		switch r := rng.IntN(10); {
		case r < 6 || len(all) == 0:
			it := dueItem{prio: int64(rng.IntN(8)) - 4, id: nextID, at: int64(rng.IntN(1000))}
			nextID++
			tree.Set(it.prio, it.id, it.at)
			all = append(all, it)
		default:
			i := rng.IntN(len(all))
			if !tree.Delete(all[i].prio, all[i].id) {
				t.Fatalf("step %d: delete of a present item failed", step)
			}
			all = slices.Delete(all, i, i+1)
		}
		if tree.Len() != len(all) {
			t.Fatalf("step %d: len %d, want %d", step, tree.Len(), len(all))
		}
		if step%97 != 0 {
			continue
		}
		if !tree.check(func(int64, uint64, int64) bool { return true }) {
			t.Fatalf("step %d: invariants broken", step)
		}
		sorted := slices.Clone(all)
		slices.SortFunc(sorted, func(a, b dueItem) int {
			if before(a.prio, a.id, b.prio, b.id) {
				return -1
			}
			return 1
		})
		for range 5 {
			now := int64(rng.IntN(1100)) - 50
			from := dueItem{prio: int64(rng.IntN(10)) - 5, id: uint64(rng.IntN(int(nextID) + 1))}
			if rng.IntN(4) == 0 && len(sorted) > 0 {
				from = sorted[rng.IntN(len(sorted))]
			}
			after := rng.IntN(2) == 0
			limit := 1 + rng.IntN(30)
			var want []dueItem
			for _, it := range sorted {
				if it.at > now || before(it.prio, it.id, from.prio, from.id) ||
					(after && it.prio == from.prio && it.id == from.id) {
					continue
				}
				if want = append(want, it); len(want) == limit {
					break
				}
			}
			var got []dueItem
			tree.AscendDue(from.prio, from.id, after, now, func(p int64, id uint64, at int64) bool {
				got = append(got, dueItem{p, id, at})
				return len(got) < limit
			})
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: due at %d from %+v (after %v): %v, want %v", step, now, from, after, got, want)
			}
		}
		if m, ok := tree.MinAt(); ok != (len(all) > 0) || ok && m != slices.MinFunc(all, func(a, b dueItem) int { return int(a.at - b.at) }).at {
			t.Fatalf("step %d: min at %d %v", step, m, ok)
		}
	}
	if tree.Delete(99, 1<<40) {
		t.Fatal("deleted an item that is not there")
	}
}

// TestDueTreeSkipsWhatIsNotDue: a walk that reports a few due items among
// many that are not visits few nodes (the bound claims and reads rely on).
func TestDueTreeSkipsWhatIsNotDue(t *testing.T) {
	var tree dueTree
	const n = 100000
	for i := range uint64(n) {
		at := int64(1000)
		if i%10000 == 0 {
			at = 1 // ten due items, spread over the order
		}
		tree.Set(int64(i), i+1, at)
	}
	visits := 0
	var walk func(i int32)
	walk = func(i int32) { // counts what ascend visits, by the same rule
		if i == 0 || tree.nodes[i].minAt > 5 {
			return
		}
		visits++
		walk(tree.nodes[i].left)
		walk(tree.nodes[i].right)
	}
	walk(tree.root)
	got := 0
	tree.AscendDue(1<<62, 0, false, 5, func(int64, uint64, int64) bool { got++; return true })
	if got != 10 || visits > 10*60 {
		t.Fatalf("%d due items, %d nodes visited of %d", got, visits, n)
	}
}
