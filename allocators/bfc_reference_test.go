package allocators

// A second, deliberately simple model of classic TensorFlow BFC, written
// straight from BFCAllocator's AllocateRawInternal, FindChunkPtr, SplitChunk,
// DeallocateRawInternal, TryToCoalesce, Extend and DeallocateFreeRegions
// (tensorflow/tsl/framework/bfc_allocator.cc as at
// tensorflow/tensorflow@ec9692f2a2) and sharing no code with bfc.go, and a
// differential test that runs both on the same random sequences.
//
// refBFC keeps each bin as a slice sorted by (size, address) and finds a
// chunk the way TF's FindChunkPtr walks its std::set: bin by bin, chunk by
// chunk, the first one large enough. bfc.go finds it with a B-tree
// lower-bound search and a bitmask of non-empty bins; the test shows the two
// always pick the same chunk, and agree on everything else after every
// operation.

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

type refChunk struct {
	ptr, size, requested uint64
	inUse                bool
	bin                  int // -1 while in use
	prev, next           *refChunk
}

type refRegion struct {
	ptr, size uint64
	first     *refChunk
}

// refBFC is classic TF BFC, linear and plain.
type refBFC struct {
	space      Space
	limit      uint64
	growth     bool
	gc         bool
	coalescing bool
	maxFrag    uint64

	bins    [21][]*refChunk // each sorted by (size, ptr)
	regions []*refRegion    // sorted by ptr

	curr         uint64 // curr_region_allocation_bytes
	backpedalled bool   // started_backpedal_

	numAllocs, inUse, peakInUse, largestAlloc int64
	pool, peakPool                            uint64

	seen refCoverage
}

// refCoverage counts the paths a sequence took, so the differential test
// can show it exercised them.
type refCoverage struct {
	OOMs, SlackSplits, Unsplit, Backpedals, BackpedalFails, Joins, GCs int
}

func (c *refCoverage) add(o refCoverage) {
	c.OOMs += o.OOMs
	c.SlackSplits += o.SlackSplits
	c.Unsplit += o.Unsplit
	c.Backpedals += o.Backpedals
	c.BackpedalFails += o.BackpedalFails
	c.Joins += o.Joins
	c.GCs += o.GCs
}

func newRefBFC(sp Space, cfg BFCConfig) *refBFC {
	r := &refBFC{space: sp, limit: cfg.MemoryLimit, growth: cfg.AllowGrowth,
		gc: cfg.GarbageCollection, coalescing: cfg.CoalescingRegions}
	if r.limit == 0 {
		r.limit = sp.Capacity()
	}
	r.maxFrag = 128 << 20
	if cfg.FragmentationFraction > 0 {
		r.maxFrag = uint64(cfg.FragmentationFraction * float64(r.limit))
	}
	if r.growth {
		r.curr = refRound(min(r.limit, 2<<20))
	} else {
		r.curr = refRound(r.limit)
	}
	return r
}

// refRound is RoundedBytes: n up to a multiple of 256.
func refRound(n uint64) uint64 { return (n + 255) / 256 * 256 }

// refBin is BinNumForSize, by counting: bin b holds [256<<b, 256<<(b+1)).
func refBin(n uint64) int {
	b := 0
	for b < 20 && n >= 256<<(b+1) {
		b++
	}
	return b
}

func refLess(a, b *refChunk) bool {
	if a.size != b.size {
		return a.size < b.size
	}
	return a.ptr < b.ptr
}

func (r *refBFC) insert(c *refChunk) {
	b := refBin(c.size)
	c.bin = b
	i := sort.Search(len(r.bins[b]), func(i int) bool { return !refLess(r.bins[b][i], c) })
	r.bins[b] = slices.Insert(r.bins[b], i, c)
}

func (r *refBFC) remove(c *refChunk) {
	bin := r.bins[c.bin]
	i := slices.Index(bin, c)
	if i < 0 {
		panic("refBFC: chunk not in its bin")
	}
	r.bins[c.bin] = slices.Delete(bin, i, i+1)
	c.bin = -1
}

// Allocate is AllocateRawInternal.
func (r *refBFC) Allocate(n uint64) (*refChunk, error) {
	if n == 0 {
		return nil, fmt.Errorf("allocating 0 bytes")
	}
	if n > math.MaxUint64-255 {
		return nil, ErrOutOfMemory
	}
	rounded := refRound(n)
	if c := r.find(rounded, n); c != nil {
		return c, nil
	}
	if r.extend(rounded) {
		if c := r.find(rounded, n); c != nil {
			return c, nil
		}
	}
	if r.deallocateFreeRegions(rounded) && r.extend(rounded) {
		if c := r.find(rounded, n); c != nil {
			return c, nil
		}
	}
	r.seen.OOMs++
	return nil, ErrOutOfMemory
}

