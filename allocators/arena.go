package allocators

// Arena is a bump-pointer allocator (REFERENCE §3): allocation aligns the
// current offset and bumps it, O(1); there is no individual free; when the
// last live block is freed the whole arena resets to empty in O(1).
//
// Two shapes, chosen by arena.size:
//
//   - Fixed (arena.size > 0): one buffer of that size, reserved up front, the
//     textbook arena. A request that does not fit in what is left fails.
//   - Growable (arena.size = 0, the default): a list of chunks, as in
//     bumpalo or LLVM's BumpPtrAllocator. When a request does not fit in the
//     current chunk a new one is reserved, twice the size of the last (at
//     least arena.chunk, at least the request). On reset every chunk but the
//     largest is released, so after a few iterations one chunk holds a whole
//     iteration and the arena stops calling the device. A fixed arena sized
//     to the whole device would make every comparison read "100% wasted".
//
// Resets: with arena.reset=empty (the default) the arena resets whenever its
// live count returns to zero; with arena.reset=step it resets only at step
// events, and only if nothing is live then (a step with live blocks is
// counted as a pinned reset: long-lived blocks pin an arena).
//
// Accounting: a block's in-use size is the request rounded up to the arena's
// alignment. Freed blocks stay unusable until the reset, so they show up as
// free-but-unusable pool memory in TensorFlow's fragmentation metric.
// high_water_bytes is the most bytes bumped between two resets, alignment
// gaps included: the size a planned, fixed arena would need.
//
// Departure: persistent/transient arena pairs and falling back to another
// allocator when full are not modelled.

import "fmt"

var arenaOptions = []Option{
	{Key: "size", Default: "0", Help: "fixed arena size, reserved up front (0: growable chunks)"},
	{Key: "chunk", Default: "2MiB", Help: "first chunk size of a growable arena"},
	{Key: "align", Default: "16", Help: "default alignment and size rounding of blocks (a power of two)"},
	{Key: "reset", Default: "empty", Help: "when to reset: empty (whenever nothing is live) or step (at step events, if nothing is live)"},
}

// ArenaConfig configures an Arena.
type ArenaConfig struct {
	SizeBytes   uint64 // fixed size; 0 for growable
	ChunkBytes  uint64 // first chunk of a growable arena
	Align       uint64 // default alignment, a power of two
	ResetAtStep bool   // reset only at step events
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

// Arena implements Allocator as a bump-pointer arena.
type Arena struct {
	space  Space
	cfg    ArenaConfig
	chunks []arenaChunk // the last one is current
	off    uint64       // bump offset in the current chunk
	bumped uint64       // bytes bumped since the last reset, in all chunks
	live   int64

	numAllocs, resets, pinnedResets int64
	highWater                       uint64
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
		a.chunks = append(a.chunks, arenaChunk{addr, cfg.SizeBytes})
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
	if k := len(a.chunks); k > 0 {
		c := a.chunks[k-1]
		start := alignUp(c.addr+a.off, align)
		if start >= c.addr && start-c.addr+n <= c.size && start+n > start {
			return a.bump(c, start, n), nil
		}
	}
	if a.cfg.SizeBytes > 0 {
		return Block{}, ErrOutOfMemory
	}
	c, err := a.grow(n, align)
	if err != nil {
		return Block{}, err
	}
	return a.bump(c, alignUp(c.addr, align), n), nil
}

func (a *Arena) bump(c arenaChunk, start, n uint64) Block {
	end := start + n - c.addr
	a.bumped += end - a.off
	a.off = end
	a.highWater = max(a.highWater, a.bumped)
	a.live++
	a.numAllocs++
	return Block{Addr: start, Size: n}
}

// grow reserves a new current chunk able to hold n bytes at the alignment.
func (a *Arena) grow(n, align uint64) (arenaChunk, error) {
	need := n
	if align > a.space.Granule() {
		need += align - a.space.Granule()
	}
	size := a.cfg.ChunkBytes
	if k := len(a.chunks); k > 0 {
		size = 2 * a.chunks[k-1].size
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
	a.chunks = append(a.chunks, c)
	a.off = 0
	return c, nil
}

// Free forgets a block; the memory comes back only at the next reset.
func (a *Arena) Free(b Block) error {
	if a.live == 0 {
		return fmt.Errorf("%w: arena has no live block at %#x", ErrNotLive, b.Addr)
	}
	a.live--
	if a.live == 0 && !a.cfg.ResetAtStep {
		a.reset()
	}
	return nil
}

// Step resets the arena if nothing is live and resets are tied to steps.
func (a *Arena) Step() {
	if !a.cfg.ResetAtStep {
		return
	}
	if a.live > 0 {
		a.pinnedResets++
		return
	}
	a.reset()
}

// reset empties the arena, keeping only the largest chunk of a growable one.
func (a *Arena) reset() {
	a.resets++
	a.off, a.bumped = 0, 0
	if len(a.chunks) <= 1 {
		return
	}
	largest := 0
	for i, c := range a.chunks {
		if c.size >= a.chunks[largest].size {
			largest = i
		}
	}
	for i, c := range a.chunks {
		if i == largest {
			continue
		}
		if err := a.space.Release(c.addr, c.size); err != nil {
			panic(fmt.Sprintf("arena: releasing chunk %#x+%d: %v", c.addr, c.size, err))
		}
	}
	a.chunks = append(a.chunks[:0], a.chunks[largest])
}

// LargestFreeBytes is what is left of the current chunk.
func (a *Arena) LargestFreeBytes() uint64 {
	if len(a.chunks) == 0 {
		return 0
	}
	return a.chunks[len(a.chunks)-1].size - a.off
}

// Stats returns the arena's counters.
func (a *Arena) Stats() map[string]int64 {
	var held uint64
	for _, c := range a.chunks {
		held += c.size
	}
	return map[string]int64{
		"num_allocs":       a.numAllocs,
		"high_water_bytes": int64(a.highWater),
		"resets":           a.resets,
		"pinned_resets":    a.pinnedResets,
		"chunks":           int64(len(a.chunks)),
		"pool_bytes":       int64(held),
	}
}
