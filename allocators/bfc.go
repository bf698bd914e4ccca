package allocators

// BFC is TensorFlow's best-fit-with-coalescing allocator, modelled on the
// classic BFCAllocator: tensorflow/core/common_runtime/bfc_allocator.cc, later
// tensorflow/tsl/framework/bfc_allocator.{h,cc}, read as at
// tensorflow/tensorflow@ec9692f2a2 (the .cc) and @f8595a393d (the .h). Its
// AllocateRawInternal, FindChunkPtr, SplitChunk, DeallocateRawInternal,
// TryToCoalesce, Extend, DeallocateFreeRegions and GetFragmentation are the
// yardstick; today's copy is xla/tsl/framework/bfc_allocator.cc in
// openxla/xla. docs/allocators/bfc.md lists the sources.
//
// Strategy. The allocator holds a pool of regions reserved from the device.
// Each region is cut into chunks, linked in address order; a chunk is in use
// or free, and free chunks sit in one of 21 bins by size: bin b holds sizes
// [256<<b, 256<<(b+1)), bin 20 everything from 256 MiB up. Inside a bin chunks
// are ordered by (size, address).
//
// Allocate(n):
//  1. Round n up to a multiple of 256 (kMinAllocationSize).
//  2. Search the bins from BinNumForSize(rounded) up; in each, the first
//     chunk in (size, address) order with size >= rounded wins. That is true
//     best fit with the lowest address breaking ties. The block takes the
//     chunk's low end.
//  3. Split the chunk if it is at least twice the request, or if the tail
//     would be at least 128 MiB (fragmentation_fraction × memory limit when
//     that option is set); the tail becomes a free chunk. An unsplit chunk
//     is handed out whole and its slack counts as in use.
//  4. If nothing fits, Extend the pool by a new region and search again;
//     then, with garbage_collection, release every wholly free region,
//     Extend, and search once more; otherwise fail.
//
// Free(block): mark the chunk free, merge it with the next chunk if that is
// free, then into the previous chunk if that is free, and bin the survivor.
// Memory goes back to the device only through garbage collection.
//
// Extend: region sizes start at 2 MiB with allow_growth (else the whole
// memory limit) and double after every region that did not need enlarging to
// fit its request. A failed device reservation backpedals once per allocator
// lifetime, retrying at 90% of the size until it would be smaller than the
// request. With coalescing_regions, a region reserved right after another
// joins its chunk chain, as with TF's virtual-memory sub-allocator.
//
// Data structures: chunks live in a paged table and are named by index (TF's
// ChunkHandle), with recycled indexes; each bin is a B+ tree keyed by
// (size, address) (internal/bintree), so the search in step 2 is a
// lower-bound lookup instead of TF's linear walk, with the same result; a
// bitmask of non-empty bins skips empty ones. Allocate and Free are
// O(log chunks) plus, for Allocate, a scan of at most 21 bin masks.
//
// Departures from TF, all documented in docs/allocators.md:
//   - A Free names its chunk by the block's Handle instead of looking the
//     pointer up in a region map; the effect is the same.
//   - Requested alignments above 256 bytes are ignored, as in classic TF
//     (MaxAlign reports 256).
//   - Classic TF's backpedal loop never ends when 0.9 × the size rounds back
//     up to the same size (sizes below 10 × 256, up to 2304 bytes) and the
//     device keeps refusing; bfcsim then steps down by 256 bytes, as XLA's
//     BFCAllocator::Extend does now (openxla/xla@00df9eefeb).
//   - The retry-on-failure wait, the timing-counter (freed_before) mode and
//     newer TF's alignment-aware placement are not modelled.

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/bfcsim/bfcsim/allocators/bfcstate"
	"github.com/bfcsim/bfcsim/allocators/internal/bintree"
	"github.com/bfcsim/bfcsim/internal/paged"
)

