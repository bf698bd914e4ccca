package bintree

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/btree"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// model is a sorted slice: the obvious ordered set the tree must agree with.
type model []Key

func (m model) find(k Key) (int, bool) {
	return slices.BinarySearchFunc(m, k, func(a, b Key) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
}

// check walks t and fails unless it holds exactly m, in order, with every
// node in bounds: leaves non-empty (but for an empty root), every key at
// or above its bound and below the next child's, every leaf at one depth,
// and a root with children having at least two.
func check(t *testing.T, tr *Tree, m model) {
	t.Helper()
	if tr.Len() != len(m) {
		t.Fatalf("Len %d, want %d", tr.Len(), len(m))
	}
	var got []Key
	var walk func(n *node, depth int, lo, hi *Key)
	walk = func(n *node, depth int, lo, hi *Key) {
		if n.kids == nil {
			if depth != tr.depth {
				t.Fatalf("a leaf at depth %d, the tree's is %d", depth, tr.depth)
			}
			if n.n == 0 && n != tr.root {
				t.Fatal("an empty leaf that is not the root")
			}
			for _, k := range n.keys[:n.n] {
				if lo != nil && less(k, *lo) || hi != nil && !less(k, *hi) {
					t.Fatalf("key %v outside its child's bounds [%v, %v)", k, lo, hi)
				}
			}
			got = append(got, n.keys[:n.n]...)
			return
		}
		if n.n == 0 || n == tr.root && n.n < 2 {
			t.Fatalf("an inner node of %d children (root: %v)", n.n, n == tr.root)
		}
		for i := range n.n {
			clo, chi := lo, hi
			if i > 0 {
				clo = &n.keys[i]
				if lo != nil && less(*clo, *lo) || hi != nil && !less(*clo, *hi) {
					t.Fatalf("a child's bound %v outside its parent's bounds [%v, %v)", *clo, lo, hi)
				}
			}
			if i+1 < n.n {
				chi = &n.keys[i+1]
			}
			walk(n.kids[i], depth+1, clo, chi)
		}
		for _, k := range n.kids[n.n:] {
			if k != nil {
				t.Fatal("a child past the node's count")
			}
		}
	}
	if tr.root != nil {
		walk(tr.root, 0, nil, nil)
	}
	if !slices.Equal(got, m) {
		t.Fatalf("the tree holds %d keys, not the model's %d in order", len(got), len(m))
	}
}

// TestAgainstModel runs random operations on a tree and a sorted slice and
// compares every answer, and the whole tree now and then. Sizes and
// addresses are drawn from small ranges so that equal sizes, repeated
// inserts and deletes of absent keys are common; phases of mostly inserts
// and mostly deletes grow the tree several levels deep and empty it again.
func TestAgainstModel(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var tr Tree
		var m model
		sizes, ptrs := 1+rng.IntN(40), 1+rng.IntN(5000)
		key := func() Key {
			return Key{Size: uint64(rng.IntN(sizes)) * 256, Ptr: uint64(rng.IntN(ptrs)) * 256, H: int32(rng.IntN(1 << 20))}
		}
		for step := range 40_000 {
			grow := (step/5000)%2 == 0
			switch op := rng.IntN(10); {
			case op < 4 && grow || op < 2:
				k := key()
				i, found := m.find(k)
				if tr.Insert(k) == found {
					t.Fatalf("seed %d step %d: Insert(%v) = %v with the key there: %v", seed, step, k, !found, found)
				}
				if !found {
					m = slices.Insert(m, i, k)
				}
			case op < 7:
				k := key()
				if len(m) > 0 && rng.IntN(2) == 0 {
					k = m[rng.IntN(len(m))] // a key that is there
					k.H = 0                 // found by size and address alone
				}
				i, found := m.find(k)
				got, ok := tr.Delete(k)
				if ok != found || found && got != m[i] {
					t.Fatalf("seed %d step %d: Delete(%v) = %v, %v", seed, step, k, got, ok)
				}
				if found {
					m = slices.Delete(m, i, i+1)
				}
			case op < 8:
				got, ok := tr.DeleteMin()
				if ok != (len(m) > 0) || ok && got != m[0] {
					t.Fatalf("seed %d step %d: DeleteMin() = %v, %v", seed, step, got, ok)
				}
				if ok {
					m = m[1:]
				}
			case op < 9:
				k := key()
				if rng.IntN(2) == 0 {
					k.Ptr = 0 // as bfc asks: the least chunk of at least a size
				}
				i, _ := m.find(k)
				got, ok := tr.Ceil(k)
				if ok != (i < len(m)) || ok && got != m[i] {
					t.Fatalf("seed %d step %d: Ceil(%v) = %v, %v", seed, step, k, got, ok)
				}
			default:
				lo, okLo := tr.Min()
				hi, okHi := tr.Max()
				if okLo != (len(m) > 0) || okHi != okLo || okLo && (lo != m[0] || hi != m[len(m)-1]) {
					t.Fatalf("seed %d step %d: Min, Max = %v %v, %v %v", seed, step, lo, okLo, hi, okHi)
				}
			}
			if step%997 == 0 {
				check(t, &tr, m)
			}
		}
		check(t, &tr, m)
	}
}