// find is FindChunkPtr: a linear walk of the bins from the request's up.
func (r *refBFC) find(rounded, n uint64) *refChunk {
	for b := refBin(rounded); b < 21; b++ {
		for i, c := range r.bins[b] {
			if c.size < rounded {
				continue
			}
			r.bins[b] = slices.Delete(r.bins[b], i, i+1)
			c.bin = -1
			if c.size < 2*rounded && c.size-rounded >= r.maxFrag {
				r.seen.SlackSplits++
			} else if c.size < 2*rounded && c.size > rounded {
				r.seen.Unsplit++
			}
			if c.size >= 2*rounded || c.size-rounded >= r.maxFrag {
				tail := &refChunk{ptr: c.ptr + rounded, size: c.size - rounded, prev: c, next: c.next}
				if c.next != nil {
					c.next.prev = tail
				}
				c.next = tail
				c.size = rounded
				r.insert(tail)
			}
			c.inUse = true
			c.requested = n
			r.numAllocs++
			r.inUse += int64(c.size)
			r.peakInUse = max(r.peakInUse, r.inUse)
			r.largestAlloc = max(r.largestAlloc, int64(c.size))
			return c
		}
	}
	return nil
}

// Free is DeallocateRawInternal: merge the next chunk in, then merge into
// the previous one.
func (r *refBFC) Free(c *refChunk) {
	if !c.inUse {
		panic("refBFC: double free")
	}
	c.inUse = false
	r.inUse -= int64(c.size)
	if n := c.next; n != nil && !n.inUse {
		r.remove(n)
		c.size += n.size
		c.next = n.next
		if n.next != nil {
			n.next.prev = c
		}
	}
	if p := c.prev; p != nil && !p.inUse {
		r.remove(p)
		p.size += c.size
		p.next = c.next
		if c.next != nil {
			c.next.prev = p
		}
		c = p
	}
	r.insert(c)
}

// extend is Extend, with classic TF's single (sticky) float32 backpedal and
// bfcsim's 256-byte step where 0.9× rounds back up.
func (r *refBFC) extend(rounded uint64) bool {
	available := (r.limit - r.pool) / 256 * 256
	if rounded > available {
		return false
	}
	increased := false
	for rounded > r.curr {
		r.curr *= 2
		increased = true
	}
	bytes := min(r.curr, available)
	addr, err := r.space.Reserve(bytes)
	if err != nil && !r.backpedalled {
		r.backpedalled = true
		r.seen.Backpedals++
		var factor float32 = 0.9
		for err != nil {
			next := refRound(uint64(float32(bytes) * factor))
			if next >= bytes {
				next = bytes - 256
			}
			bytes = next
			if bytes < rounded {
				break
			}
			addr, err = r.space.Reserve(bytes)
		}
	}
	if err != nil {
		r.seen.BackpedalFails++
		return false
	}
	if !increased {
		r.curr *= 2
	}
	r.pool += bytes
	r.peakPool = max(r.peakPool, r.pool)

	c := &refChunk{ptr: addr, size: bytes}
	i := 0
	for i < len(r.regions) && r.regions[i].ptr < addr {
		i++
	}
	if r.coalescing && i > 0 && r.regions[i-1].ptr+r.regions[i-1].size == addr {
		r.seen.Joins++
		prev := r.regions[i-1]
		prev.size += bytes
		last := prev.first
		for last.next != nil {
			last = last.next
		}
		last.next, c.prev = c, last
		if !last.inUse {
			r.remove(last)
			last.size += c.size
			last.next = nil
			c = last
		}
		r.insert(c)
		return true
	}
	r.regions = slices.Insert(r.regions, i, &refRegion{ptr: addr, size: bytes, first: c})
	r.insert(c)
	return true
}

// deallocateFreeRegions is DeallocateFreeRegions (garbage collection).
func (r *refBFC) deallocateFreeRegions(rounded uint64) bool {
	if !r.gc {
		return false
	}
	free := func(reg *refRegion) bool {
		for c := reg.first; c != nil; c = c.next {
			if c.inUse {
				return false
			}
		}
		return true
	}
	var total uint64
	for _, reg := range r.regions {
		if free(reg) {
			total += reg.size
		}
	}
	if total == 0 || rounded > r.limit-r.pool+total {
		return false
	}
	r.seen.GCs++
	var kept []*refRegion
	for _, reg := range r.regions {
		if !free(reg) {
			kept = append(kept, reg)
			continue
		}
		for c := reg.first; c != nil; c = c.next {
			r.remove(c)
		}
		if err := r.space.Release(reg.ptr, reg.size); err != nil {
			panic(err)
		}
		r.pool -= reg.size
	}
	r.regions = kept
	return true
}