// Constants from the reference, with its names.
const (
	bfcMinAllocationBits = bfcstate.MinAllocationBits // kMinAllocationBits
	bfcMinAllocationSize = 1 << bfcMinAllocationBits  // kMinAllocationSize: 256
	bfcNumBins           = bfcstate.NumBins           // kNumBins
	// bfcMaxInternalFrag is the slack above which a chunk is always split,
	// however small the request: 128 MiB, TF's default.
	bfcMaxInternalFrag = 128 << 20
	// bfcGrowthStart is the first region size with allow_growth: 2 MiB.
	bfcGrowthStart = 2 << 20
	// bfcBackpedalFactor shrinks a refused region request (kBackpedalFactor).
	// TF declares it a float, so the product is computed in single
	// precision; from about 500 MiB up that differs from double precision
	// after rounding to 256 bytes, and bfcsim follows TF.
	bfcBackpedalFactor float32 = 0.9
)

const noChunk = -1

// BFCConfig is the BFC allocator's configuration. Its zero value is not
// useful; start from DefaultBFCConfig.
type BFCConfig struct {
	// MemoryLimit caps the pool (TF's total_memory); 0 means the space's
	// capacity. A limit above the capacity is kept, as in TF when the
	// configured limit exceeds the device's free memory: the device refuses
	// the region and Extend backpedals. Limits above MaxCapacity are
	// lowered to it, so that doubling the region size cannot overflow.
	MemoryLimit uint64
	// AllowGrowth starts with a 2 MiB region and grows on demand; without it
	// the first region is the whole memory limit.
	AllowGrowth bool
	// GarbageCollection releases wholly free regions when an allocation
	// would otherwise fail, then grows again.
	GarbageCollection bool
	// FragmentationFraction, when > 0, replaces the 128 MiB split threshold
	// with FragmentationFraction × MemoryLimit.
	FragmentationFraction float64
	// CoalescingRegions joins a region to the one right before it in the
	// address space, as TF's virtual-memory GPU sub-allocator does.
	CoalescingRegions bool
}

// DefaultBFCConfig returns tsl::BFCAllocator's defaults: growth on, garbage
// collection off, the 128 MiB split rule, non-coalescing regions.
func DefaultBFCConfig() BFCConfig {
	return BFCConfig{AllowGrowth: true}
}

// BFC presets: the defaults of TF's two front doors to the allocator. A
// preset only changes defaults; an option set explicitly still wins.
const (
	// BFCPresetTSL is tsl::BFCAllocator::Options' defaults: growth on,
	// garbage collection off.
	BFCPresetTSL = "tsl"
	// BFCPresetTFGPU is what TensorFlow's GPUBFCAllocator uses unless told
	// otherwise: the whole memory limit up front (GPUOptions.allow_growth
	// defaults to false) and garbage collection on
	// (TF_ENABLE_GPU_GARBAGE_COLLECTION defaults to true).
	BFCPresetTFGPU = "tf-gpu"
)

var bfcOptions = []Option{
	{Key: "preset", Default: BFCPresetTSL, Help: "defaults to start from: tsl (tsl::BFCAllocator: allow_growth=true, garbage_collection=false) or tf-gpu (TensorFlow's GPU allocator: allow_growth=false, garbage_collection=true); options set explicitly override it"},
	{Key: "allow_growth", Default: "true", Help: "start with a 2 MiB region and grow on demand (false: reserve the whole memory limit at once, TF's GPU default)"},
	{Key: "garbage_collection", Default: "false", Help: "release wholly free regions before failing an allocation (TF's GPU default is true)"},
	{Key: "fragmentation_fraction", Default: "0", Help: "split a chunk when its slack exceeds this fraction of the memory limit (0: the 128 MiB rule)"},
	{Key: "coalescing_regions", Default: "false", Help: "join regions adjacent in the address space, like TF's virtual-memory sub-allocator"},
	{Key: "memory_limit", Default: "0", Help: "the pool's limit in bytes (0: the device capacity; a larger limit makes the device refuse and BFC backpedal, as in TF)"},
}

