// Package freetree keeps a set of disjoint free address ranges and finds the
// lowest-addressed range that can hold a request: first fit by address in
// O(log n).
//
// The ranges are the nodes of a treap ordered by start address. Each node
// also records the largest range size in its subtree, so a first-fit search
// can descend from the root, going left whenever the left subtree holds a
// range big enough, and never visits a subtree that cannot satisfy it. Node
// priorities come from a fixed-seed generator, so the tree's shape, and
// therefore everything built on it, is deterministic.
//
// Adjacent free ranges are merged when a range is added, so the set is always
// the minimal description of the free space.
package freetree

import (
	"errors"
	"fmt"
)

// ErrOverlap is returned by Add when the range overlaps one already free.
var ErrOverlap = errors.New("range overlaps a free range")

const nilNode = -1

type node struct {
	start, size uint64
	maxSize     uint64 // largest size in this subtree
	left, right int32
	prio        uint32
}

// Tree is a set of disjoint free ranges [start, start+size). The zero value
// is an empty set ready to use.
type Tree struct {
	nodes  []node
	free   []int32 // recycled node indexes
	root   int32
	rng    uint64
	inited bool
	total  uint64
}

func (t *Tree) init() {
	if !t.inited {
		t.root = nilNode
		t.rng = 0x9e3779b97f4a7c15
		t.inited = true
	}
}

// Len returns the number of disjoint free ranges.
func (t *Tree) Len() int { return len(t.nodes) - len(t.free) }

// TotalBytes returns the sum of the sizes of the free ranges.
func (t *Tree) TotalBytes() uint64 { return t.total }

// Largest returns the size of the largest free range, or 0.
func (t *Tree) Largest() uint64 {
	t.init()
	if t.root == nilNode {
		return 0
	}
	return t.nodes[t.root].maxSize
}

// Add marks [start, start+size) free, merging it with the free ranges it
// touches. It returns ErrOverlap, and changes nothing, if any byte of the
// range is already free. size must be > 0.
//
// A range that touches a free neighbour grows that node in place: the order
// is unchanged and the maxima above it can only rise, so one descent fixes
// them. Only a range with no free neighbour is inserted, and only one that
// joins two neighbours removes one.
func (t *Tree) Add(start, size uint64) error {
	t.init()
	if size == 0 || start+size < start {
		return fmt.Errorf("freetree: bad range [%#x, +%d)", start, size)
	}
	end := start + size
	pred, succ := t.neighbours(start)
	joinPred := false
	if pred != nilNode {
		p := &t.nodes[pred]
		if p.start+p.size > start {
			return ErrOverlap
		}
		joinPred = p.start+p.size == start
	}
	joinSucc := false
	if succ != nilNode {
		if t.nodes[succ].start < end {
			return ErrOverlap
		}
		joinSucc = t.nodes[succ].start == end
	}
	t.total += size
	switch {
	case joinPred && joinSucc:
		// Fold the successor into the predecessor.
		sn := t.nodes[succ]
		t.root = t.remove(t.root, sn.start)
		t.release(succ)
		t.nodes[pred].size += size + sn.size
		t.raise(t.nodes[pred].start, t.nodes[pred].size)
	case joinPred:
		t.nodes[pred].size += size
		t.raise(t.nodes[pred].start, t.nodes[pred].size)
	case joinSucc:
		// Moving the successor's start down to start keeps it between its
		// neighbours, so the order holds.
		n := &t.nodes[succ]
		n.start = start
		n.size += size
		t.raise(start, n.size)
	default:
		t.root = t.insert(t.root, t.alloc(start, size))
	}
	return nil
}

// raise records that the node starting at key now has size bytes, more than
// before: every maximum on the path to it becomes at least size.
func (t *Tree) raise(key, size uint64) {
	for n := t.root; n != nilNode; {
		nd := &t.nodes[n]
		nd.maxSize = max(nd.maxSize, size)
		switch {
		case key < nd.start:
			n = nd.left
		case key > nd.start:
			n = nd.right
		default:
			return
		}
	}
	panic("freetree: raising a range that is not in the tree")
}

// FirstFit finds the lowest-addressed free range of at least size bytes,
// takes size bytes from its low end, and returns their start. It returns
// false, and changes nothing, if no range is large enough. size must be > 0.
func (t *Tree) FirstFit(size uint64) (uint64, bool) {
	t.init()
	if size == 0 || t.root == nilNode || t.nodes[t.root].maxSize < size {
		return 0, false
	}
	// Remember the path: shrinking a range changes the maxima above it.
	path := make([]int32, 0, 64)
	n := t.root
	for {
		path = append(path, n)
		nd := &t.nodes[n]
		if l := nd.left; l != nilNode && t.nodes[l].maxSize >= size {
			n = l
			continue
		}
		if nd.size >= size {
			break
		}
		n = nd.right // the subtree invariant guarantees a fit on the right
	}
	start := t.nodes[n].start
	if t.nodes[n].size == size {
		t.root = t.remove(t.root, start)
		t.release(n)
	} else {
		// Taking the low end keeps the node between its neighbours, so
		// the order holds; only the maxima on the path need fixing.
		t.nodes[n].start += size
		t.nodes[n].size -= size
		for i := len(path) - 1; i >= 0; i-- {
			t.update(path[i])
		}
	}
	t.total -= size
	return start, true
}