func (r *refBFC) Stats() map[string]int64 {
	var largest uint64
	for _, bin := range r.bins {
		for _, c := range bin {
			largest = max(largest, c.size)
		}
	}
	return map[string]int64{
		"num_allocs":                   r.numAllocs,
		"bytes_in_use":                 r.inUse,
		"peak_bytes_in_use":            r.peakInUse,
		"largest_alloc_size":           r.largestAlloc,
		"bytes_limit":                  int64(r.limit),
		"pool_bytes":                   int64(r.pool),
		"peak_pool_bytes":              int64(r.peakPool),
		"largest_free_block_bytes":     int64(largest),
		"regions":                      int64(len(r.regions)),
		"curr_region_allocation_bytes": int64(r.curr),
	}
}

func (r *refBFC) Chunks() []Chunk {
	var cs []Chunk
	for i, reg := range r.regions {
		for c := reg.first; c != nil; c = c.next {
			ch := Chunk{Addr: c.ptr, Size: c.size, InUse: c.inUse, Bin: c.bin, Region: i}
			if c.inUse {
				ch.Requested = c.requested
			}
			cs = append(cs, ch)
		}
	}
	return cs
}

// refScenario is one random configuration of the differential test.
type refScenario struct {
	capacity uint64
	cfg      BFCConfig
}

func (s refScenario) String() string {
	return fmt.Sprintf("capacity=%d limit=%d growth=%v gc=%v coalescing=%v frac=%v",
		s.capacity, s.cfg.MemoryLimit, s.cfg.AllowGrowth, s.cfg.GarbageCollection,
		s.cfg.CoalescingRegions, s.cfg.FragmentationFraction)
}

// refPair drives bfc and refBFC side by side, each over its own virtual
// space, and compares them after every operation.
type refPair struct {
	t      testing.TB
	desc   string
	b      *BFC
	r      *refBFC
	bsp    *VirtualSpace
	rsp    *VirtualSpace
	blocks []Block
	chunks []*refChunk
	ops    int
}

func newRefPair(t testing.TB, s refScenario) *refPair {
	bsp := NewVirtualSpace(s.capacity, CostModel{}, FirstFit)
	rsp := NewVirtualSpace(s.capacity, CostModel{}, FirstFit)
	return &refPair{t: t, desc: s.String(), b: NewBFC(bsp, s.cfg), r: newRefBFC(rsp, s.cfg), bsp: bsp, rsp: rsp}
}

func (p *refPair) alloc(n uint64) {
	p.t.Helper()
	p.ops++
	blk, err := p.b.Allocate(n, 0)
	c, rerr := p.r.Allocate(n)
	require.Equal(p.t, rerr == nil, err == nil, "%s: op %d: alloc %d: bfc error %v, reference error %v", p.desc, p.ops, n, err, rerr)
	if err == nil {
		require.Equal(p.t, [2]uint64{c.ptr, c.size}, [2]uint64{blk.Addr, blk.Size},
			"%s: op %d: alloc %d: block (address, size)", p.desc, p.ops, n)
		p.blocks = append(p.blocks, blk)
		p.chunks = append(p.chunks, c)
	} else if n > 0 {
		require.ErrorIs(p.t, err, ErrOutOfMemory)
	}
	p.compare(fmt.Sprintf("alloc %d", n))
}

func (p *refPair) free(i int) {
	p.t.Helper()
	p.ops++
	blk, c := p.blocks[i], p.chunks[i]
	p.blocks = slices.Delete(p.blocks, i, i+1)
	p.chunks = slices.Delete(p.chunks, i, i+1)
	require.NoError(p.t, p.b.Free(blk))
	p.r.Free(c)
	p.compare(fmt.Sprintf("free %#x", blk.Addr))
}