func newBFCFromOptions(sp Space, o Options) (Allocator, map[string]any, error) {
	s, err := newSettings("bfc", bfcOptions, o)
	if err != nil {
		return nil, nil, err
	}
	if s.Choice("preset", BFCPresetTSL, BFCPresetTFGPU) == BFCPresetTFGPU {
		s.preset("allow_growth", "false")
		s.preset("garbage_collection", "true")
	}
	cfg := BFCConfig{
		AllowGrowth:           s.Bool("allow_growth"),
		GarbageCollection:     s.Bool("garbage_collection"),
		FragmentationFraction: s.Float("fragmentation_fraction"),
		CoalescingRegions:     s.Bool("coalescing_regions"),
		MemoryLimit:           s.Size("memory_limit"),
	}
	if !(cfg.FragmentationFraction >= 0 && cfg.FragmentationFraction <= 1) {
		s.fail("fragmentation_fraction", s.raw("fragmentation_fraction"), "a fraction between 0 and 1")
	}
	if cfg.MemoryLimit > MaxCapacity {
		s.fail("memory_limit", s.raw("memory_limit"), "at most 4EiB (2^62 bytes)")
	}
	if err := s.Err(); err != nil {
		return nil, nil, err
	}
	b := NewBFC(sp, cfg)
	eff := s.Effective()
	eff["memory_limit"] = b.memoryLimit
	return b, eff, nil
}

type bfcChunk struct {
	ptr       uint64
	size      uint64 // bytes of the chunk; a multiple of 256
	requested uint64 // bytes the client asked for; stale once free, as in TF
	allocID   int64  // > 0 while in use, -1 when free
	prev      int32  // physically previous chunk in the region chain, or noChunk
	next      int32  // physically next chunk, or noChunk
	bin       int8   // the bin holding it, or -1 if in use
	// saved is the generation of the checkpoint kept (bfcCheckpoint.gen)
	// when the chunk was last noted as changed since it.
	saved uint32
}

func (c *bfcChunk) inUse() bool { return c.allocID != -1 }

type bfcRegion struct {
	ptr, size uint64
	first     int32 // the chunk at ptr
}

// BFC implements Allocator with TensorFlow's BFC algorithm.
type BFC struct {
	space           Space
	cfg             BFCConfig
	memoryLimit     uint64
	maxInternalFrag uint64

	chunks      paged.Table[bfcChunk] // by handle
	nChunks     int32                 // handles made so far
	freeHandles []int32
	bins        [bfcNumBins]bintree.Tree // free chunks by (size, address)
	nonEmpty    uint32                   // bit b set when bins[b] holds a chunk
	// largest caches LargestFreeBytes until a chunk enters or leaves the
	// top non-empty bin, the only one it can come from; 0: not known.
	largest uint64
	regions []bfcRegion // sorted by address

	currRegionBytes  uint64
	startedBackpedal bool
	nextAllocID      int64
	// failed is the request the latest Allocate could not serve, or nil
	// once another call succeeded: Snapshot reports it.
	failed *bfcstate.Request

	tfCounters
	poolBytes, peakPoolBytes uint64

	// cp is the pool as Checkpoint last saved it, nil until then.
	cp *bfcCheckpoint

	// placer places regions where a recorded pool had them (nil when the
	// space cannot); recorded is the region the recording reserved for
	// the allocation that comes next (RecordedReserve), and followed and
	// missed count the regions put there and those that could not be.
	placer           Placer
	recorded         bfcRecordedRegion
	followed, missed int64
}

// bfcRecordedRegion is a region a recorded pool reserved.
type bfcRecordedRegion struct {
	addr, size uint64
	ok         bool
}

var (
	_ Allocator           = (*BFC)(nil)
	_ LargestFreeReporter = (*BFC)(nil)
	_ StatsReporter       = (*BFC)(nil)
	_ AlignmentLimiter    = (*BFC)(nil)
	_ ChunkWalker         = (*BFC)(nil)
	_ Snapshotter         = (*BFC)(nil)
	_ SegmentObserver     = (*BFC)(nil)
)

// JoinsRegions says adjacent regions are joined (coalescing_regions).
func (b *BFC) JoinsRegions() bool { return b.cfg.CoalescingRegions }

// NewBFC returns a BFC allocator over sp. It reserves nothing until the
// first allocation.
func NewBFC(sp Space, cfg BFCConfig) *BFC {
	limit := min(cfg.MemoryLimit, MaxCapacity)
	if limit == 0 {
		limit = sp.Capacity()
	}
	b := &BFC{space: sp, cfg: cfg, memoryLimit: limit, nextAllocID: 1}
	b.placer, _ = sp.(Placer)
	b.maxInternalFrag = bfcMaxInternalFrag
	if cfg.FragmentationFraction > 0 {
		b.maxInternalFrag = uint64(cfg.FragmentationFraction * float64(limit))
	}
	if cfg.AllowGrowth {
		b.currRegionBytes = bfcRoundedBytes(min(limit, bfcGrowthStart))
	} else {
		b.currRegionBytes = bfcRoundedBytes(limit)
	}
	return b
}