// Take removes [start, start+size) from the free ranges if it lies inside
// one of them, and reports whether it did; otherwise nothing changes.
func (t *Tree) Take(start, size uint64) bool {
	if size == 0 || start+size < start || !t.Covers(start, size) {
		return false
	}
	pred, _ := t.neighbours(start + 1)
	p := t.nodes[pred]
	t.root = t.remove(t.root, p.start)
	t.release(pred)
	t.total -= p.size
	for _, r := range [][2]uint64{{p.start, start}, {start + size, p.start + p.size}} {
		if r[1] > r[0] {
			if err := t.Add(r[0], r[1]-r[0]); err != nil {
				panic(fmt.Sprintf("freetree: re-adding the rest of a taken range: %v", err))
			}
		}
	}
	return true
}

// Covers reports whether [start, start+size) lies entirely inside one free range.
func (t *Tree) Covers(start, size uint64) bool {
	t.init()
	pred, _ := t.neighbours(start + 1)
	if pred == nilNode {
		return false
	}
	p := t.nodes[pred]
	return p.start <= start && start+size <= p.start+p.size
}

// Overlaps reports whether any byte of [start, start+size) is free.
func (t *Tree) Overlaps(start, size uint64) bool {
	t.init()
	pred, succ := t.neighbours(start)
	if pred != nilNode && t.nodes[pred].start+t.nodes[pred].size > start {
		return true
	}
	return succ != nilNode && t.nodes[succ].start < start+size
}

// Walk calls fn for every free range in address order.
func (t *Tree) Walk(fn func(start, size uint64)) {
	t.init()
	var walk func(n int32)
	walk = func(n int32) {
		if n == nilNode {
			return
		}
		walk(t.nodes[n].left)
		fn(t.nodes[n].start, t.nodes[n].size)
		walk(t.nodes[n].right)
	}
	walk(t.root)
}

// neighbours returns the node with the largest start < key and the node with
// the smallest start >= key.
func (t *Tree) neighbours(key uint64) (pred, succ int32) {
	pred, succ = nilNode, nilNode
	for n := t.root; n != nilNode; {
		if t.nodes[n].start < key {
			pred = n
			n = t.nodes[n].right
		} else {
			succ = n
			n = t.nodes[n].left
		}
	}
	return pred, succ
}

func (t *Tree) alloc(start, size uint64) int32 {
	// xorshift64: a fixed sequence of priorities makes the shape deterministic.
	t.rng ^= t.rng << 13
	t.rng ^= t.rng >> 7
	t.rng ^= t.rng << 17
	nd := node{start: start, size: size, maxSize: size, left: nilNode, right: nilNode, prio: uint32(t.rng >> 32)}
	if k := len(t.free); k > 0 {
		i := t.free[k-1]
		t.free = t.free[:k-1]
		t.nodes[i] = nd
		return i
	}
	t.nodes = append(t.nodes, nd)
	return int32(len(t.nodes) - 1)
}

func (t *Tree) release(i int32) { t.free = append(t.free, i) }

func (t *Tree) update(n int32) {
	nd := &t.nodes[n]
	m := nd.size
	if nd.left != nilNode {
		m = max(m, t.nodes[nd.left].maxSize)
	}
	if nd.right != nilNode {
		m = max(m, t.nodes[nd.right].maxSize)
	}
	nd.maxSize = m
}

// split divides the subtree n into the nodes with start < key and the rest.
func (t *Tree) split(n int32, key uint64) (int32, int32) {
	if n == nilNode {
		return nilNode, nilNode
	}
	if t.nodes[n].start < key {
		l, r := t.split(t.nodes[n].right, key)
		t.nodes[n].right = l
		t.update(n)
		return n, r
	}
	l, r := t.split(t.nodes[n].left, key)
	t.nodes[n].left = r
	t.update(n)
	return l, n
}

// merge joins two subtrees where every start in a is below every start in b.
func (t *Tree) merge(a, b int32) int32 {
	if a == nilNode {
		return b
	}
	if b == nilNode {
		return a
	}
	if t.nodes[a].prio > t.nodes[b].prio {
		t.nodes[a].right = t.merge(t.nodes[a].right, b)
		t.update(a)
		return a
	}
	t.nodes[b].left = t.merge(a, t.nodes[b].left)
	t.update(b)
	return b
}

func (t *Tree) insert(root, n int32) int32 {
	l, r := t.split(root, t.nodes[n].start)
	return t.merge(t.merge(l, n), r)
}

// remove deletes the node whose start is key from the subtree root.
func (t *Tree) remove(root int32, key uint64) int32 {
	if root == nilNode {
		panic("freetree: removing a range that is not in the tree")
	}
	nd := &t.nodes[root]
	switch {
	case key < nd.start:
		nd.left = t.remove(nd.left, key)
	case key > nd.start:
		nd.right = t.remove(nd.right, key)
	default:
		return t.merge(nd.left, nd.right)
	}
	t.update(root)
	return root
}
