// Package bintree is the ordered set that holds the free chunks of one of
// bfc's bins: keys ordered by size, then address, each carrying the chunk's
// handle. bfc asks it for the least key, the greatest, and the least key at
// or above a size; it inserts and deletes a key at every split, merge,
// allocation and free, so these calls are the allocator's inner loop.
//
// The tree is a B+ tree specialised to its key: comparisons are inline, not
// calls through a function value as in a generic tree, and a node's keys
// lie in one array. Keys live in the leaves; an inner node holds, for each
// child, a lower bound of the keys in it, below every key of the next
// child (its first entry is not consulted: the first child takes
// everything below the second). A bound is the child's least key when it
// is linked; deleting keys leaves it a bound.
//
// Deletion merges a node that falls below a quarter full into a sibling
// when the two fit in one node, unlinks a node that empties, and replaces
// a root left with one child by that child; it does not borrow. No two
// neighbouring children of a node are then both under a quarter full,
// whatever the order of inserts and deletes, so memory stays within a
// small multiple of the keys held and the depth within a few levels of
// log₃₂ of their number (TestSparseDeletes measures both on a hostile
// order); a path of 32 steps is never outgrown. Every operation costs
// O(depth × order).
//
// A Tree is not safe for concurrent use, even by readers (Ceil notes its
// path in the Tree), and must not be copied once used.
package bintree

// Key orders chunks by size, then address; H is the chunk's handle, carried
// along and not compared.
type Key struct {
	Size, Ptr uint64
	H         int32
}

func less(a, b Key) bool {
	return a.Size < b.Size || a.Size == b.Size && a.Ptr < b.Ptr
}

// order is the most keys a leaf holds and the most children an inner node
// has. 32 keys of 24 bytes are 12 cache lines: a node is searched within
// the lines its binary search touches.
const order = 32

type node struct {
	n    int // keys (leaf) or children (inner)
	keys [order]Key
	kids *[order]*node // nil for a leaf
}

// Tree is an ordered set of Keys. The zero value is an empty set.
type Tree struct {
	root  *node
	depth int // inner levels above the leaves
	len   int
	spare []*node      // emptied nodes, for reuse
	path  [32]pathStep // scratch: the way down to a leaf
}

type pathStep struct {
	n *node
	i int // the child taken
}

// Len returns the number of keys in the set.
func (t *Tree) Len() int { return t.len }

