package allocators

// Arena is a bump-pointer allocator: allocation aligns the current offset
// and bumps it, O(1); there is no individual free; when the last live block
// is freed the whole arena resets to empty in O(1).
//
// Two shapes, chosen by arena.size:
//
//   - Fixed (arena.size > 0): one buffer of that size, reserved up front, the
//     textbook arena. A request that does not fit in what is left fails.
//   - Growable (arena.size = 0, the default): a list of chunks, as bumpalo
//     keeps them (fitzgen/bumpalo src/lib.rs, as at commit 00256c2992:
//     Bump::alloc_layout_slow, Bump::reset). When a request does not fit in
//     the current chunk a new one is reserved, twice the size of the last (at
//     least arena.chunk, at least the request). On reset every chunk but the
//     current one, the largest, is released, so after a few iterations one
//     chunk holds a whole iteration and the arena stops calling the device.
//     (LLVM's BumpPtrAllocatorImpl, llvm/include/llvm/Support/Allocator.h,
//     chains slabs too but doubles them only every GrowthDelay = 128 slabs,
//     gives a request above SizeThreshold its own slab, and keeps the first
//     slab on Reset.) A fixed arena sized to the whole device would make
//     every comparison read "100% wasted".
//
// Resets: with arena.reset=empty (the default) an arena resets whenever its
// live count returns to zero; with arena.reset=step it resets only at step
// events, and only if nothing is live then (a step with live blocks is
// counted as a pinned reset: long-lived blocks pin an arena).
//
// Persistent and transient arenas (arena.split=first-step): one long-lived
// block pins a single arena for good, and a model's weights are exactly
// that. Inference engines therefore keep weights in a persistent arena and
// activations in a transient one. With the split, allocations made before
// the trace's first step event (the loading phase) go to a persistent arena,
// growable, that resets only if it empties; the rest go to the transient
// arena, to which arena.size and arena.reset apply.
//
// Accounting: a block's in-use size is the request rounded up to the arena's
// alignment. Freed blocks stay unusable until the reset, so they show up as
// free-but-unusable pool memory in TensorFlow's fragmentation metric.
// high_water_bytes is the most bytes the transient arena bumped between two
// resets, alignment gaps included: the size a planned, fixed arena would
// need; persistent_bytes is the same for the persistent arena.
//
// Departures: an arena keeps no record of its blocks, so, like a real one,
// it cannot tell a double free from a free (the checker in sim can); a free
// of an address outside its chunks is refused. Falling back to another
// allocator when the arena is full is not modelled.

import "fmt"

var arenaOptions = []Option{
	{Key: "size", Default: "0", Help: "fixed arena size, reserved up front (0: growable chunks)"},
	{Key: "chunk", Default: "2MiB", Help: "first chunk size of a growable arena"},
	{Key: "align", Default: "16", Help: "default alignment and size rounding of blocks (a power of two)"},
	{Key: "reset", Default: "empty", Help: "when to reset: empty (whenever nothing is live) or step (at step events, if nothing is live)"},
	{Key: "split", Default: "none", Help: "none (one arena) or first-step (allocations before the first step event go to a persistent arena)"},
}

// ArenaConfig configures an Arena.
type ArenaConfig struct {
	SizeBytes   uint64 // fixed size of the (transient) arena; 0 for growable
	ChunkBytes  uint64 // first chunk of a growable arena
	Align       uint64 // default alignment, a power of two
	ResetAtStep bool   // reset only at step events
	Split       bool   // allocations before the first step go to a persistent arena
}

// DefaultArenaConfig returns a growable arena with 2 MiB first chunk and
// 16-byte alignment that resets whenever it is empty.
func DefaultArenaConfig() ArenaConfig {
	return ArenaConfig{ChunkBytes: 2 << 20, Align: 16}
}

func newArenaFromOptions(sp Space, o Options) (Allocator, map[string]any, error) {
	s, err := newSettings("arena", arenaOptions, o)
	if err != nil {
		return nil, nil, err
	}
	cfg := ArenaConfig{
		SizeBytes:   s.Size("size"),
		ChunkBytes:  s.Size("chunk"),
		Align:       s.PowerOfTwo("align"),
		ResetAtStep: s.Choice("reset", "empty", "step") == "step",
		Split:       s.Choice("split", "none", "first-step") == "first-step",
	}
	if cfg.ChunkBytes == 0 {
		s.fail("chunk", s.raw("chunk"), "a size > 0")
	}
	if err := s.Err(); err != nil {
		return nil, nil, err
	}
	a, err := NewArena(sp, cfg)
	if err != nil {
		return nil, nil, err
	}
	return a, s.Effective(), nil
}

type arenaChunk struct{ addr, size uint64 }

// bumpArena is one arena: its chunks, bump offset and counters.
type bumpArena struct {
	fixed     bool
	chunks    []arenaChunk // the last one is current
	off       uint64       // bump offset in the current chunk
	bumped    uint64       // bytes bumped since the last reset, in all chunks
	live      int64
	highWater uint64
	resets    int64
	pinned    int64
}

// The parts of an Arena; a block's Handle says which it came from.
const (
	transient  = 0
	persistent = 1
)

// Arena implements Allocator as a bump-pointer arena, or a persistent and a
// transient one.
type Arena struct {
	space     Space
	cfg       ArenaConfig
	parts     [2]bumpArena
	sawStep   bool
	numAllocs int64
}

var (
	_ Allocator           = (*Arena)(nil)
	_ Stepper             = (*Arena)(nil)
	_ LargestFreeReporter = (*Arena)(nil)
	_ StatsReporter       = (*Arena)(nil)
)