// bfcRoundedBytes rounds n up to a multiple of 256 (TF's RoundedBytes).
func bfcRoundedBytes(n uint64) uint64 {
	return (n + bfcMinAllocationSize - 1) &^ (bfcMinAllocationSize - 1)
}

// BinNumForSize returns the bin holding free chunks of n bytes:
// min(20, floor(log2(max(n, 256) >> 8))).
func BinNumForSize(n uint64) int { return bfcstate.BinNumForSize(n) }

// Allocate serves size bytes following TF's AllocateRawInternal.
func (b *BFC) Allocate(size, align uint64) (Block, error) {
	if size == 0 {
		return Block{}, fmt.Errorf("allocating 0 bytes")
	}
	b.failed = nil
	rec := b.recorded
	b.recorded.ok = false
	rounded := bfcRoundedBytes(size)
	if rounded < size {
		b.failed = &bfcstate.Request{Bytes: size, Rounded: size}
		return Block{}, ErrOutOfMemory
	}
	bin := BinNumForSize(rounded)
	if h := b.findChunk(bin, rounded, size); h != noChunk {
		return b.block(h), nil
	}
	if b.extend(rounded, &rec) {
		if h := b.findChunk(bin, rounded, size); h != noChunk {
			return b.block(h), nil
		}
	}
	if b.deallocateFreeRegions(rounded) && b.extend(rounded, &rec) {
		if h := b.findChunk(bin, rounded, size); h != noChunk {
			return b.block(h), nil
		}
	}
	b.failed = &bfcstate.Request{Bytes: size, Rounded: rounded}
	return Block{}, ErrOutOfMemory
}

// block describes chunk h to the caller. The Handle carries the chunk's
// index in its low 32 bits and its allocation id in the high 32, so that a
// stale block (freed, its chunk since reused) is told from a live one.
func (b *BFC) block(h int32) Block {
	c := b.c(h)
	return Block{Addr: c.ptr, Size: c.size, Handle: uint64(uint32(h)) | uint64(c.allocID)<<32}
}

// findChunk is TF's FindChunkPtr: the first chunk >= rounded in (size,
// address) order among bins bin..20, split by the split rule and marked in use.
func (b *BFC) findChunk(bin int, rounded, requested uint64) int32 {
	for mask := b.nonEmpty >> bin << bin; mask != 0; mask &= mask - 1 {
		i := bits.TrailingZeros32(mask)
		var key bintree.Key
		found := false
		if rounded <= bfcMinAllocationSize<<i {
			// Every chunk of bin i is large enough (a bin holds the
			// sizes from its lower bound up): the first is the least,
			// taken out in the same walk of the tree.
			if key, found = b.bins[i].DeleteMin(); found {
				b.leftBin(key.H, i)
			}
		} else {
			if key, found = b.bins[i].Ceil(bintree.Key{Size: rounded}); found {
				b.removeFromBin(key.H)
			}
		}
		if !found {
			continue
		}
		h := key.H
		c := b.w(h)
		if c.size >= 2*rounded || c.size-rounded >= b.maxInternalFrag {
			b.splitChunk(h, rounded)
			c = b.w(h) // splitChunk may grow the slice
		}
		c.requested = requested
		c.allocID = b.nextAllocID
		b.nextAllocID++
		b.allocated(c.size)
		return h
	}
	return noChunk
}

// splitChunk cuts chunk h at num bytes; the tail becomes a new free chunk,
// binned at once (its next neighbour is in use or absent, so it cannot merge).
func (b *BFC) splitChunk(h int32, num uint64) {
	nh := b.newChunk()
	c := b.w(h)
	n := b.w(nh)
	n.ptr = c.ptr + num
	n.size = c.size - num
	n.allocID = -1
	n.prev = h
	n.next = c.next
	c.size = num
	if n.next != noChunk {
		b.w(n.next).prev = nh
	}
	c.next = nh
	b.insertIntoBin(nh)
}