// search returns the index of the first key in n.keys[:n.n] not less than k.
func search(n *node, k Key) int {
	lo, hi := 0, n.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if less(n.keys[m], k) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// child returns the index of the child of inner node n whose range holds k:
// the last child whose least key is not above k, or the first.
func child(n *node, k Key) int {
	lo, hi := 1, n.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if less(k, n.keys[m]) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo - 1
}

// descend walks from the root to the leaf whose range holds k, noting the
// way in t.path[:t.depth], and returns the leaf.
func (t *Tree) descend(k Key) *node {
	n := t.root
	for d := range t.depth {
		i := child(n, k)
		t.path[d] = pathStep{n, i}
		n = n.kids[i]
	}
	return n
}

// descendFirst walks to the leftmost leaf, noting the way.
func (t *Tree) descendFirst() *node {
	n := t.root
	for d := range t.depth {
		t.path[d] = pathStep{n, 0}
		n = n.kids[0]
	}
	return n
}

// Min returns the least key; false if the set is empty.
func (t *Tree) Min() (Key, bool) {
	if t.len == 0 {
		return Key{}, false
	}
	n := t.root
	for range t.depth {
		n = n.kids[0]
	}
	return n.keys[0], true
}

// Max returns the greatest key; false if the set is empty.
func (t *Tree) Max() (Key, bool) {
	if t.len == 0 {
		return Key{}, false
	}
	n := t.root
	for range t.depth {
		n = n.kids[n.n-1]
	}
	return n.keys[n.n-1], true
}

// Ceil returns the least key not less than k (H is not compared); false if
// there is none.
func (t *Tree) Ceil(k Key) (Key, bool) {
	if t.len == 0 {
		return Key{}, false
	}
	leaf := t.descend(k)
	if i := search(leaf, k); i < leaf.n {
		return leaf.keys[i], true
	}
	// Every key of this leaf is below k: the answer, if any, is the first
	// key of the next leaf, whose keys are all at or above its bound, which
	// is above k (k was routed left of it). Leaves are never empty.
	for d := t.depth - 1; d >= 0; d-- {
		p := t.path[d]
		if p.i+1 < p.n.n {
			n := p.n.kids[p.i+1]
			for range t.depth - 1 - d {
				n = n.kids[0]
			}
			return n.keys[0], true
		}
	}
	return Key{}, false
}

// Insert adds k; it reports false, changing nothing, if a key of the same
// size and address is already in the set.
func (t *Tree) Insert(k Key) bool {
	if t.root == nil {
		t.root = t.newNode(false)
	}
	leaf := t.descend(k)
	i := search(leaf, k)
	if i < leaf.n && !less(k, leaf.keys[i]) {
		return false
	}
	t.len++
	if leaf.n < order {
		insertAt(leaf, i, k, nil)
		return true
	}
	// The leaf is full: split it in two halves, put k in its half, and
	// link the right half into the parent, splitting upwards as needed.
	right := t.split(leaf)
	if i <= order/2 {
		insertAt(leaf, i, k, nil)
	} else {
		insertAt(right, i-order/2, k, nil)
	}
	t.link(t.depth-1, right)
	return true
}

// link adds right, the new right half of the node at level d+1 (the child
// taken at t.path[d]), to that child's parent, splitting the parent when
// it is full; d = -1 means the split node was the root.
func (t *Tree) link(d int, right *node) {
	for ; d >= 0; d-- {
		p, i := t.path[d].n, t.path[d].i+1
		if p.n < order {
			insertAt(p, i, right.keys[0], right)
			return
		}
		pr := t.split(p)
		if i <= order/2 {
			insertAt(p, i, right.keys[0], right)
		} else {
			insertAt(pr, i-order/2, right.keys[0], right)
		}
		right = pr
	}
	// The root split: a new root above the two halves.
	root := t.newNode(true)
	root.n = 2
	root.keys[0], root.kids[0] = t.root.keys[0], t.root
	root.keys[1], root.kids[1] = right.keys[0], right
	t.root = root
	t.depth++
}

// split moves the upper half of the full node n to a new node, returned.
func (t *Tree) split(n *node) *node {
	r := t.newNode(n.kids != nil)
	const half = order / 2
	copy(r.keys[:], n.keys[half:])
	if n.kids != nil {
		copy(r.kids[:], n.kids[half:])
		clear(n.kids[half:])
	}
	r.n, n.n = order-half, half
	return r
}

// insertAt puts k (and, in an inner node, kid) at position i of n, which
// has room.
func insertAt(n *node, i int, k Key, kid *node) {
	copy(n.keys[i+1:n.n+1], n.keys[i:n.n])
	n.keys[i] = k
	if n.kids != nil {
		copy(n.kids[i+1:n.n+1], n.kids[i:n.n])
		n.kids[i] = kid
	}
	n.n++
}

// removeAt takes entry i out of n.
func removeAt(n *node, i int) {
	copy(n.keys[i:], n.keys[i+1:n.n])
	if n.kids != nil {
		copy(n.kids[i:], n.kids[i+1:n.n])
		n.kids[n.n-1] = nil
	}
	n.n--
}

// Delete removes the key of k's size and address, and returns it (with
// its handle); false if there is none.
func (t *Tree) Delete(k Key) (Key, bool) {
	if t.len == 0 {
		return Key{}, false
	}
	leaf := t.descend(k)
	i := search(leaf, k)
	if i == leaf.n || less(k, leaf.keys[i]) {
		return Key{}, false
	}
	got := leaf.keys[i]
	t.removeFromLeaf(leaf, i)
	return got, true
}

// DeleteMin removes the least key and returns it; false if the set is
// empty.
func (t *Tree) DeleteMin() (Key, bool) {
	if t.len == 0 {
		return Key{}, false
	}
	leaf := t.descendFirst()
	got := leaf.keys[0]
	t.removeFromLeaf(leaf, 0)
	return got, true
}

// removeFromLeaf takes key i out of leaf, reached by t.path, then merges
// or unlinks the nodes on the path that this leaves too small.
func (t *Tree) removeFromLeaf(leaf *node, i int) {
	t.len--
	removeAt(leaf, i)
	n := leaf
	for d := t.depth - 1; d >= 0 && n.n < order/4; d-- {
		p := t.path[d]
		if n.n == 0 {
			removeAt(p.n, p.i)
			t.free(n)
		} else if !t.merge(p.n, p.i) {
			break
		}
		n = p.n
	}
	// A root left with one child gives way to it.
	for t.depth > 0 && t.root.n == 1 {
		old := t.root
		t.root = old.kids[0]
		t.depth--
		old.kids[0] = nil
		t.free(old)
	}
}

// merge joins child i of p with its left or right sibling, if the two fit
// in one node, and reports whether it did. The right node's entries move
// into the left one, and the right node leaves p; in an inner node, the
// first moved child's bound is p's bound for the right node, since a
// node's own first entry is not kept exact.
func (t *Tree) merge(p *node, i int) bool {
	switch {
	case i > 0 && p.kids[i-1].n+p.kids[i].n <= order:
		i--
	case i+1 < p.n && p.kids[i].n+p.kids[i+1].n <= order:
	default:
		return false
	}
	l, r := p.kids[i], p.kids[i+1]
	copy(l.keys[l.n:], r.keys[:r.n])
	if l.kids != nil {
		l.keys[l.n] = p.keys[i+1]
		copy(l.kids[l.n:], r.kids[:r.n])
	}
	l.n += r.n
	removeAt(p, i+1)
	t.free(r)
	return true
}

func (t *Tree) newNode(inner bool) *node {
	var n *node
	if k := len(t.spare); k > 0 {
		n = t.spare[k-1]
		t.spare = t.spare[:k-1]
	} else {
		n = new(node)
	}
	if inner && n.kids == nil {
		n.kids = new([order]*node)
	} else if !inner {
		n.kids = nil
	}
	return n
}

// free keeps an emptied node for reuse, up to a few.
func (t *Tree) free(n *node) {
	n.n = 0
	if n.kids != nil {
		clear(n.kids[:])
	}
	if len(t.spare) < 16 {
		t.spare = append(t.spare, n)
	}
}