// TestDeepThenEmpty fills a tree to several levels, checks it, and deletes
// every key from the middle out, emptying whole subtrees in the middle
// first, leaving an empty tree that takes keys again.
func TestDeepThenEmpty(t *testing.T) {
	var tr Tree
	const n = 100_000
	all := make(model, n)
	for i := range all {
		all[i] = Key{Size: uint64(i%977) * 256, Ptr: uint64(i) * 256, H: int32(i)}
		require.True(t, tr.Insert(all[i]))
	}
	slices.SortFunc(all, func(a, b Key) int { return cmp.Or(cmp.Compare(a.Size, b.Size), cmp.Compare(a.Ptr, b.Ptr)) })
	check(t, &tr, all)
	require.GreaterOrEqual(t, tr.depth, 3, "100,000 keys in nodes of 32 are at least three levels deep")
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(abs(a-n/2), abs(b-n/2)) })
	deleted := make([]bool, n)
	for j, i := range idx {
		if _, ok := tr.Delete(all[i]); !ok {
			t.Fatalf("Delete(%v): not found", all[i])
		}
		deleted[i] = true
		if j%10_007 == 0 {
			var m model
			for i, k := range all {
				if !deleted[i] {
					m = append(m, k)
				}
			}
			check(t, &tr, m)
		}
	}
	check(t, &tr, nil)
	require.Zero(t, tr.depth)
	require.True(t, tr.Insert(Key{Size: 256, Ptr: 1}))
	check(t, &tr, model{{Size: 256, Ptr: 1}})
}

func abs(x int) int { return max(x, -x) }

// TestFIFO takes the least key and adds a new greatest one, over and over,
// as a bin whose chunks are freed in address order and reused from the
// bottom does: whole subtrees empty on the left and grow on the right, so
// emptied inner nodes are reused, as inner nodes and as leaves.
func TestFIFO(t *testing.T) {
	var tr Tree
	var m model
	next := uint64(0)
	add := func() {
		k := Key{Size: 256, Ptr: next * 256, H: int32(next)}
		next++
		require.True(t, tr.Insert(k))
		m = append(m, k)
	}
	for range 20_000 {
		add()
	}
	for step := range 100_000 {
		got, ok := tr.DeleteMin()
		if !ok || got != m[0] {
			t.Fatalf("step %d: DeleteMin() = %v, %v; want %v", step, got, ok, m[0])
		}
		m = m[1:]
		add()
		if step%5000 == 0 {
			check(t, &tr, m)
		}
	}
	check(t, &tr, m)
}

// FuzzTree reads operations from the input, three bytes each (an op, a
// size, an address, both from small ranges so that keys collide), applies
// them to a tree and a sorted slice, and compares every answer and, at
// the end, the whole tree.
func FuzzTree(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 1, 2, 1, 1, 1, 2, 0, 0, 3, 0, 0})
	f.Add(bytes.Repeat([]byte{0, 7, 3, 0, 9, 4, 4, 0, 0}, 200))
	// A tree of several leaves, then a ceiling past the end of each size's
	// keys (found in a later leaf), then half of it deleted and asked again.
	var grow []byte
	for size := range 16 {
		for ptr := range 40 {
			grow = append(grow, 0, byte(size), byte(ptr*6))
		}
	}
	var ask []byte
	for size := range 16 {
		ask = append(ask, 4, byte(size), 255)
	}
	var thin []byte
	for size := range 16 {
		for ptr := range 30 {
			thin = append(thin, 2, byte(size), byte(ptr*6))
		}
	}
	f.Add(slices.Concat(grow, ask, thin, ask, []byte{3, 0, 0, 3, 0, 0}))
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tr Tree
		var m model
		for len(ops) >= 3 {
			op, k := ops[0]%5, Key{Size: uint64(ops[1]%16) * 256, Ptr: uint64(ops[2]) * 256}
			ops = ops[3:]
			i, found := m.find(k)
			switch op {
			case 0, 1: // inserts weigh double, so that trees grow
				if tr.Insert(k) == found {
					t.Fatalf("Insert(%v) with the key there: %v", k, found)
				}
				if !found {
					m = slices.Insert(m, i, k)
				}
			case 2:
				got, ok := tr.Delete(k)
				if ok != found || ok && got != m[i] {
					t.Fatalf("Delete(%v) = %v, %v", k, got, ok)
				}
				if found {
					m = slices.Delete(m, i, i+1)
				}
			case 3:
				got, ok := tr.DeleteMin()
				if ok != (len(m) > 0) || ok && got != m[0] {
					t.Fatalf("DeleteMin() = %v, %v", got, ok)
				}
				if ok {
					m = m[1:]
				}
			case 4:
				got, ok := tr.Ceil(k)
				if ok != (i < len(m)) || ok && got != m[i] {
					t.Fatalf("Ceil(%v) = %v, %v", k, got, ok)
				}
			}
		}
		check(t, &tr, m)
	})
}