// compare checks cheaply and leaves the readable diff to require.Equal.
func (p *refPair) compare(what string) {
	p.t.Helper()
	rst, bst := p.r.Stats(), p.b.Stats()
	if !maps.Equal(rst, bst) {
		require.Equal(p.t, rst, bst, "%s: op %d (%s): stats", p.desc, p.ops, what)
	}
	if rcs, bcs := p.r.Chunks(), chunksOf(p.b); !slices.Equal(rcs, bcs) {
		require.Equal(p.t, rcs, bcs, "%s: op %d (%s): chunks", p.desc, p.ops, what)
	}
	if p.rsp.Stats() != p.bsp.Stats() {
		require.Equal(p.t, p.rsp.Stats(), p.bsp.Stats(), "%s: op %d (%s): device calls", p.desc, p.ops, what)
	}
	if got := p.b.LargestFreeBytes(); got != uint64(rst["largest_free_block_bytes"]) {
		require.Equal(p.t, uint64(rst["largest_free_block_bytes"]), got, "%s: op %d (%s): LargestFreeBytes", p.desc, p.ops, what)
	}
}

// adversarialSize picks a request size aimed at the split rule's edges,
// relative to a free chunk of the reference: its size, half of it, just
// over half, the size minus the slack threshold, and so on.
func (p *refPair) adversarialSize(rng *rand.Rand) uint64 {
	var free []*refChunk
	for _, bin := range p.r.bins {
		free = append(free, bin...)
	}
	if len(free) == 0 {
		return 1 + rng.Uint64N(4096)
	}
	c := free[rng.IntN(len(free))]
	cands := []uint64{c.size, c.size - 255, c.size / 2, c.size/2 + 1, c.size/2 - 255, c.size + 1}
	if c.size > p.r.maxFrag {
		cands = append(cands, c.size-p.r.maxFrag, c.size-p.r.maxFrag+1, c.size-p.r.maxFrag-256)
	}
	n := cands[rng.IntN(len(cands))]
	if n == 0 || n > c.size+1 {
		n = 1
	}
	return n
}

// randomSize mixes small, medium, large and huge requests; huge ones
// exercise the 128 MiB rule.
func randomSize(rng *rand.Rand) uint64 {
	switch x := rng.IntN(100); {
	case x < 40:
		return 1 + rng.Uint64N(4096)
	case x < 65:
		return 4096 + rng.Uint64N(1<<20)
	case x < 85:
		return 1<<20 + rng.Uint64N(31<<20)
	case x < 95:
		return 32<<20 + rng.Uint64N(168<<20)
	case x < 99:
		return 200<<20 + rng.Uint64N(400<<20)
	default:
		return 256 << rng.IntN(21) // a bin boundary
	}
}

func randomScenario(rng *rand.Rand) refScenario {
	caps := []uint64{8 << 20, 64 << 20, 300 << 20, 1 << 30, 3 << 30}
	s := refScenario{capacity: caps[rng.IntN(len(caps))]}
	s.cfg.AllowGrowth = rng.IntN(3) > 0
	s.cfg.GarbageCollection = rng.IntN(2) == 0
	s.cfg.CoalescingRegions = rng.IntN(2) == 0
	s.cfg.FragmentationFraction = []float64{0, 0, 0.01, 0.2}[rng.IntN(4)]
	switch rng.IntN(4) {
	case 0: // a limit above the device: the first Extend backpedals
		s.cfg.MemoryLimit = s.capacity + s.capacity/2 + uint64(rng.IntN(1<<20))
	case 1: // below the device, not a multiple of 256
		s.cfg.MemoryLimit = s.capacity/2 + uint64(rng.IntN(1<<20))
	}
	return s
}

// runRefSequence performs ops random operations: allocations of random and
// adversarial sizes, and frees of random live blocks.
func runRefSequence(t testing.TB, rng *rand.Rand, s refScenario, ops int) refCoverage {
	p := newRefPair(t, s)
	for range ops {
		switch x := rng.IntN(100); {
		case x < 45 || len(p.blocks) == 0:
			p.alloc(randomSize(rng))
		case x < 55:
			p.alloc(p.adversarialSize(rng))
		case x < 56:
			p.alloc(0)
		default:
			p.free(rng.IntN(len(p.blocks)))
		}
	}
	for len(p.blocks) > 0 {
		p.free(rng.IntN(len(p.blocks)))
	}
	require.Zero(t, p.b.Stats()["bytes_in_use"])
	return p.r.seen
}

// TestBFCMatchesLinearReference runs many seeded random sequences through
// bfc and the linear reference and requires the same result, block, stats,
// chunk list and device calls after every operation.
func TestBFCMatchesLinearReference(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 40
	}
	var seen refCoverage
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 0xbfc))
		s := randomScenario(rng)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			seen.add(runRefSequence(t, rng, s, 400))
		})
	}
	t.Logf("paths taken: %+v", seen)
	for name, n := range map[string]int{
		"OOM": seen.OOMs, "split for the slack threshold": seen.SlackSplits,
		"chunk handed out with slack": seen.Unsplit, "backpedal": seen.Backpedals,
		"refused Extend": seen.BackpedalFails, "region join": seen.Joins, "garbage collection": seen.GCs,
	} {
		require.Positive(t, n, "no sequence exercised: %s", name)
	}
}