// Free releases a block following TF's DeallocateRawInternal.
func (b *BFC) Free(blk Block) error {
	idx, gen := uint32(blk.Handle), uint32(blk.Handle>>32)
	if idx >= uint32(b.nChunks) {
		return fmt.Errorf("%w: bfc has no chunk in use at %#x", ErrNotLive, blk.Addr)
	}
	h := int32(idx)
	if c := b.c(h); !c.inUse() || c.ptr != blk.Addr || uint32(c.allocID) != gen {
		return fmt.Errorf("%w: bfc has no chunk in use at %#x", ErrNotLive, blk.Addr)
	}
	c := b.w(h)
	c.allocID = -1
	b.failed = nil
	b.freed(c.size)
	b.insertIntoBin(b.tryToCoalesce(h))
	return nil
}

// tryToCoalesce merges chunk h with its free neighbours, next first, then
// previous, and returns the surviving chunk (TF's TryToCoalesce).
func (b *BFC) tryToCoalesce(h int32) int32 {
	if n := b.c(h).next; n != noChunk && !b.c(n).inUse() {
		b.removeFromBin(n)
		b.merge(h, n)
	}
	if p := b.c(h).prev; p != noChunk && !b.c(p).inUse() {
		b.removeFromBin(p)
		b.merge(p, h)
		h = p
	}
	return h
}

// merge folds chunk h2 into h1, its physical predecessor.
func (b *BFC) merge(h1, h2 int32) {
	c1, c2 := b.w(h1), b.c(h2)
	c1.size += c2.size
	c1.next = c2.next
	if c2.next != noChunk {
		b.w(c2.next).prev = h1
	}
	b.deleteChunk(h2)
}

func (b *BFC) newChunk() int32 {
	if k := len(b.freeHandles); k > 0 {
		h := b.freeHandles[k-1]
		b.freeHandles = b.freeHandles[:k-1]
		c := b.w(h)
		*c = bfcChunk{bin: -1, prev: noChunk, next: noChunk, saved: c.saved}
		return h
	}
	h := b.nChunks
	b.nChunks++
	b.chunks.Grow(uint32(h))
	c := b.w(h)
	*c = bfcChunk{bin: -1, prev: noChunk, next: noChunk, saved: c.saved}
	return h
}

func (b *BFC) deleteChunk(h int32) {
	c := b.w(h)
	*c = bfcChunk{allocID: -1, bin: -1, prev: noChunk, next: noChunk, saved: c.saved}
	b.freeHandles = append(b.freeHandles, h)
}

func (b *BFC) insertIntoBin(h int32) {
	c := b.w(h)
	bin := BinNumForSize(c.size)
	c.bin = int8(bin)
	if !b.bins[bin].Insert(bintree.Key{Size: c.size, Ptr: c.ptr, H: h}) {
		panic(fmt.Sprintf("bfc: chunk %d at %#x already in bin %d", h, c.ptr, bin))
	}
	if bin >= bits.Len32(b.nonEmpty)-1 {
		b.largest = 0
	}
	b.nonEmpty |= 1 << bin
}

func (b *BFC) removeFromBin(h int32) {
	c := b.w(h)
	bin := int(c.bin)
	if bin < 0 {
		panic(fmt.Sprintf("bfc: chunk %d at %#x is not in a bin", h, c.ptr))
	}
	if _, ok := b.bins[bin].Delete(bintree.Key{Size: c.size, Ptr: c.ptr}); !ok {
		panic(fmt.Sprintf("bfc: chunk %d at %#x missing from bin %d", h, c.ptr, bin))
	}
	b.leftBin(h, bin)
}

// leftBin notes that chunk h has been taken out of bin.
func (b *BFC) leftBin(h int32, bin int) {
	if bin >= bits.Len32(b.nonEmpty)-1 {
		b.largest = 0
	}
	if b.bins[bin].Len() == 0 {
		b.nonEmpty &^= 1 << bin
	}
	b.w(h).bin = -1
}

