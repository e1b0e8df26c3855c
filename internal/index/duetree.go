package index

// dueTree holds tasks in serving order (higher Prio first, then lower id),
// each with the time At it comes due, and answers "which of them are due
// at t, in serving order, from a given position" without visiting the ones
// that are not: every node knows the earliest At in its subtree, so a walk
// skips each subtree whose earliest At is later than t. Reporting k due
// items costs O((k+1) log n), however many items are not due.
//
// A B-tree ordered by due time cannot answer this: the due items are a
// prefix of it, but in time order, and the highest-priority one may be
// anywhere in that prefix.
//
// It is a treap whose node priorities are a hash of the id, so its shape is
// a function of the set of items alone (not of the order they came in), and
// its expected depth is O(log n) whatever the keys. Nodes live in one slice
// and link by index: no pointers for the garbage collector to trace.
type dueTree struct {
	nodes []dueNode // nodes[0] is the empty tree
	free  []int32
	root  int32
	n     int
}

type dueNode struct {
	prio, at, minAt int64
	id              uint64
	left, right     int32
}

// before reports whether (ap, aid) comes before (bp, bid) in serving order.
func before(ap int64, aid uint64, bp int64, bid uint64) bool {
	if ap != bp {
		return ap > bp
	}
	return aid < bid
}

// heapPri is a node's treap priority: a hash of its id (splitmix64).
func heapPri(id uint64) uint64 {
	z := id + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// above reports whether node a belongs above node b in the treap.
func (t *dueTree) above(a, b int32) bool {
	na, nb := &t.nodes[a], &t.nodes[b]
	pa, pb := heapPri(na.id), heapPri(nb.id)
	if pa != pb {
		return pa > pb
	}
	return na.id < nb.id
}

func (t *dueTree) pull(i int32) {
	n := &t.nodes[i]
	m := n.at
	if n.left != 0 && t.nodes[n.left].minAt < m {
		m = t.nodes[n.left].minAt
	}
	if n.right != 0 && t.nodes[n.right].minAt < m {
		m = t.nodes[n.right].minAt
	}
	n.minAt = m
}

// Len is the number of items.
func (t *dueTree) Len() int { return t.n }

// MinAt is the earliest At of any item.
func (t *dueTree) MinAt() (int64, bool) {
	if t.root == 0 {
		return 0, false
	}
	return t.nodes[t.root].minAt, true
}

// Set adds the item (prio, id) due at at; it must not be present.
func (t *dueTree) Set(prio int64, id uint64, at int64) {
	if t.nodes == nil {
		t.nodes = make([]dueNode, 1, 8)
	}
	var x int32
	if k := len(t.free); k > 0 {
		x = t.free[k-1]
		t.free = t.free[:k-1]
	} else {
		t.nodes = append(t.nodes, dueNode{})
		x = int32(len(t.nodes) - 1)
	}
	t.nodes[x] = dueNode{prio: prio, id: id, at: at, minAt: at}
	t.root = t.insert(t.root, x)
	t.n++
}

func (t *dueTree) insert(i, x int32) int32 {
	if i == 0 {
		return x
	}
	if t.above(x, i) {
		nx := t.nodes[x]
		l, r := t.split(i, nx.prio, nx.id)
		t.nodes[x].left, t.nodes[x].right = l, r
		t.pull(x)
		return x
	}
	nx, ni := &t.nodes[x], &t.nodes[i]
	if before(nx.prio, nx.id, ni.prio, ni.id) {
		l := t.insert(ni.left, x)
		t.nodes[i].left = l
	} else {
		r := t.insert(ni.right, x)
		t.nodes[i].right = r
	}
	t.pull(i)
	return i
}

// split divides the subtree i into the items before (prio, id) and the rest.
func (t *dueTree) split(i int32, prio int64, id uint64) (int32, int32) {
	if i == 0 {
		return 0, 0
	}
	n := &t.nodes[i]
	if before(n.prio, n.id, prio, id) {
		a, b := t.split(n.right, prio, id)
		t.nodes[i].right = a
		t.pull(i)
		return i, b
	}
	a, b := t.split(n.left, prio, id)
	t.nodes[i].left = b
	t.pull(i)
	return a, i
}

// merge joins two subtrees, every item of a before every item of b.
func (t *dueTree) merge(a, b int32) int32 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	case t.above(a, b):
		r := t.merge(t.nodes[a].right, b)
		t.nodes[a].right = r
		t.pull(a)
		return a
	}
	l := t.merge(a, t.nodes[b].left)
	t.nodes[b].left = l
	t.pull(b)
	return b
}