// NewArena returns an arena over sp; a fixed arena reserves its buffer now.
func NewArena(sp Space, cfg ArenaConfig) (*Arena, error) {
	if cfg.Align == 0 || cfg.Align&(cfg.Align-1) != 0 {
		return nil, fmt.Errorf("%w: arena alignment %d is not a power of two", ErrBadOption, cfg.Align)
	}
	a := &Arena{space: sp, cfg: cfg}
	if cfg.SizeBytes > 0 {
		addr, err := sp.Reserve(cfg.SizeBytes)
		if err != nil {
			return nil, fmt.Errorf("reserving a %d-byte arena: %w", cfg.SizeBytes, err)
		}
		a.parts[transient] = bumpArena{fixed: true, chunks: []arenaChunk{{addr, cfg.SizeBytes}}}
	}
	return a, nil
}

// Allocate bumps the offset of the current chunk, growing if allowed.
func (a *Arena) Allocate(size, align uint64) (Block, error) {
	align = max(align, a.cfg.Align)
	n := alignUp(size, a.cfg.Align)
	if n < size {
		return Block{}, ErrOutOfMemory
	}
	part := transient
	if a.cfg.Split && !a.sawStep {
		part = persistent
	}
	p := &a.parts[part]
	if k := len(p.chunks); k > 0 {
		c := p.chunks[k-1]
		start := alignUp(c.addr+p.off, align)
		if start >= c.addr && start-c.addr+n <= c.size && start+n > start {
			return a.bump(p, part, c, start, n), nil
		}
	}
	if p.fixed {
		return Block{}, ErrOutOfMemory
	}
	c, err := a.grow(p, n, align)
	if err != nil {
		return Block{}, err
	}
	return a.bump(p, part, c, alignUp(c.addr, align), n), nil
}

func (a *Arena) bump(p *bumpArena, part int, c arenaChunk, start, n uint64) Block {
	end := start + n - c.addr
	p.bumped += end - p.off
	p.off = end
	p.highWater = max(p.highWater, p.bumped)
	p.live++
	a.numAllocs++
	return Block{Addr: start, Size: n, Handle: uint64(part)}
}

// grow reserves a new current chunk for p able to hold n bytes at the alignment.
func (a *Arena) grow(p *bumpArena, n, align uint64) (arenaChunk, error) {
	need := n
	if align > a.space.Granule() {
		need += align - a.space.Granule()
	}
	size := a.cfg.ChunkBytes
	if k := len(p.chunks); k > 0 {
		size = 2 * p.chunks[k-1].size
	}
	size = max(size, need)
	addr, err := a.space.Reserve(size)
	if err != nil && size > need {
		// The doubled chunk does not fit on the device; try just the request.
		size = need
		addr, err = a.space.Reserve(size)
	}
	if err != nil {
		return arenaChunk{}, err
	}
	c := arenaChunk{addr, size}
	p.chunks = append(p.chunks, c)
	p.off = 0
	return c, nil
}

// Free forgets a block; the memory comes back only at the next reset.
func (a *Arena) Free(b Block) error {
	if b.Handle > persistent {
		return fmt.Errorf("%w: arena has no block at %#x", ErrNotLive, b.Addr)
	}
	p := &a.parts[b.Handle]
	inside := false
	for _, c := range p.chunks {
		if c.addr <= b.Addr && b.Addr-c.addr < c.size {
			inside = true
			break
		}
	}
	if !inside || p.live == 0 {
		return fmt.Errorf("%w: arena has no live block at %#x", ErrNotLive, b.Addr)
	}
	p.live--
	if p.live == 0 && !a.cfg.ResetAtStep {
		a.reset(p)
	}
	return nil
}

// Step marks the end of the loading phase and, with reset=step, resets every
// part that is empty.
func (a *Arena) Step() {
	a.sawStep = true
	if !a.cfg.ResetAtStep {
		return
	}
	for i := range a.parts {
		p := &a.parts[i]
		switch {
		case p.live == 0:
			a.reset(p)
		case i == transient:
			p.pinned++
		}
	}
}

// reset empties p, keeping only its largest chunk if it is growable.
func (a *Arena) reset(p *bumpArena) {
	if len(p.chunks) == 0 {
		return
	}
	p.resets++
	p.off, p.bumped = 0, 0
	if len(p.chunks) == 1 {
		return
	}
	largest := 0
	for i, c := range p.chunks {
		if c.size >= p.chunks[largest].size {
			largest = i
		}
	}
	for i, c := range p.chunks {
		if i == largest {
			continue
		}
		if err := a.space.Release(c.addr, c.size); err != nil {
			panic(fmt.Sprintf("arena: releasing chunk %#x+%d: %v", c.addr, c.size, err))
		}
	}
	p.chunks = append(p.chunks[:0], p.chunks[largest])
}

// LargestFreeBytes is the most left in a current chunk.
func (a *Arena) LargestFreeBytes() uint64 {
	var most uint64
	for i := range a.parts {
		p := &a.parts[i]
		if k := len(p.chunks); k > 0 {
			most = max(most, p.chunks[k-1].size-p.off)
		}
	}
	return most
}

// Stats returns the arena's counters.
func (a *Arena) Stats() map[string]int64 {
	var held uint64
	var chunks int
	for i := range a.parts {
		for _, c := range a.parts[i].chunks {
			held += c.size
		}
		chunks += len(a.parts[i].chunks)
	}
	t, p := &a.parts[transient], &a.parts[persistent]
	st := map[string]int64{
		"num_allocs":       a.numAllocs,
		"high_water_bytes": int64(t.highWater),
		"resets":           t.resets,
		"pinned_resets":    t.pinned,
		"chunks":           int64(chunks),
		"pool_bytes":       int64(held),
	}
	if a.cfg.Split {
		st["persistent_bytes"] = int64(p.highWater)
		st["persistent_resets"] = p.resets
	}
	return st
}