// RecordedReserve notes a region the recorded pool reserved (a capture's
// reserve event, just before the allocation that made the pool grow): if
// that allocation makes this pool reserve a region of the same size, the
// region goes at addr, where the device put the recorded one, so that a
// growing pool's regions, which lie wherever cudaMalloc put them, are
// reproduced with every address in them. A region of another size (a
// what-if that grows otherwise) is placed by the space as usual.
func (b *BFC) RecordedReserve(addr, size uint64, _ int64) {
	b.recorded = bfcRecordedRegion{addr: addr, size: size, ok: true}
}

// RecordedRelease changes nothing: the pool's own garbage collection
// decides what it releases.
func (b *BFC) RecordedRelease(addr, size uint64) {}

// RecordedRegions counts the recorded regions this pool reserved where
// the recording had them, and those of the same size it could not put
// there (the range was taken).
func (b *BFC) RecordedRegions() (followed, missed int64) { return b.followed, b.missed }

// reserve reserves bytes for a region: where the recorded pool had its
// region when it is of that size and the space can place it there, else
// where the space puts it.
func (b *BFC) reserve(bytes uint64, rec *bfcRecordedRegion) (uint64, error) {
	if rec.ok && rec.size == bytes && b.placer != nil {
		rec.ok = false // tried once, placed or not
		if lo, hi := b.space.Bounds(); rec.addr >= lo && rec.addr <= hi && bytes <= hi-rec.addr &&
			b.placer.ReserveAt(rec.addr, bytes) == nil {
			b.followed++
			return rec.addr, nil
		}
		b.missed++
	}
	return b.space.Reserve(bytes)
}

// extend grows the pool by one region able to hold rounded bytes (TF's
// Extend); rec is the region the recording reserved here, if any.
func (b *BFC) extend(rounded uint64, rec *bfcRecordedRegion) bool {
	var available uint64
	if b.poolBytes < b.memoryLimit {
		available = (b.memoryLimit - b.poolBytes) &^ (bfcMinAllocationSize - 1)
	}
	if rounded > available {
		return false
	}
	increased := false
	for rounded > b.currRegionBytes {
		b.doubleRegionBytes()
		increased = true
	}
	bytes := min(b.currRegionBytes, available)
	// The device grants whole granules (pages on the host). Where that
	// would take the pool past its limit, ask for whole granules only;
	// TF's size_t arithmetic would wrap around instead.
	if g := b.space.Granule(); alignUp(bytes, g) > available {
		bytes = available / g * g
		if bytes < rounded {
			return false
		}
	}
	addr, err := b.reserve(bytes, rec)
	if err != nil && !b.startedBackpedal {
		b.startedBackpedal = true
		for {
			next := bfcRoundedBytes(uint64(float32(bytes) * bfcBackpedalFactor))
			if next >= bytes {
				next = bytes - bfcMinAllocationSize // classic TF would loop forever here
			}
			bytes = next
			if bytes < rounded {
				break
			}
			if addr, err = b.space.Reserve(bytes); err == nil {
				break
			}
		}
	}
	if err != nil {
		return false
	}
	if !increased {
		b.doubleRegionBytes()
	}
	// The region is what the device granted (TF's bytes_received): the
	// request rounded up to the space's granule, a page on the host.
	received := alignUp(bytes, b.space.Granule())
	b.poolBytes += received
	b.peakPoolBytes = max(b.peakPoolBytes, b.poolBytes)
	b.addRegion(addr, received)
	return true
}

// doubleRegionBytes doubles the next region's target size, saturating at
// 2^63: larger than any memory limit, so the doubling loop in extend always
// ends (TF's size_t would wrap to 0 after enough regions).
func (b *BFC) doubleRegionBytes() {
	if b.currRegionBytes >= 1<<62 {
		b.currRegionBytes = 1 << 63
		return
	}
	b.currRegionBytes *= 2
}

// addRegion records a new region and its single free chunk, joining it to
// the region that ends at addr when regions coalesce.
func (b *BFC) addRegion(addr, size uint64) {
	h := b.newChunk()
	c := b.w(h)
	c.ptr, c.size, c.allocID = addr, size, -1

	i := 0
	for i < len(b.regions) && b.regions[i].ptr < addr {
		i++
	}
	if b.cfg.CoalescingRegions && i > 0 && b.regions[i-1].ptr+b.regions[i-1].size == addr {
		r := &b.regions[i-1]
		r.size += size
		last := r.first
		for b.c(last).next != noChunk {
			last = b.c(last).next
		}
		b.w(last).next = h
		b.w(h).prev = last
		b.insertIntoBin(b.tryToCoalesce(h))
		return
	}
	b.regions = append(b.regions, bfcRegion{})
	copy(b.regions[i+1:], b.regions[i:])
	b.regions[i] = bfcRegion{ptr: addr, size: size, first: h}
	b.insertIntoBin(h)
}