// TestBFCMatchesLinearReferenceBackpedal aims at Extend: devices smaller
// than the limit (the first region backpedals, later ones cannot), a device
// just large enough, and garbage collection that must give regions back
// before a larger one fits.
func TestBFCMatchesLinearReferenceBackpedal(t *testing.T) {
	var seen refCoverage
	for i, s := range []refScenario{
		{capacity: 100 << 20, cfg: BFCConfig{MemoryLimit: 1 << 30}},
		{capacity: 100 << 20, cfg: BFCConfig{MemoryLimit: 1 << 30, AllowGrowth: true}},
		{capacity: 100 << 20, cfg: BFCConfig{MemoryLimit: 1 << 30, AllowGrowth: true, GarbageCollection: true}},
		{capacity: 100 << 20, cfg: BFCConfig{MemoryLimit: 1 << 30, AllowGrowth: true, CoalescingRegions: true}},
		{capacity: 16 << 20, cfg: BFCConfig{AllowGrowth: true, GarbageCollection: true}},
		{capacity: 16 << 20, cfg: BFCConfig{AllowGrowth: true, GarbageCollection: true, CoalescingRegions: true}},
		{capacity: 2560, cfg: BFCConfig{MemoryLimit: 1 << 20, AllowGrowth: true}},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			for seed := range uint64(20) {
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				p := newRefPair(t, s)
				for range 300 {
					if rng.IntN(100) < 55 || len(p.blocks) == 0 {
						// Sizes up to a quarter of the device, so regions
						// fill and new ones are asked for.
						p.alloc(1 + rng.Uint64N(s.capacity/4))
					} else {
						p.free(rng.IntN(len(p.blocks)))
					}
				}
				seen.add(p.r.seen)
			}
		})
	}
	t.Logf("paths taken: %+v", seen)
	require.Positive(t, seen.Backpedals)
	require.Positive(t, seen.BackpedalFails)
	require.Positive(t, seen.GCs)
}

// FuzzBFCMatchesLinearReference: the first bytes choose the configuration,
// each following 3-byte group an operation.
func FuzzBFCMatchesLinearReference(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 1, 0, 0})
	f.Add([]byte{0xff, 0x11, 0x20, 0x05, 0x80, 0x33, 0x80, 0x01, 0x90, 0xa0, 0x20, 0x12, 0x9f})
	f.Add([]byte{0x5a, 0x33, 0x01, 0x02, 0x03, 0x41, 0x42, 0x43, 0x81, 0x82, 0x83, 0xc1, 0xc2, 0xc3})
	seq := make([]byte, 2+3*200)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range seq {
		seq[i] = byte(rng.Uint32())
	}
	f.Add(seq)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		cfgByte, limByte := data[0], data[1]
		caps := []uint64{2 << 20, 8 << 20, 64 << 20, 512 << 20}
		s := refScenario{capacity: caps[cfgByte&3]}
		s.cfg.AllowGrowth = cfgByte&4 != 0
		s.cfg.GarbageCollection = cfgByte&8 != 0
		s.cfg.CoalescingRegions = cfgByte&16 != 0
		s.cfg.FragmentationFraction = []float64{0, 0.01, 0.2, 0.5}[cfgByte>>5&3]
		switch limByte & 3 {
		case 1:
			s.cfg.MemoryLimit = s.capacity * uint64(2+limByte>>2&7) / 2
		case 2:
			s.cfg.MemoryLimit = s.capacity/2 + uint64(limByte)*37
		}
		p := newRefPair(t, s)
		for ops := data[2:]; len(ops) >= 3 && p.ops < 2000; ops = ops[3:] {
			kind, arg := ops[0], uint64(binary.LittleEndian.Uint16(ops[1:3]))
			switch {
			case kind < 0x80 || len(p.blocks) == 0:
				// Size: a 16-bit mantissa scaled by up to 2^15.
				p.alloc(arg << (kind & 15))
			case kind < 0xa0:
				p.alloc(p.adversarialSize(rand.New(rand.NewPCG(arg, uint64(kind)))))
			default:
				p.free(int(arg % uint64(len(p.blocks))))
			}
		}
		for len(p.blocks) > 0 {
			p.free(len(p.blocks) - 1)
		}
		if got := p.b.Stats(); got["bytes_in_use"] != 0 {
			t.Fatalf("bytes_in_use %d after freeing everything", got["bytes_in_use"])
		}
	})
}
