package allocators

// Aligned is TBB's cache_aligned_allocator over a base allocator: every
// block starts on its own cache-line pair, so two blocks never share a line
// and threads writing them never false-share. The model is oneTBB's
// tbb::cache_aligned_allocator (include/oneapi/tbb/cache_aligned_allocator.h,
// as at oneapi-src/oneTBB@49e08aac08) and, behind it, cache_aligned_allocate
// and std_cache_aligned_allocate in src/tbb/allocator.cpp (as at
// oneapi-src/oneTBB@05b1dd0789): the path taken when the tbbmalloc library
// is not loaded and malloc is the base.
//
// Allocate(n): ask the base allocator for n + L bytes (L = aligned.line,
// 128 by default: TBB's nfs_size, "no false sharing", is 128, and its
// allocate promises a start on a "cache/sector line": 128 bytes covers the
// pair of 64-byte lines that Intel's spatial prefetcher fetches together);
// hand out (base + L) & -L, the first line boundary strictly after base, and
// store base in the word just before it. Free: read base back and free it.
//
// The stored word is modelled, not written: the base block is kept in a
// table indexed by the block's Handle (memory in the virtual space does not
// exist to be written). The cost is the same: up to L extra bytes per
// block, all counted as in use.
//
// Departures: cache_aligned_allocator has no per-request alignment; a
// request aligned beyond L here uses its own alignment as the line for that
// block, as TBB's cache_aligned_resource does. A request of 0 bytes never
// reaches an allocator in bfcsim (cache_aligned_allocate would allocate 1
// byte).
//
// The base allocator is aligned.base (default naive: the device or system
// allocator, as malloc is for TBB); options for it are given as
// aligned.base.KEY=VALUE.

import (
	"fmt"
	"strings"
)

var alignedOptions = []Option{
	{Key: "line", Default: "128", Help: "cache-line pair size L each block is padded by and aligned to (a power of two)"},
	{Key: "base", Default: "naive", Help: "the allocator underneath (naive, bfc or arena); its options as aligned.base.KEY=VALUE"},
}

// Aligned implements Allocator as TBB's cache-aligned allocator.
type Aligned struct {
	base  Allocator
	line  uint64
	table []alignedSlot // base blocks, by the low 32 bits of Handle
	free  []uint32
}

// alignedSlot holds the base block of one aligned block, and a generation
// that tells a stale Handle (its slot since reused) from the live one.
type alignedSlot struct {
	base Block
	gen  uint32
	live bool
}

var (
	_ Allocator           = (*Aligned)(nil)
	_ LargestFreeReporter = (*Aligned)(nil)
	_ StatsReporter       = (*Aligned)(nil)
	_ Stepper             = (*Aligned)(nil)
	_ Extenter            = (*Aligned)(nil)
)

// NewAligned returns a cache-aligned allocator with line size line over base.
func NewAligned(base Allocator, line uint64) (*Aligned, error) {
	if line == 0 || line&(line-1) != 0 {
		return nil, fmt.Errorf("%w: aligned line %d is not a power of two", ErrBadOption, line)
	}
	return &Aligned{base: base, line: line}, nil
}

func newAlignedFromOptions(sp Space, o Options) (Allocator, map[string]any, error) {
	own, baseOpts := Options{}, Options{}
	for k, v := range o {
		if rest, ok := strings.CutPrefix(k, "base."); ok {
			baseOpts[rest] = v
		} else {
			own[k] = v
		}
	}
	s, err := newSettings("aligned", alignedOptions, own)
	if err != nil {
		return nil, nil, err
	}
	line := s.PowerOfTwo("line")
	baseName := s.Choice("base", "naive", "bfc", "arena")
	if err := s.Err(); err != nil {
		return nil, nil, err
	}
	base, baseEff, err := New(baseName, sp, baseOpts)
	if err != nil {
		return nil, nil, fmt.Errorf("aligned.base: %w", err)
	}
	a, err := NewAligned(base, line)
	if err != nil {
		return nil, nil, err
	}
	eff := s.Effective()
	for k, v := range baseEff {
		eff["base."+k] = v
	}
	return a, eff, nil
}

// Extent returns the base block: the padding before b.Addr is part of it.
func (a *Aligned) Extent(b Block) (addr, size uint64) {
	base := a.table[uint32(b.Handle)].base
	if e, ok := a.base.(Extenter); ok {
		return e.Extent(base)
	}
	return base.Addr, base.Size
}

// ExtentIsRegion says each block is a reservation of its own, when the
// base allocator's are.
func (a *Aligned) ExtentIsRegion() bool {
	e, ok := a.base.(ExtentIsRegion)
	return ok && e.ExtentIsRegion()
}

// Allocate pads the request by one line and aligns inside the base block.
func (a *Aligned) Allocate(size, align uint64) (Block, error) {
	line := max(a.line, align)
	n := size + line
	if n < size {
		return Block{}, ErrOutOfMemory
	}
	b, err := a.base.Allocate(n, 0)
	if err != nil {
		return Block{}, err
	}
	addr := (b.Addr + line) &^ (line - 1)
	var i uint32
	if k := len(a.free); k > 0 {
		i = a.free[k-1]
		a.free = a.free[:k-1]
	} else {
		i = uint32(len(a.table))
		a.table = append(a.table, alignedSlot{})
	}
	slot := &a.table[i]
	slot.base, slot.live = b, true
	slot.gen++
	return Block{Addr: addr, Size: b.Size, Handle: uint64(i) | uint64(slot.gen)<<32}, nil
}

// Free frees the base block stored for b.
func (a *Aligned) Free(b Block) error {
	i, gen := uint32(b.Handle), uint32(b.Handle>>32)
	if uint64(i) >= uint64(len(a.table)) || !a.table[i].live || a.table[i].gen != gen {
		return fmt.Errorf("%w: aligned has no block at %#x", ErrNotLive, b.Addr)
	}
	slot := &a.table[i]
	if err := a.base.Free(slot.base); err != nil {
		return err
	}
	slot.base, slot.live = Block{}, false
	a.free = append(a.free, i)
	return nil
}

// Step passes step events to the base allocator.
func (a *Aligned) Step() {
	if s, ok := a.base.(Stepper); ok {
		s.Step()
	}
}

// LargestFreeBytes is the base allocator's.
func (a *Aligned) LargestFreeBytes() uint64 {
	if r, ok := a.base.(LargestFreeReporter); ok {
		return r.LargestFreeBytes()
	}
	return 0
}

// Stats are the base allocator's, if it keeps any.
func (a *Aligned) Stats() map[string]int64 {
	if r, ok := a.base.(StatsReporter); ok {
		return r.Stats()
	}
	return map[string]int64{}
}