// deallocateFreeRegions is TF's garbage collection: when the regions holding
// no chunk in use, together with the unreserved remainder of the limit, could
// hold the request, release them to the device.
func (b *BFC) deallocateFreeRegions(rounded uint64) bool {
	if !b.cfg.GarbageCollection {
		return false
	}
	var totalFree uint64
	for _, r := range b.regions {
		if b.regionIsFree(r) {
			totalFree += r.size
		}
	}
	if totalFree == 0 || rounded > b.memoryLimit-b.poolBytes+totalFree {
		return false
	}
	kept := b.regions[:0]
	for _, r := range b.regions {
		if !b.regionIsFree(r) {
			kept = append(kept, r)
			continue
		}
		b.removeFromBin(r.first)
		b.deleteChunk(r.first)
		if err := b.space.Release(r.ptr, r.size); err != nil {
			panic(fmt.Sprintf("bfc: releasing region %#x+%d: %v", r.ptr, r.size, err))
		}
		b.poolBytes -= r.size
	}
	clear(b.regions[len(kept):])
	b.regions = kept
	return true
}

// regionIsFree: free chunks always coalesce, so a region with nothing in use
// is exactly one free chunk spanning it.
func (b *BFC) regionIsFree(r bfcRegion) bool {
	c := b.c(r.first)
	return !c.inUse() && c.size == r.size
}

// LargestFreeBytes returns the largest free chunk in the pool.
func (b *BFC) LargestFreeBytes() uint64 {
	if b.largest == 0 && b.nonEmpty != 0 {
		k, _ := b.bins[bits.Len32(b.nonEmpty)-1].Max()
		b.largest = k.Size
	}
	return b.largest
}

// MaxAlign is 256: classic TF ignores larger requested alignments.
func (b *BFC) MaxAlign() uint64 { return bfcMinAllocationSize }

// Stats returns TensorFlow's AllocatorStats plus the number of regions and
// the next region's target size.
func (b *BFC) Stats() map[string]int64 {
	st := b.stats()
	st["bytes_limit"] = int64(b.memoryLimit)
	st["pool_bytes"] = int64(b.poolBytes)
	st["peak_pool_bytes"] = int64(b.peakPoolBytes)
	st["largest_free_block_bytes"] = int64(b.LargestFreeBytes())
	st["regions"] = int64(len(b.regions))
	st["curr_region_allocation_bytes"] = int64(b.currRegionBytes)
	return st
}

// Regions returns the number of regions the pool holds.
func (b *BFC) Regions() int { return len(b.regions) }

// WalkChunks lists every chunk of every region in address order.
func (b *BFC) WalkChunks(fn func(Chunk)) {
	for ri, r := range b.regions {
		for h := r.first; h != noChunk; h = b.c(h).next {
			c := b.c(h)
			ch := Chunk{Addr: c.ptr, Size: c.size, InUse: c.inUse(), Bin: int(c.bin), Region: ri}
			if ch.InUse {
				ch.Requested = c.requested
			}
			fn(ch)
		}
	}
}