// Delete removes the item (prio, id) and reports whether it was there.
func (t *dueTree) Delete(prio int64, id uint64) bool {
	var found bool
	t.root = t.delete(t.root, prio, id, &found)
	if found {
		t.n--
		if t.n == 0 {
			// Empty: start the slice afresh, and give a large one back.
			t.nodes, t.free, t.root = t.nodes[:1], t.free[:0], 0
			if cap(t.nodes) > 64 {
				t.nodes, t.free = nil, nil
			}
		}
	}
	return found
}

func (t *dueTree) delete(i int32, prio int64, id uint64, found *bool) int32 {
	if i == 0 {
		return 0
	}
	n := &t.nodes[i]
	if n.prio == prio && n.id == id {
		*found = true
		m := t.merge(n.left, n.right)
		t.nodes[i] = dueNode{}
		t.free = append(t.free, i)
		return m
	}
	if before(prio, id, n.prio, n.id) {
		l := t.delete(n.left, prio, id, found)
		t.nodes[i].left = l
	} else {
		r := t.delete(n.right, prio, id, found)
		t.nodes[i].right = r
	}
	t.pull(i)
	return i
}

// AscendDue calls fn, in serving order, for every item due at now (At <=
// now) that comes at or after (prio, id) — strictly after it when after is
// set — until fn returns false. fn must not change the tree.
func (t *dueTree) AscendDue(prio int64, id uint64, after bool, now int64, fn func(prio int64, id uint64, at int64) bool) {
	t.ascend(t.root, prio, id, after, now, fn)
}

func (t *dueTree) ascend(i int32, prio int64, id uint64, after bool, now int64, fn func(int64, uint64, int64) bool) bool {
	if i == 0 {
		return true
	}
	n := t.nodes[i]
	if n.minAt > now {
		return true // nothing below is due
	}
	// The left subtree holds only items before n: wanted only if n is past
	// the start.
	beforeStart := before(n.prio, n.id, prio, id) || (after && n.prio == prio && n.id == id)
	if !beforeStart {
		if !t.ascend(n.left, prio, id, after, now, fn) {
			return false
		}
		if n.at <= now && !fn(n.prio, n.id, n.at) {
			return false
		}
	}
	return t.ascend(n.right, prio, id, after, now, fn)
}

// check verifies the tree's order, heap and earliest-time invariants and
// its size, and calls fn for every item.
func (t *dueTree) check(fn func(prio int64, id uint64, at int64) bool) bool {
	count := 0
	var walk func(i int32, lo, hi *dueNode) bool
	walk = func(i int32, lo, hi *dueNode) bool {
		if i == 0 {
			return true
		}
		n := &t.nodes[i]
		count++
		if lo != nil && !before(lo.prio, lo.id, n.prio, n.id) || hi != nil && !before(n.prio, n.id, hi.prio, hi.id) {
			return false
		}
		m := n.at
		for _, c := range [2]int32{n.left, n.right} {
			if c != 0 {
				if t.above(c, i) {
					return false
				}
				m = min(m, t.nodes[c].minAt)
			}
		}
		if m != n.minAt || !fn(n.prio, n.id, n.at) {
			return false
		}
		return walk(n.left, lo, n) && walk(n.right, n, hi)
	}
	return walk(t.root, nil, nil) && count == t.n
}

// get returns the At of the item (prio, id).
func (t *dueTree) get(prio int64, id uint64) (int64, bool) {
	for i := t.root; i != 0; {
		n := &t.nodes[i]
		switch {
		case n.prio == prio && n.id == id:
			return n.at, true
		case before(prio, id, n.prio, n.id):
			i = n.left
		default:
			i = n.right
		}
	}
	return 0, false
}