// nodes counts the nodes of t.
func nodes(t *Tree) int {
	var count func(n *node) int
	count = func(n *node) int {
		c := 1
		if n.kids != nil {
			for _, k := range n.kids[:n.n] {
				c += count(k)
			}
		}
		return c
	}
	if t.root == nil {
		return 0
	}
	return count(t.root)
}

// TestSparseDeletes builds trees by orders of inserts and deletes meant to
// leave nodes nearly empty, and requires that the nodes stay few beside
// the keys held, and the tree shallow beside its size: a bin's tree must
// not cost many times its chunks whatever the trace.
func TestSparseDeletes(t *testing.T) {
	key := func(i int) Key { return Key{Size: 256, Ptr: uint64(i) * 256, H: int32(i)} }
	for _, tc := range []struct {
		name string
		run  func(tr *Tree, n int)
	}{
		// Ascending inserts, then every key but each 32nd deleted.
		{"thin-after", func(tr *Tree, n int) {
			for i := range n {
				tr.Insert(key(i))
			}
			for i := range n {
				if i%32 != 0 {
					tr.Delete(key(i))
				}
			}
		}},
		// Ascending inserts, deleting after each 32 all but one of them.
		{"thin-as-it-grows", func(tr *Tree, n int) {
			for i := range n {
				tr.Insert(key(i))
				if i%32 == 31 {
					for j := i - 30; j <= i; j++ {
						tr.Delete(key(j))
					}
				}
			}
		}},
		// Ascending inserts, after each split deleting all but the least
		// key of the leaf the split left behind: without merging, this
		// leaves one key a leaf.
		{"thin-each-split", func(tr *Tree, n int) {
			seen := 0
			for i := range n {
				tr.Insert(key(i))
				if c := nodes(tr); c != seen {
					seen = c
					// The full leaf [i-32, i-1] split into [i-32, i-17]
					// and [i-16, i].
					for j := i - 31; j <= i-17; j++ {
						if j >= 0 {
							tr.Delete(key(j))
						}
					}
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr Tree
			tc.run(&tr, 20_000)
			require.Positive(t, tr.Len())
			assert.LessOrEqual(t, nodes(&tr), tr.Len()/2+2, "nodes for %d keys", tr.Len())
			assert.LessOrEqual(t, tr.depth, 4, "depth for %d keys", tr.Len())
			var m model
			for k, ok := tr.Min(); ok; k, ok = tr.Ceil(Key{Size: k.Size, Ptr: k.Ptr + 1}) {
				m = append(m, k)
			}
			check(t, &tr, m)
		})
	}
}

// The benchmarks compare the tree with google/btree, which bfc used
// before, on a bin's work: a chunk taken from the set and another put in.
func benchKeys(n int) []Key {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{Size: uint64(1+rng.IntN(64)) * 256, Ptr: uint64(rng.Uint32()) << 8, H: int32(i)}
	}
	return keys
}

func BenchmarkChurn(b *testing.B) {
	const n = 100_000
	keys := benchKeys(2 * n)
	b.Run("bintree", func(b *testing.B) {
		var tr Tree
		for _, k := range keys[:n] {
			tr.Insert(k)
		}
		i := 0
		for b.Loop() {
			out, in := keys[i%(2*n)], keys[(i+n)%(2*n)]
			tr.Delete(out)
			tr.Insert(in)
			if k, ok := tr.Ceil(Key{Size: in.Size}); !ok || k.Size < in.Size {
				b.Fatal("no ceiling")
			}
			i++
		}
	})
	b.Run("google-btree", func(b *testing.B) {
		tr := btree.NewG(32, less)
		for _, k := range keys[:n] {
			tr.ReplaceOrInsert(k)
		}
		i := 0
		for b.Loop() {
			out, in := keys[i%(2*n)], keys[(i+n)%(2*n)]
			tr.Delete(out)
			tr.ReplaceOrInsert(in)
			found := false
			tr.AscendGreaterOrEqual(Key{Size: in.Size}, func(k Key) bool { found = true; return false })
			if !found {
				b.Fatal("no ceiling")
			}
			i++
		}
	})
}