// Snapshot describes the pool as TensorFlow's RecordMemoryMap and
// DumpMemoryLog see it: every region and chunk, the stats, and, when the
// latest Allocate failed, the request it could not serve. TF's
// fragmentation metric is left for the dump (diagnose/bfcdump) to derive
// from the chunks.
func (b *BFC) Snapshot() *bfcstate.Snapshot {
	s := &bfcstate.Snapshot{
		AllocatorName: "bfc",
		Regions:       make([]bfcstate.Region, len(b.regions)),
		Stats: bfcstate.Stats{
			NumAllocs:                 b.numAllocs,
			BytesInUse:                b.bytesInUse,
			PeakBytesInUse:            b.peakBytesInUse,
			LargestAllocSize:          b.largestAlloc,
			BytesLimit:                int64(b.memoryLimit),
			PoolBytes:                 int64(b.poolBytes),
			CurrRegionAllocationBytes: int64(b.currRegionBytes),
		},
	}
	if b.failed != nil {
		req := *b.failed
		s.Request = &req
	}
	// Sized first, by the chunks not on the free list (all of them, for a
	// checkpoint's copy, which keeps no free list): grown by append, the
	// description of a pool of a million chunks would allocate five times
	// its size on the way.
	s.Chunks = make([]bfcstate.Chunk, 0, int(b.nChunks)-len(b.freeHandles))
	for i, r := range b.regions {
		s.Regions[i] = bfcstate.Region{Addr: r.ptr, Size: r.size}
		for h := r.first; h != noChunk; h = b.c(h).next {
			c := b.c(h)
			s.Chunks = append(s.Chunks, bfcstate.Chunk{
				Addr: c.ptr, Size: c.size, Requested: c.requested,
				InUse: c.inUse(), Bin: int(c.bin),
			})
		}
	}
	return s
}

// w returns chunk h for writing. Once a checkpoint is kept, it notes that h
// differs from its saved copy, so that the next Checkpoint copies only the
// chunks changed since the last. The note is kept in the chunk itself,
// which the write touches anyway.
func (b *BFC) w(h int32) *bfcChunk {
	c := b.chunks.At(uint32(h))
	if cp := b.cp; cp != nil && c.saved != cp.gen {
		c.saved = cp.gen
		cp.changed = append(cp.changed, h)
	}
	return c
}

// c returns chunk h for reading.
func (b *BFC) c(h int32) *bfcChunk { return b.chunks.At(uint32(h)) }

// bfcCheckpoint is a saved copy of what Snapshot describes.
type bfcCheckpoint struct {
	chunks  paged.Table[bfcChunk]
	n       int32 // chunks saved
	regions []bfcRegion
	tfCounters
	poolBytes, currRegionBytes uint64
	failed                     *bfcstate.Request
	// changed lists the chunks changed since the copy: those whose saved
	// is gen, which each copy moves on.
	changed []int32
	gen     uint32
}

var _ Checkpointer = (*BFC)(nil)

// Checkpoint saves the pool, for CheckpointSnapshot to describe later. The
// first copies every chunk; each later one only the chunks changed since,
// so that saving the pool at each of many peaks costs in all about one
// copy of the pool plus the changes, not a copy per peak.
func (b *BFC) Checkpoint() {
	cp := b.cp
	if cp == nil || cp.gen == math.MaxUint32 {
		// The first copy, or one after four billion: every chunk is
		// copied, and the generations start again.
		cp = &bfcCheckpoint{gen: 1}
		b.cp = cp
		for h := range uint32(b.nChunks) {
			c := b.chunks.At(h)
			c.saved = 0
			cp.chunks.Grow(h)
			*cp.chunks.At(h) = *c
		}
	} else {
		if b.nChunks > 0 {
			cp.chunks.Grow(uint32(b.nChunks - 1))
		}
		for _, h := range cp.changed {
			*cp.chunks.At(uint32(h)) = *b.chunks.At(uint32(h))
		}
		cp.changed = cp.changed[:0]
		cp.gen++
	}
	cp.n = b.nChunks
	cp.regions = append(cp.regions[:0], b.regions...)
	cp.tfCounters = b.tfCounters
	cp.poolBytes, cp.currRegionBytes = b.poolBytes, b.currRegionBytes
	cp.failed = nil
	if b.failed != nil {
		req := *b.failed
		cp.failed = &req
	}
}

// CheckpointSnapshot describes the pool as the last Checkpoint saved it,
// as Snapshot would have then; nil if there was none.
func (b *BFC) CheckpointSnapshot() *bfcstate.Snapshot {
	cp := b.cp
	if cp == nil {
		return nil
	}
	saved := &BFC{
		chunks: cp.chunks, nChunks: cp.n, regions: cp.regions, tfCounters: cp.tfCounters,
		memoryLimit: b.memoryLimit, poolBytes: cp.poolBytes, currRegionBytes: cp.currRegionBytes,
		failed: cp.failed,
	}
	return saved.Snapshot()
}
