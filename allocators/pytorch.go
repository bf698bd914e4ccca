package allocators

// PyTorch is PyTorch's CUDA caching allocator (the "native" backend,
// DeviceCachingAllocator in c10/cuda/CUDACachingAllocator.cpp, checked
// against pytorch/pytorch at commit 001074d25084fdb87a799823e395a50f5ec044d3)
// in its default configuration, with its PYTORCH_CUDA_ALLOC_CONF options as
// --set pytorch.* options. The yardstick is PyTorch itself: real snapshots
// it recorded replay at every recorded address (trace/pytorch/testdata/real).
//
// Strategy. The allocator caches device segments (cudaMalloc'd ranges) and
// cuts them into blocks. A request is rounded to 512 bytes and served from
// one of two pools: the small pool for rounded sizes up to 1 MiB, the large
// pool above. Each pool is one ordered set of free blocks keyed by
// (stream, size, address), so that a block freed on one stream is reused
// only by requests on the same stream.
//
// Allocate(n, stream) (DeviceCachingAllocator::malloc):
//  1. rounded = round_size(n): 512·ceil(n/512), at least 512; with
//     roundup_power2_divisions = N, sizes above 512·N instead round up to
//     the next of N equal steps between two powers of two.
//  2. get_free_block: the first block at or after (stream, rounded, 0) in its
//     pool; a miss if it belongs to another stream. With max_split_size set,
//     a request below it never takes a block at or above it, and a request
//     at or above it takes a block only if the block is less than
//     max_non_split_rounding (20 MiB) larger.
//  3. On a miss: garbage collection (only with garbage_collection_threshold
//     and memory_fraction < 1, as in PyTorch), then a new segment
//     (alloc_block): 2 MiB for a small request, 20 MiB below 10 MiB, else
//     the request rounded up to 2 MiB. If the device refuses:
//     release_available_cached_blocks (only with max_split_size: the
//     smallest free oversize segment that is large enough, else oversize
//     segments from the largest down until enough is freed) and retry; then
//     release_cached_blocks (every free whole segment) and retry, counted in
//     num_alloc_retries; then fail, counted in num_ooms.
//  4. The block's front is handed out; the rest is split off as a free block
//     if it is at least 512 bytes (small pool, or any pool with expandable
//     segments), or, in the large pool, if the request is below
//     max_split_size and more than 1 MiB would be left.
//
// Free(block): merge with the previous and the next block of the same
// segment when they are free (never across segments) and put the result back
// into its pool. Memory returns to the device only on the miss path of step
// 3 (and when a recorded release says so, below).
//
// Garbage collection ages blocks exactly as PyTorch does: a pool counts its
// get_free_block calls, a block remembers the count when it entered the
// pool, and its age is the difference. When reserved memory exceeds the
// threshold × the allowed memory, whole free large-pool segments at least as
// old as the average are released, pass after pass, until enough is freed.
//
// Expandable segments (expandable_segments): instead of a segment per miss,
// each pool and stream maps 2 MiB (small) or 20 MiB (large) pages into a
// range of addresses reserved for it, and unmaps the pages of free blocks
// when the device runs out; pytorch_expandable.go follows PyTorch's
// functions for it. The split rule becomes "at least 512 bytes left"
// everywhere.
//
// Recorded segments (SegmentObserver, Replayer). A trace imported from a
// PyTorch snapshot carries the program's segment_alloc/segment_free calls as
// reserve/release events, and opens with the state the program was in when
// recording started. With segments=recorded (the default) the allocator
// adopts every recorded segment: it reserves exactly that range (ReserveAt)
// and pools it as one free block (in the small pool if it is 2 MiB, the
// small segment size, else in the large pool), so that best fit then places
// the allocations that follow where the program had them. The allocation
// right after a recorded reserve is the one that made the program reserve
// it: if best fit misses, it takes that segment, as alloc_block would have
// handed it over. A recorded release frees the segment if it is entirely
// free. Allocations of the start state are cut out of their segments at
// their recorded addresses, to their size exactly (AllocateAt, like
// PyTorch's mallocWithAddress), so the recorded layout is rebuilt block for
// block. With expandable segments, a recorded reserve maps those pages and
// a recorded release with a size unmaps them. The allocator still makes
// its own segments on a miss, and counts them: with a faithful model and a
// complete recording there are none. With segments=model the recorded
// events are ignored (what-if mode).
//
// Data structures: blocks live in a slice, named by index (recycled), linked
// to their segment neighbours; each pool is a B-tree keyed by (stream, size,
// address); segments are in a B-tree by address. Allocate and Free are
// O(log blocks); the miss path adds a device call, and the release and
// garbage-collection steps are linear in the pool, as in PyTorch.
//
// Departures from PyTorch, all documented in docs/allocators.md:
//   - No CUDA events or cross-stream uses (record_stream): a freed block is
//     free at once, so active_bytes equals allocated_bytes.
//   - No private pools (CUDA graphs, use_mem_pool), no free-memory
//     callbacks, no cudaMallocAsync backend.
//   - Free blocks are ordered by (stream, size, address), the classic order;
//     the newest PyTorch puts a segment registration counter before the
//     address.
//   - Expandable segments: the space stands for both the virtual and the
//     physical memory. With space.placement=paged (what an imported
//     recording with expandable segments asks for) each new expandable
//     segment gets its own slot of 9/8 × the capacity, like PyTorch's
//     reservation of virtual address space. On a first-fit device a
//     segment's range ends where another reservation begins, so it may have
//     to start a new segment where PyTorch would have grown. A recorded
//     reserve of exactly 2 MiB is the small pool's, any other the large
//     pool's (the small pool maps one 2 MiB page at a time).
//     release_available_cached_blocks (max_split_size) and garbage
//     collection pass expandable segments over; PyTorch's
//     release_available_cached_blocks would assert on them.
//   - Blocks are 512-aligned within their segment and segments are aligned
//     to the space's granule, so requested alignments above
//     min(512, granule) are ignored (PyTorch has no alignment parameter).
//   - A request above 2^63 bytes fails at once (num_ooms), without the
//     release steps.

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/google/btree"
)

// Constants from the reference, with its names.
const (
	// ptMinBlockSize (kMinBlockSize): every size is rounded up to a multiple
	// of 512 bytes, so every block starts a multiple of 512 into its segment.
	ptMinBlockSize = 512
	// ptSmallSize (kSmallSize): rounded requests up to 1 MiB use the small
	// pool; a large-pool block is split only if more than 1 MiB is left.
	ptSmallSize = 1 << 20
	// ptSmallBuffer (kSmallBuffer): the segment small requests are packed
	// into, and the page of small-pool expandable segments: 2 MiB.
	ptSmallBuffer = 2 << 20
	// ptLargeBuffer (kLargeBuffer): the segment a 1–10 MiB request gets, so
	// that several share one; the page of large-pool expandable segments;
	// and the default slack of an oversize block: 20 MiB.
	ptLargeBuffer = 20 << 20
	// ptMinLargeAlloc (kMinLargeAlloc): from 10 MiB up a request gets a
	// segment of its own size...
	ptMinLargeAlloc = 10 << 20
	// ptRoundLarge (kRoundLarge): ...rounded up to 2 MiB, the CUDA page.
	ptRoundLarge = 2 << 20
	// ptMaxRequest: larger requests fail at once; rounding them could
	// overflow 64 bits, and no space holds more than 2^62 bytes.
	ptMaxRequest = 1 << 63
	// ptMaxDivisions bounds roundup_power2_divisions, so 512·N fits.
	ptMaxDivisions = 1 << 32
)

// The pools, indexed as PyTorch's StatType (after AGGREGATE) orders them.
const (
	ptSmall = 0
	ptLarge = 1
)

// PyTorch segment modes (the segments option): what the allocator does
// with the segment decisions a recording carries (its reserve and release
// events, and the start state's layout).
const (
	// PyTorchSegmentsAuto follows the recorded decisions while they are
	// the ones the model makes itself, and decides alone from the first
	// that is not (or that the device cannot honour).
	PyTorchSegmentsAuto = "auto"
	// PyTorchSegmentsRecorded adopts every recorded segment, whatever the
	// model would have done.
	PyTorchSegmentsRecorded = "recorded"
	// PyTorchSegmentsModel ignores them: the model decides everything, the
	// start state's layout included.
	PyTorchSegmentsModel = "model"
)

// PyTorchConfig is the caching allocator's configuration. Its zero value is
// not useful; start from DefaultPyTorchConfig.
type PyTorchConfig struct {
	// MaxSplitSize (max_split_size_mb): blocks at least this large are
	// never split and serve only requests at least this large. 0 means
	// unlimited, PyTorch's default.
	MaxSplitSize uint64
	// MaxNonSplitRounding (max_non_split_rounding_mb): a request of at least
	// MaxSplitSize takes an oversize block only if the block is less than
	// this much larger. PyTorch's default is the large segment size.
	MaxNonSplitRounding uint64
	// LargeSegmentSize (large_segment_size_mb, PyTorch 2.11): the segment a
	// request of 1 to 10 MiB gets, and the page of the large pool's
	// expandable segments. PyTorch's default is 20 MiB (kLargeBuffer).
	LargeSegmentSize uint64
	// RoundupPower2Divisions (roundup_power2_divisions): 0 (off) or a power
	// of two N; requests above 512·N round up to the next of N equal steps
	// of their power-of-two interval.
	RoundupPower2Divisions uint64
	// RoundupIntervals, when set, are the divisions by size instead, as
	// PyTorch keeps them: one for each power-of-two interval from 1 MiB
	// (sizes below it use the first) to 32 GiB and above (the last).
	RoundupIntervals *[ptRoundupIntervals]uint64
	// GarbageCollectionThreshold (garbage_collection_threshold): 0 (off) or
	// a fraction in (0, 1). It acts only under a memory limit.
	GarbageCollectionThreshold float64
	// MemoryFraction (torch.cuda.set_per_process_memory_fraction): the share
	// of the space's capacity the allocator may reserve; 1 sets no limit.
	MemoryFraction float64
	// MemoryLimit, when not 0, is the limit itself in bytes
	// (allowed_memory_maximum), in place of MemoryFraction × capacity:
	// when both are set, it wins (a recording's fraction, a search's
	// limit).
	MemoryLimit uint64
	// ExpandableSegments (expandable_segments): grow one segment per pool
	// and stream in pages instead of reserving a segment per miss.
	ExpandableSegments bool
	// Segments says what to do with a trace's recorded segment decisions:
	// PyTorchSegmentsAuto (the zero value), Recorded or Model.
	Segments string
}

// DefaultPyTorchConfig returns PyTorch's defaults: no max_split_size, 20 MiB
// large segments and non-split rounding, no power-of-two rounding, no
// garbage collection, the whole device, fixed segments, recorded segment
// decisions followed while the model agrees with them.
func DefaultPyTorchConfig() PyTorchConfig {
	return PyTorchConfig{MaxNonSplitRounding: ptLargeBuffer, LargeSegmentSize: ptLargeBuffer, MemoryFraction: 1,
		Segments: PyTorchSegmentsAuto}
}

var pytorchOptions = []Option{
	{Key: "segments", Default: PyTorchSegmentsAuto, Help: "what to do with a recording's segment decisions (its reserve/release events and start state): auto: follow them while they are the model's own decisions, then decide alone (a what-if setting decides alone from the start); recorded: adopt every one; model: ignore them"},
	{Key: "max_split_size_mb", Default: "unlimited", Help: "blocks of at least this many MiB are never split and serve only requests at least as large (a whole number >= large_segment_size_mb, or unlimited)"},
	{Key: "max_non_split_rounding_mb", Default: "large_segment_size_mb", Help: "a request of at least max_split_size_mb takes an oversize block only if it is less than this many MiB larger (a whole number >= large_segment_size_mb)"},
	{Key: "large_segment_size_mb", Default: "20", Help: "the segment a 1-10 MiB request gets, and the large pool's expandable page (PyTorch 2.11; a whole number > 10)"},
	{Key: "roundup_power2_divisions", Default: "0", Help: "round requests above 512*N bytes up to the next of N equal steps between two powers of two (N a power of two; 0: off), or N by size as PyTorch takes it: [256:1,512:2,>:8] (MiB:N)"},
	{Key: "garbage_collection_threshold", Default: "0", Help: "on a cache miss, when reserved memory exceeds this fraction of the memory limit, release the oldest whole free large segments (0 < x < 1; 0: off; acts only under a limit, memory_fraction < 1 or memory_limit, as in PyTorch)"},
	{Key: "memory_fraction", Default: "1", Help: "share of the device the allocator may reserve, as torch.cuda.set_per_process_memory_fraction (0 < x <= 1; 1: no limit)"},
	{Key: "memory_limit", Default: "none", Help: "the same limit in bytes (e.g. 14GiB), in place of memory_fraction (it wins when both are set): what set_per_process_memory_fraction(limit / device memory) allows"},
	{Key: "expandable_segments", Default: "false", Help: "map 2 MiB (small) / large_segment_size_mb (large) pages into one address range per pool and stream instead of a segment per miss, and unmap free pages when out of memory"},
}

// PyTorchBounds are the options that bound the memory the allocator may
// hold without changing how it decides: a recording replayed under them
// keeps following its recorded decisions up to the first it cannot honour.
var PyTorchBounds = []string{"segments", "memory_fraction", "memory_limit"}

func newPyTorchFromOptions(sp Space, o Options) (Allocator, map[string]any, error) {
	s, err := newSettings("pytorch", pytorchOptions, o)
	if err != nil {
		return nil, nil, err
	}
	cfg := DefaultPyTorchConfig()
	cfg.Segments = s.Choice("segments", PyTorchSegmentsAuto, PyTorchSegmentsRecorded, PyTorchSegmentsModel)
	lss := ptMegabytes(s, "large_segment_size_mb", ptMinLargeAlloc>>20+1)
	cfg.LargeSegmentSize = lss << 20
	if v := s.raw("max_split_size_mb"); v == "unlimited" {
		s.effective["max_split_size_mb"] = v
	} else {
		cfg.MaxSplitSize = ptMegabytes(s, "max_split_size_mb", lss) << 20
	}
	if v := s.raw("max_non_split_rounding_mb"); v == "large_segment_size_mb" {
		cfg.MaxNonSplitRounding = cfg.LargeSegmentSize
		s.effective["max_non_split_rounding_mb"] = lss
	} else {
		cfg.MaxNonSplitRounding = ptMegabytes(s, "max_non_split_rounding_mb", lss) << 20
	}
	div := s.raw("roundup_power2_divisions")
	if strings.HasPrefix(div, "[") {
		iv, err := ptParseIntervals(div)
		if err != nil {
			s.fail("roundup_power2_divisions", div, err.Error())
		}
		cfg.RoundupIntervals = &iv
		s.effective["roundup_power2_divisions"] = div
	} else {
		n, err := strconv.ParseUint(div, 10, 64)
		if err != nil || (n != 0 && (n&(n-1) != 0 || n > ptMaxDivisions)) {
			s.fail("roundup_power2_divisions", div, "0 or a power of two up to 2^32, or a list by size as PyTorch takes it, [256:1,512:2,>:8]")
		}
		cfg.RoundupPower2Divisions = n
		s.effective["roundup_power2_divisions"] = n
	}
	cfg.GarbageCollectionThreshold = s.Float("garbage_collection_threshold")
	if t := cfg.GarbageCollectionThreshold; t != 0 && !(t > 0 && t < 1) {
		s.fail("garbage_collection_threshold", s.raw("garbage_collection_threshold"), "0 (off) or a fraction strictly between 0 and 1")
	}
	cfg.MemoryFraction = s.Float("memory_fraction")
	if f := cfg.MemoryFraction; !(f > 0 && f <= 1) {
		s.fail("memory_fraction", s.raw("memory_fraction"), "a fraction in (0, 1]")
	}
	if v := s.raw("memory_limit"); v == "none" {
		s.effective["memory_limit"] = v
	} else if cfg.MemoryLimit = s.Size("memory_limit"); cfg.MemoryLimit == 0 || cfg.MemoryLimit > MaxCapacity {
		s.fail("memory_limit", v, "none, or a size from 1 byte to 4 EiB, such as 14GiB")
	}
	cfg.ExpandableSegments = s.Bool("expandable_segments")
	if err := s.Err(); err != nil {
		return nil, nil, err
	}
	return NewPyTorch(sp, cfg), s.Effective(), nil
}

// ptMegabytes reads option key as a whole number of MiB, at least least,
// and small enough that its bytes fit in 62 bits.
func ptMegabytes(s *settings, key string, least uint64) uint64 {
	v := s.raw(key)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < least || n > MaxCapacity>>20 {
		s.fail(key, v, fmt.Sprintf("a whole number of MiB from %d", least))
	}
	s.effective[key] = n
	return n
}

// ptBlock is one block of a segment (PyTorch's Block).
type ptBlock struct {
	addr, size uint64
	requested  uint64 // bytes asked for, while allocated
	stream     int64
	gcBase     int64 // the pool's get_free_block count when the block entered it
	prev, next int32 // neighbours in the segment, or noChunk
	seg        int32
	gen        uint32 // bumped at every allocation; Block.Handle carries it
	allocated  bool
}

// ptKey orders a pool: (stream, size, address), BlockComparatorSize.
type ptKey struct {
	stream     int64
	size, addr uint64
	h          int32
}

func ptLess(a, b ptKey) bool {
	if a.stream != b.stream {
		return a.stream < b.stream
	}
	if a.size != b.size {
		return a.size < b.size
	}
	return a.addr < b.addr
}

// ptPool is a BlockPool: the free blocks of the small or the large pool.
type ptPool struct {
	tree  *btree.BTreeG[ptKey]
	small bool
	// getFreeBlockCalls is get_free_blocks_call_count: a block's age for
	// garbage collection is how much it grew since the block entered.
	getFreeBlockCalls int64
}

// ptSegment is one device reservation, or one run of mapped pages of an
// expandable segment: its blocks never merge with another segment's.
type ptSegment struct {
	addr, size  uint64
	first, last int32 // the blocks at each end
	stream      int64
	small       bool
	es          int32 // the expandable segment it is mapped in, or -1
}

// expandable reports whether s is a run of an expandable segment.
func (s *ptSegment) expandable() bool { return s.es >= 0 }

type ptSegKey struct {
	addr uint64
	idx  int32
}

type ptESKey struct {
	small  bool
	stream int64
}

// ptStat is one of PyTorch's Stat counters (current and peak).
type ptStat struct{ current, peak int64 }

func (s *ptStat) add(n int64) {
	s.current += n
	s.peak = max(s.peak, s.current)
}

// ptStatArray is a StatArray: the aggregate, small-pool and large-pool stat.
type ptStatArray [3]ptStat

func (a *ptStatArray) add(small bool, n int64) {
	a[0].add(n)
	if small {
		a[1+ptSmall].add(n)
	} else {
		a[1+ptLarge].add(n)
	}
}

// ptStats are PyTorch's DeviceStats, less what bfcsim does not model.
type ptStats struct {
	allocation, segment, active, inactiveSplit                                     ptStatArray
	allocatedBytes, reservedBytes, activeBytes, inactiveSplitBytes, requestedBytes ptStatArray
	oversizeAllocations, oversizeSegments                                          ptStat
	numAllocRetries, numOOMs, numSyncAllStreams, numDeviceAlloc, numDeviceFree     int64
}

// ptRecordedStats count what bfcsim adds: recorded segments and the
// allocator's own.
type ptRecordedStats struct {
	adopted, refused                 int64 // recorded reserves adopted, or not placeable
	releases, releasesIgnored        int64 // recorded releases, and those not applied
	sizeMatch, sizeMismatch          int64 // recorded segment size vs the model's rule
	modelSegments                    int64 // segments and pages reserved on a miss
	startStatePlaced, startStateMiss int64 // start-state allocations at / not at their address
	ignored                          int64 // recorded calls after the model stopped following
}

// PyTorch implements Allocator with PyTorch's caching allocator.
type PyTorch struct {
	space        Space
	placer       Placer // nil when the space cannot place reservations
	placerBroken bool   // a placement the space should have accepted failed
	base, limit  uint64 // the space's bounds
	cfg          PyTorchConfig
	maxSplit     uint64 // MaxSplitSize, or MaxUint64 when unlimited
	allowedMax   uint64 // allowed_memory_maximum, when limited
	limited      bool
	gc           bool       // garbage collection is active
	esReserve    uint64     // an expandable segment's virtual size, 9/8 × capacity
	esStride     uint64     // distance between expandable-segment slots; 0: no slots
	finder       freeFinder // nil when the space cannot say where a range would go

	blocks     []ptBlock
	freeBlocks []int32
	pools      [2]ptPool
	segs       []ptSegment
	freeSegs   []int32
	segTree    *btree.BTreeG[ptSegKey]
	ess        []ptES              // the expandable segments; a slot given back is reused
	freeES     []int32             // slots of ess given back
	esByKey    map[ptESKey][]int32 // indices into ess, by base address
	esPages    map[uint64]uint64   // the expandable segments' reservations: start → bytes
	// esFree holds the expandable segments' free blocks by address, once a
	// recorded reserve or release has asked for one by address (indexFree).
	esFree    *btree.BTreeG[ptSegKey]
	indexFree bool

	totalAllocated uint64  // total_allocated_memory: bytes reserved
	ds             ptStats // PyTorch's DeviceStats
	tfCounters
	rec             ptRecordedStats
	startState      bool   // between the start-state marks
	pendingRecorded int32  // a segment adopted since the last allocation, or -1
	pendingAddr     uint64 // where the recorded reserve adopted then starts
	pendingES       bool   // it mapped pages: the run is found by pendingAddr
	scratch         []int32

	// Following the recorded decisions (segments=auto;
	// pytorch_follow.go): following until the first difference, why it
	// stopped, the recorded calls still to come, and how many were
	// followed. applying is set while a program's own release is made;
	// oomNext says the recording failed the next allocation.
	following bool
	diverged  string
	script    []ptAction
	followed  int64
	applying  bool
	oomNext   bool
}

var (
	_ Allocator           = (*PyTorch)(nil)
	_ StreamAllocator     = (*PyTorch)(nil)
	_ SegmentObserver     = (*PyTorch)(nil)
	_ Replayer            = (*PyTorch)(nil)
	_ LargestFreeReporter = (*PyTorch)(nil)
	_ StatsReporter       = (*PyTorch)(nil)
	_ AlignmentLimiter    = (*PyTorch)(nil)
	_ ChunkWalker         = (*PyTorch)(nil)
	_ DecisionFollower    = (*PyTorch)(nil)
	_ RangeObserver       = (*PyTorch)(nil)
)

// NewPyTorch returns a caching allocator over sp. It reserves nothing until
// the first allocation or recorded segment.
func NewPyTorch(sp Space, cfg PyTorchConfig) *PyTorch {
	p := &PyTorch{space: sp, cfg: cfg, maxSplit: math.MaxUint64, pendingRecorded: -1,
		esByKey: map[ptESKey][]int32{}, esPages: map[uint64]uint64{}}
	p.placer, _ = sp.(Placer)
	p.finder, _ = sp.(freeFinder)
	p.base, p.limit = sp.Bounds()
	if cfg.MaxSplitSize > 0 {
		p.maxSplit = cfg.MaxSplitSize
	}
	if cfg.Segments == "" {
		p.cfg.Segments = PyTorchSegmentsAuto
	}
	p.following = p.cfg.Segments == PyTorchSegmentsAuto
	capacity := sp.Capacity()
	switch {
	case cfg.MemoryLimit > 0:
		p.limited, p.allowedMax = true, cfg.MemoryLimit
	case cfg.MemoryFraction < 1:
		// size_t(fraction * total), as setMemoryFraction computes it.
		p.limited, p.allowedMax = true, uint64(cfg.MemoryFraction*float64(capacity))
	}
	if cfg.LargeSegmentSize == 0 {
		p.cfg.LargeSegmentSize = ptLargeBuffer
	}
	p.gc = p.limited && cfg.GarbageCollectionThreshold > 0
	p.esReserve = ptRoundUp(capacity+capacity/8, p.cfg.LargeSegmentSize)
	if span := p.limit - p.base; p.esReserve > 0 && span/p.esReserve >= 2 {
		p.esStride = p.esReserve
	}
	freeList := btree.NewFreeListG[ptKey](64)
	for i := range p.pools {
		p.pools[i] = ptPool{tree: btree.NewWithFreeListG(16, ptLess, freeList), small: i == ptSmall}
	}
	p.segTree = btree.NewG(8, func(a, b ptSegKey) bool { return a.addr < b.addr })
	p.esFree = btree.NewG(8, func(a, b ptSegKey) bool { return a.addr < b.addr })
	return p
}

// ptRoundupIntervals is kRoundUpPowerOfTwoIntervals: the power-of-two
// size intervals from 1 MiB to 64 GiB that roundup_power2_divisions can set
// apart.
const ptRoundupIntervals = 16

// divisions is CUDAAllocatorConfig::roundup_power2_divisions(size): the
// divisions for a request of size bytes.
func (p *PyTorch) divisions(size uint64) uint64 {
	iv := p.cfg.RoundupIntervals
	if iv == nil {
		return p.cfg.RoundupPower2Divisions
	}
	i := 0
	if l := bits.Len64(size) - 1; l > 20 {
		i = min(l-20, ptRoundupIntervals-1)
	}
	return iv[i]
}

// ptParseIntervals reads roundup_power2_divisions given by size, as
// AllocatorConfig::parseRoundUpPower2Divisions does: "[B:N,...,>:N]",
// each B a power of two in MiB that starts an interval (1 to 32768) and N
// 0 or a power of two. The first entry also sets every interval below
// its own, and ">" sets every interval after the last one named (PyTorch
// 2.11; earlier versions overwrote the last one named too).
func ptParseIntervals(text string) ([ptRoundupIntervals]uint64, error) {
	var iv [ptRoundupIntervals]uint64
	body, opened := strings.CutPrefix(text, "[")
	body, closed := strings.CutSuffix(body, "]")
	if !opened || !closed || strings.TrimSpace(body) == "" {
		return iv, fmt.Errorf("a list of SIZE_MB:DIVISIONS in brackets")
	}
	first, last := true, 0
	for _, item := range strings.Split(body, ",") {
		b, n, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return iv, fmt.Errorf("%q is not SIZE_MB:DIVISIONS", item)
		}
		d, err := strconv.ParseUint(strings.TrimSpace(n), 10, 64)
		if err != nil || (d != 0 && (d&(d-1) != 0 || d > ptMaxDivisions)) {
			return iv, fmt.Errorf("divisions %q: 0 or a power of two up to 2^32", n)
		}
		if b = strings.TrimSpace(b); b == ">" {
			from := last + 1
			if first {
				from = 0 // nothing named yet: every interval
			}
			for i := from; i < len(iv); i++ {
				iv[i] = d
			}
			continue
		}
		mb, err := strconv.ParseUint(b, 10, 64)
		if err != nil || mb == 0 || mb&(mb-1) != 0 {
			return iv, fmt.Errorf("interval %q: a power of two (in MiB)", b)
		}
		i := min(bits.Len64(mb)-1, ptRoundupIntervals-1)
		if first {
			for j := range i {
				iv[j] = d
			}
			first = false
		}
		iv[i] = d
		last = i
	}
	return iv, nil
}

// ptRoundSize is PyTorch's round_size: the bytes a request of n takes,
// rounded with roundup_power2_divisions = divisions (0: off).
func ptRoundSize(n, divisions uint64) uint64 {
	if n < ptMinBlockSize {
		return ptMinBlockSize
	}
	if divisions > 1 && n > ptMinBlockSize*divisions {
		return ptRoundupPower2NextDivision(n, divisions)
	}
	return alignUp(n, ptMinBlockSize)
}

// ptRoundupPower2NextDivision is PyTorch's roundup_power2_next_division: n
// rounded up to the next of divisions equal steps between the powers of two
// around it (1200 with 4 divisions → 1280). ptRoundSize applies it only above
// 512·divisions, so a 1200-byte request still rounds to 1536.
func ptRoundupPower2NextDivision(n, divisions uint64) uint64 {
	if n <= 4 || divisions <= 1 || n&(n-1) == 0 {
		return n
	}
	floor := uint64(1) << (bits.Len64(n) - 1)
	step := floor >> (bits.Len64(divisions) - 1)
	if step == 0 {
		return floor << 1
	}
	if f := n &^ (step - 1); f != n {
		return f + step
	}
	return n
}

// allocationSize is get_allocation_size: the segment a miss reserves.
func (p *PyTorch) allocationSize(rounded uint64) uint64 {
	switch {
	case rounded <= ptSmallSize:
		return ptSmallBuffer
	case rounded < ptMinLargeAlloc:
		return p.cfg.LargeSegmentSize
	default:
		return alignUp(rounded, ptRoundLarge)
	}
}

// ptRoundUp rounds x up to a multiple of m, which need not be a power of
// two (a 20 MiB page is not).
func ptRoundUp(x, m uint64) uint64 { return (x + m - 1) / m * m }

func ptPoolIndex(small bool) int {
	if small {
		return ptSmall
	}
	return ptLarge
}

// page is the page an expandable segment of the pool grows by: 2 MiB for
// the small pool, the large segment size for the large one.
func (p *PyTorch) page(small bool) uint64 {
	if small {
		return ptSmallBuffer
	}
	return p.cfg.LargeSegmentSize
}

// Allocate serves a request on stream 0.
func (p *PyTorch) Allocate(size, align uint64) (Block, error) {
	return p.AllocateOnStream(size, align, 0)
}

// AllocateOnStream follows DeviceCachingAllocator::malloc. align is ignored:
// blocks are aligned to MaxAlign.
func (p *PyTorch) AllocateOnStream(size, _ uint64, stream int64) (Block, error) {
	p.beforeAllocation(size, stream)
	b, err := p.malloc(size, stream)
	p.afterAllocation(size, err != nil)
	p.oomNext = false
	return b, err
}

// malloc is DeviceCachingAllocator::malloc.
func (p *PyTorch) malloc(size uint64, stream int64) (Block, error) {
	if size == 0 {
		return Block{}, fmt.Errorf("allocating 0 bytes")
	}
	if size > ptMaxRequest {
		p.ds.numOOMs++
		return Block{}, ErrOutOfMemory
	}
	rounded := ptRoundSize(size, p.divisions(size))
	small := rounded <= ptSmallSize
	pool := &p.pools[ptPoolIndex(small)]
	h, ok := p.getFreeBlock(pool, rounded, stream)
	if !ok && p.cfg.Segments == PyTorchSegmentsRecorded {
		h, ok = p.takeRecorded(small, rounded, stream)
	}
	if !ok {
		if p.gc {
			p.garbageCollect()
		}
		h, ok = p.allocBlock(small, rounded, stream, false)
		if !ok && p.releaseAvailableCachedBlocks(pool, rounded, stream) {
			h, ok = p.allocBlock(small, rounded, stream, false)
		}
		if !ok {
			p.releaseCachedBlocks()
			h, ok = p.allocBlock(small, rounded, stream, true)
		}
		if !ok {
			p.ds.numOOMs++
			return Block{}, ErrOutOfMemory
		}
	}
	return p.allocFoundBlock(h, rounded, size, p.shouldSplit(h, rounded)), nil
}

// getFreeBlock is get_free_block: best fit on the stream, under the
// oversize rules. The block found leaves the pool.
func (p *PyTorch) getFreeBlock(pool *ptPool, size uint64, stream int64) (int32, bool) {
	if p.gc {
		pool.getFreeBlockCalls++ // block ages count only while GC is on
	}
	cur, found := p.bestFit(pool, size, stream)
	if !found || !p.oversizeAllows(size, cur.size) {
		return noChunk, false
	}
	pool.tree.Delete(cur)
	if p.indexFree && p.inES(cur.h) {
		p.esFree.Delete(ptSegKey{addr: cur.addr})
	}
	return cur.h, true
}

// oversizeAllows applies get_free_block's max_split_size rules to a block
// of have bytes found for a request of size bytes.
func (p *PyTorch) oversizeAllows(size, have uint64) bool {
	if size < p.maxSplit && have >= p.maxSplit {
		return false // no oversize block for a small request
	}
	if size >= p.maxSplit && have >= size+p.cfg.MaxNonSplitRounding {
		return false // an oversize block only within the rounding limit
	}
	return true
}

// bestFit is get_free_block's search, changing nothing: the first block
// of the stream at least size bytes large, passing over a block that can
// grow into unmapped addresses for one that cannot (expandable_size).
func (p *PyTorch) bestFit(pool *ptPool, size uint64, stream int64) (ptKey, bool) {
	var cur ptKey
	found := false
	pool.tree.AscendGreaterOrEqual(ptKey{stream: stream, size: size}, func(k ptKey) bool {
		if k.stream != stream {
			return false
		}
		if !found {
			cur, found = k, true
			return p.inES(k.h)
		}
		// The growable tail of an expandable segment counts as large as it
		// can grow: prefer any other block that fits (PyTorch's
		// expandable_size walk).
		if p.expandableSize(k.h) < p.expandableSize(cur.h) {
			cur = k
			return p.inES(k.h)
		}
		return false
	})
	return cur, found
}

// shouldSplit is should_split.
func (p *PyTorch) shouldSplit(h int32, size uint64) bool {
	b := &p.blocks[h]
	remaining := b.size - size
	if p.smallBlock(h) || p.cfg.ExpandableSegments {
		return remaining >= ptMinBlockSize
	}
	return size < p.maxSplit && remaining > ptSmallSize
}

// cutFront splits the first n bytes of block h off into a new block, linked
// before h in its segment, and returns it; h keeps the rest. Neither is put
// in or taken out of a pool.
func (p *PyTorch) cutFront(h int32, n uint64) int32 {
	si := int32(-1)
	if p.blocks[h].prev == noChunk {
		si = p.segOf(h)
	}
	nh := p.newBlock() // may move p.blocks: take pointers after it
	b, nb := &p.blocks[h], &p.blocks[nh]
	nb.addr, nb.size, nb.stream, nb.seg = b.addr, n, b.stream, b.seg
	nb.prev, nb.next = b.prev, h
	if b.prev != noChunk {
		p.blocks[b.prev].next = nh
	} else {
		p.segs[si].first = nh
	}
	b.prev = nh
	b.addr += n
	b.size -= n
	return nh
}

// allocFoundBlock is alloc_found_block: free block h, out of its pool, is
// handed out, its front cut to size bytes when split is set.
func (p *PyTorch) allocFoundBlock(h int32, size, requested uint64, split bool) Block {
	p.inactiveSplit(h, -1)
	if split {
		nh := p.cutFront(h, size)
		p.insert(h)
		p.inactiveSplit(h, 1)
		h = nh
	}
	b := &p.blocks[h]
	small := p.smallBlock(h)
	b.allocated = true
	b.requested = requested
	b.gen++
	p.ds.allocation.add(small, 1)
	p.ds.allocatedBytes.add(small, int64(b.size))
	p.ds.active.add(small, 1)
	p.ds.activeBytes.add(small, int64(b.size))
	p.ds.requestedBytes.add(small, int64(requested))
	if b.size >= p.maxSplit {
		p.ds.oversizeAllocations.add(1)
	}
	p.allocated(b.size)
	if p.pendingRecorded >= 0 {
		if b.seg == p.pendingRecorded && !p.pendingES {
			if p.segs[b.seg].size == p.allocationSize(ptRoundSize(requested, p.divisions(requested))) {
				p.rec.sizeMatch++
			} else {
				p.rec.sizeMismatch++
			}
		}
		p.pendingRecorded, p.pendingES = -1, false
	}
	return Block{Addr: b.addr, Size: b.size, Handle: uint64(uint32(h)) | uint64(b.gen)<<32}
}

// inactiveSplit adds sign × free block h to the inactive_split stats if it
// counts there: a free piece of a split, fixed segment.
func (p *PyTorch) inactiveSplit(h int32, sign int64) {
	b := &p.blocks[h]
	if p.inES(h) || (b.prev == noChunk && b.next == noChunk) {
		return
	}
	small := p.segs[b.seg].small
	p.ds.inactiveSplit.add(small, sign)
	p.ds.inactiveSplitBytes.add(small, sign*int64(b.size))
}

// Free releases a block following free and free_block: merge with free
// neighbours of the same segment, back into the pool.
func (p *PyTorch) Free(blk Block) error {
	p.betweenAllocations()
	idx, gen := uint32(blk.Handle), uint32(blk.Handle>>32)
	if uint64(idx) >= uint64(len(p.blocks)) {
		return fmt.Errorf("%w: pytorch has no block in use at %#x", ErrNotLive, blk.Addr)
	}
	h := int32(idx)
	b := &p.blocks[h]
	if !b.allocated || b.addr != blk.Addr || b.gen != gen {
		return fmt.Errorf("%w: pytorch has no block in use at %#x", ErrNotLive, blk.Addr)
	}
	small := p.smallBlock(h)
	size, requested := b.size, b.requested
	b.allocated = false
	p.ds.allocation.add(small, -1)
	p.ds.allocatedBytes.add(small, -int64(size))
	if size >= p.maxSplit {
		p.ds.oversizeAllocations.add(-1)
	}
	p.freed(size)
	for _, n := range [2]int32{b.prev, b.next} {
		p.tryMerge(h, n)
	}
	p.insert(h)
	p.inactiveSplit(h, 1)
	p.ds.active.add(small, -1)
	p.ds.activeBytes.add(small, -int64(size))
	p.ds.requestedBytes.add(small, -int64(requested))
	return nil
}

// tryMerge folds src, a neighbour of dst in its segment, into dst if src is
// free (try_merge_blocks).
func (p *PyTorch) tryMerge(dst, src int32) {
	if src == noChunk || p.blocks[src].allocated {
		return
	}
	p.inactiveSplit(src, -1)
	p.remove(src)
	si := int32(-1)
	if b := &p.blocks[src]; b.prev == noChunk || b.next == noChunk {
		si = p.segOf(src) // src ends its segment: dst takes its place
	}
	d, s := &p.blocks[dst], &p.blocks[src]
	if d.prev == src {
		d.addr = s.addr
		d.prev = s.prev
		if d.prev != noChunk {
			p.blocks[d.prev].next = dst
		} else {
			p.segs[si].first = dst
		}
	} else {
		d.next = s.next
		if d.next != noChunk {
			p.blocks[d.next].prev = dst
		} else {
			p.segs[si].last = dst
		}
	}
	d.size += s.size
	p.deleteBlock(src)
}

func (p *PyTorch) poolOf(h int32) *ptPool {
	return &p.pools[ptPoolIndex(p.smallBlock(h))]
}

// A block's seg is its segment's index or, in an expandable segment,
// esSeg of the expandable segment's index: runs of mapped pages split and
// join as pages are unmapped and mapped, and a block finds its run by its
// address (segOf), so that neither has to visit the blocks of a run.
func esSeg(ei int32) int32 { return -2 - ei }

// inES reports whether block h is in an expandable segment.
func (p *PyTorch) inES(h int32) bool { return p.blocks[h].seg <= -2 }

// esOf returns the expandable segment of block h, which is in one.
func (p *PyTorch) esOf(h int32) int32 { return -2 - p.blocks[h].seg }

// segOf returns block h's segment: for an expandable segment, its run.
func (p *PyTorch) segOf(h int32) int32 {
	if b := &p.blocks[h]; b.seg >= 0 {
		return b.seg
	}
	return p.segAt(p.blocks[h].addr)
}

// smallBlock reports whether block h is the small pool's.
func (p *PyTorch) smallBlock(h int32) bool {
	if b := &p.blocks[h]; b.seg >= 0 {
		return p.segs[b.seg].small
	}
	return p.ess[p.esOf(h)].key.small
}

// insert puts free block h into its pool (insert_into_blocks).
func (p *PyTorch) insert(h int32) {
	b := &p.blocks[h]
	pool := p.poolOf(h)
	b.gcBase = pool.getFreeBlockCalls
	pool.tree.ReplaceOrInsert(ptKey{stream: b.stream, size: b.size, addr: b.addr, h: h})
	if p.indexFree && b.seg <= -2 {
		p.esFree.ReplaceOrInsert(ptSegKey{addr: b.addr, idx: h})
	}
}

func (p *PyTorch) remove(h int32) {
	b := &p.blocks[h]
	if _, ok := p.poolOf(h).tree.Delete(ptKey{stream: b.stream, size: b.size, addr: b.addr}); !ok {
		panic(fmt.Sprintf("pytorch: free block %d at %#x is missing from its pool", h, b.addr))
	}
	if p.indexFree && b.seg <= -2 {
		p.esFree.Delete(ptSegKey{addr: b.addr})
	}
}

// newBlock returns a cleared block slot. A recycled slot keeps its
// generation, so a stale Block naming it is still refused.
func (p *PyTorch) newBlock() int32 {
	if k := len(p.freeBlocks); k > 0 {
		h := p.freeBlocks[k-1]
		p.freeBlocks = p.freeBlocks[:k-1]
		p.blocks[h] = ptBlock{prev: noChunk, next: noChunk, gen: p.blocks[h].gen}
		return h
	}
	p.blocks = append(p.blocks, ptBlock{prev: noChunk, next: noChunk})
	return int32(len(p.blocks) - 1)
}

func (p *PyTorch) deleteBlock(h int32) {
	p.blocks[h] = ptBlock{prev: noChunk, next: noChunk, seg: -1, gen: p.blocks[h].gen}
	p.freeBlocks = append(p.freeBlocks, h)
}

// newSegment records a reservation of size bytes at addr as a segment of
// one free block, which it returns outside the pool. An expandable one is
// mapped in expandable segment es.
func (p *PyTorch) newSegment(addr, size uint64, stream int64, small bool, es int32) int32 {
	si := p.addSegment(ptSegment{addr: addr, size: size, stream: stream, small: small, es: es})
	h := p.newBlock()
	b := &p.blocks[h]
	b.addr, b.size, b.stream, b.seg = addr, size, stream, si
	if es >= 0 {
		b.seg = esSeg(es)
	}
	p.segs[si].first, p.segs[si].last = h, h
	if es < 0 {
		p.ds.segment.add(small, 1)
		if size >= p.maxSplit {
			p.ds.oversizeSegments.add(1)
		}
	}
	p.reserved(small, size)
	return si
}

// addSegment files s, whose blocks the caller links, and returns its index.
func (p *PyTorch) addSegment(s ptSegment) int32 {
	var si int32
	if k := len(p.freeSegs); k > 0 {
		si = p.freeSegs[k-1]
		p.freeSegs = p.freeSegs[:k-1]
	} else {
		p.segs = append(p.segs, ptSegment{})
		si = int32(len(p.segs) - 1)
	}
	p.segs[si] = s
	p.segTree.ReplaceOrInsert(ptSegKey{addr: s.addr, idx: si})
	return si
}

// reserved counts bytes newly reserved from the device: a segment, or
// pages mapped into an expandable one.
func (p *PyTorch) reserved(small bool, n uint64) {
	p.totalAllocated += n
	p.ds.reservedBytes.add(small, int64(n))
	p.ds.numDeviceAlloc++
}

// deleteSegment forgets segment si, whose memory has gone back (or, for a
// run of an expandable segment, joined another run).
func (p *PyTorch) deleteSegment(si int32) {
	p.segTree.Delete(ptSegKey{addr: p.segs[si].addr})
	if p.pendingRecorded == si && !p.pendingES {
		p.pendingRecorded = -1
	}
	p.segs[si] = ptSegment{first: noChunk, last: noChunk, es: -1}
	p.freeSegs = append(p.freeSegs, si)
}

// releaseSegment gives fixed segment si, one free block, back to the device
// (release_block).
func (p *PyTorch) releaseSegment(si int32) {
	s := &p.segs[si]
	h := s.first
	if h != s.last || p.blocks[h].allocated || s.expandable() {
		panic(fmt.Sprintf("pytorch: releasing segment %#x, which is not one free block", s.addr))
	}
	p.expectRelease(s.addr, s.size, true)
	p.remove(h)
	if err := p.space.Release(s.addr, s.size); err != nil {
		panic(fmt.Sprintf("pytorch: releasing segment %#x+%d: %v", s.addr, s.size, err))
	}
	p.totalAllocated -= s.size
	p.ds.numDeviceFree++
	p.ds.segment.add(s.small, -1)
	p.ds.reservedBytes.add(s.small, -int64(s.size))
	if s.size >= p.maxSplit {
		p.ds.oversizeSegments.add(-1)
	}
	p.deleteBlock(h)
	p.deleteSegment(si)
}

// whole reports whether block h spans a fixed segment alone.
func (p *PyTorch) whole(h int32) bool {
	b := &p.blocks[h]
	return b.prev == noChunk && b.next == noChunk && b.seg >= 0
}

// allocBlock is alloc_block: a new segment for a request of rounded bytes,
// returned as one free block outside the pool.
func (p *PyTorch) allocBlock(small bool, rounded uint64, stream int64, retry bool) (int32, bool) {
	if retry {
		p.ds.numAllocRetries++
	}
	size := p.allocationSize(rounded)
	if p.limited && p.totalAllocated+size > p.allowedMax {
		p.refusedByLimit(size)
		return noChunk, false
	}
	if p.cfg.ExpandableSegments {
		return p.allocExpandable(small, rounded, stream)
	}
	if addr, ok := p.expectReserve(size, stream); ok {
		if p.placedRecorded(addr, size) {
			si := p.newSegment(addr, size, stream, small, -1)
			return p.segs[si].first, true
		}
		if p.overCapacity(size) {
			return noChunk, false // the device refused it
		}
	}
	addr, err := p.space.Reserve(size)
	if err != nil {
		return noChunk, false
	}
	p.rec.modelSegments++
	si := p.newSegment(addr, size, stream, small, -1)
	return p.segs[si].first, true
}

// rangeFree reports whether [addr, addr+n) lies in the space and overlaps
// none of the allocator's segments: whether a placement there can succeed.
// The allocator is the only one reserving from its space.
func (p *PyTorch) rangeFree(addr, n uint64) bool {
	if addr < p.base || n > p.limit-addr {
		return false
	}
	free := true
	p.segTree.DescendLessOrEqual(ptSegKey{addr: addr + n - 1}, func(k ptSegKey) bool {
		s := &p.segs[k.idx]
		free = s.addr+s.size <= addr
		return false
	})
	return free
}

// overCapacity reports whether reserving n more bytes would exceed the
// space's capacity, which is why a placement in a free range fails.
func (p *PyTorch) overCapacity(n uint64) bool {
	return p.space.Stats().ReservedBytes+alignUp(n, p.space.Granule()) > p.space.Capacity()
}

// garbageCollect is garbage_collect_cached_blocks: when reserved memory
// exceeds the threshold, release whole free large segments of above-average
// age until the excess is reclaimed.
func (p *PyTorch) garbageCollect() {
	threshold := uint64(p.cfg.GarbageCollectionThreshold * float64(p.allowedMax))
	if p.totalAllocated <= threshold {
		return
	}
	target := p.totalAllocated - threshold
	pool := &p.pools[ptLarge]
	age := func(h int32) uint64 { return uint64(pool.getFreeBlockCalls - p.blocks[h].gcBase) }
	var totalAge uint64
	count := 0
	pool.tree.Ascend(func(k ptKey) bool {
		if p.whole(k.h) {
			totalAge += age(k.h)
			count++
		}
		return true
	})
	var reclaimed uint64
	for freed := true; reclaimed < target && freed && count > 0; {
		threshold := float64(totalAge) / float64(count)
		freed = false
		victims := p.scratch[:0]
		pool.tree.Ascend(func(k ptKey) bool {
			if p.whole(k.h) && float64(age(k.h)) >= threshold {
				victims = append(victims, k.h)
			}
			return true
		})
		for _, h := range victims {
			freed = true
			reclaimed += p.blocks[h].size
			totalAge -= age(h)
			count--
			p.releaseSegment(p.blocks[h].seg)
		}
		p.scratch = victims[:0]
	}
}

// releaseAvailableCachedBlocks is release_available_cached_blocks: with
// max_split_size set, free the smallest oversize segment of the stream at
// least as large as the request, else oversize segments from the largest
// down until as many bytes are freed.
func (p *PyTorch) releaseAvailableCachedBlocks(pool *ptPool, size uint64, stream int64) bool {
	if p.maxSplit == math.MaxUint64 {
		return false
	}
	keySize := max(size, p.maxSplit)
	pivot := ptKey{stream: stream, size: keySize}
	var first ptKey
	found := false
	pool.tree.AscendGreaterOrEqual(pivot, func(k ptKey) bool {
		first, found = k, true
		return false
	})
	if found && first.stream == stream && !p.inES(first.h) {
		if !p.whole(first.h) {
			return false // only a start state can cut an oversize block
		}
		p.releaseSegment(p.blocks[first.h].seg)
		return true
	}
	var total uint64
	victims := p.scratch[:0]
	pool.tree.DescendLessOrEqual(pivot, func(k ptKey) bool {
		if !ptLess(k, pivot) {
			return true // the lower bound itself: another stream's or expandable
		}
		if total >= keySize || k.size < p.maxSplit || k.stream != stream {
			return false
		}
		if p.whole(k.h) {
			total += k.size
			victims = append(victims, k.h)
		}
		return true
	})
	for _, h := range victims {
		p.releaseSegment(p.blocks[h].seg)
	}
	p.scratch = victims[:0]
	return total >= keySize
}

// Mark follows the start-state marks of an imported recording.
func (p *PyTorch) Mark(name string) {
	switch {
	case name == StartStateMark:
		p.startState = true
	case name == RecordingStartsMark:
		p.startState = false
	case strings.HasPrefix(name, RecordedOOMMark):
		p.oomNext = true
		return // the releases before it are its out-of-memory path's
	}
	p.betweenAllocations()
}

// AllocateAt places an allocation of the start state at its recorded
// address, cut out of the free block that holds it (PyTorch's
// mallocWithAddress, except that the block is cut to its size exactly, so
// that the recorded layout is rebuilt). Outside the start state, or with
// segments=model, the address is not looked at.
func (p *PyTorch) AllocateAt(size, align uint64, stream int64, addr uint64) (Block, error) {
	if !p.startState || p.cfg.Segments == PyTorchSegmentsModel || size == 0 || size > ptMaxRequest {
		return p.AllocateOnStream(size, align, stream)
	}
	rounded := ptRoundSize(size, p.divisions(size))
	h := p.freeBlockContaining(addr, rounded, stream, rounded <= ptSmallSize)
	if h == noChunk {
		p.rec.startStateMiss++
		return p.AllocateOnStream(size, align, stream)
	}
	p.rec.startStatePlaced++
	p.remove(h)
	if prefix := addr - p.blocks[h].addr; prefix > 0 {
		p.inactiveSplit(h, -1)
		nh := p.cutFront(h, prefix)
		p.insert(nh)
		p.inactiveSplit(nh, 1)
		p.inactiveSplit(h, 1)
	}
	return p.allocFoundBlock(h, rounded, size, p.blocks[h].size > rounded), nil
}

// freeBlockContaining returns the free block of the pool and stream that
// holds [addr, addr+size) at a 512-byte offset, or noChunk.
func (p *PyTorch) freeBlockContaining(addr, size uint64, stream int64, small bool) int32 {
	si := int32(-1)
	p.segTree.DescendLessOrEqual(ptSegKey{addr: addr}, func(k ptSegKey) bool {
		si = k.idx
		return false
	})
	if si < 0 {
		return noChunk
	}
	s := &p.segs[si]
	if s.small != small || s.stream != stream || addr >= s.addr+s.size {
		return noChunk
	}
	for h := s.first; h != noChunk; h = p.blocks[h].next {
		b := &p.blocks[h]
		if addr >= b.addr+b.size {
			continue
		}
		if b.allocated || (addr-b.addr)%ptMinBlockSize != 0 || size > b.addr+b.size-addr {
			return noChunk
		}
		return h
	}
	return noChunk
}

// LargestFreeBytes returns the largest free block in either pool.
func (p *PyTorch) LargestFreeBytes() uint64 {
	var best uint64
	for i := range p.pools {
		t := p.pools[i].tree
		k, ok := t.Max()
		for ok {
			best = max(best, k.size) // the largest of stream k.stream
			if k.stream == math.MinInt64 {
				break
			}
			ok = false
			t.DescendLessOrEqual(ptKey{stream: k.stream - 1, size: math.MaxUint64, addr: math.MaxUint64},
				func(x ptKey) bool {
					k, ok = x, true
					return false
				})
		}
	}
	return best
}

// MaxAlign is min(512, granule): blocks start 512-aligned within segments
// that are aligned to the space's granule. PyTorch takes no alignment.
func (p *PyTorch) MaxAlign() uint64 { return min(ptMinBlockSize, p.space.Granule()) }

// JoinsRegions says the pages of an expandable segment are one range.
func (p *PyTorch) JoinsRegions() bool { return p.cfg.ExpandableSegments }

// Stats returns PyTorch's memory_stats under its names, TensorFlow's core
// counters (which the replay checks), and bfcsim's recorded-segment
// counters.
func (p *PyTorch) Stats() map[string]int64 {
	st := p.stats()
	s := &p.ds
	arrays := []struct {
		name   string
		a      *ptStatArray
		byPool bool
	}{
		{"allocation", &s.allocation, false},
		{"segment", &s.segment, true},
		{"active", &s.active, false},
		{"inactive_split", &s.inactiveSplit, false},
		{"allocated_bytes", &s.allocatedBytes, true},
		{"reserved_bytes", &s.reservedBytes, true},
		{"active_bytes", &s.activeBytes, false},
		{"inactive_split_bytes", &s.inactiveSplitBytes, true},
		{"requested_bytes", &s.requestedBytes, false},
	}
	types := [3]string{"all", "small_pool", "large_pool"}
	for _, a := range arrays {
		for i, t := range types {
			if i > 0 && !a.byPool {
				break
			}
			st[a.name+"."+t+".current"] = a.a[i].current
			st[a.name+"."+t+".peak"] = a.a[i].peak
		}
	}
	st["oversize_allocations.current"] = s.oversizeAllocations.current
	st["oversize_allocations.peak"] = s.oversizeAllocations.peak
	st["oversize_segments.current"] = s.oversizeSegments.current
	st["oversize_segments.peak"] = s.oversizeSegments.peak
	st["num_alloc_retries"] = s.numAllocRetries
	st["num_ooms"] = s.numOOMs
	st["num_sync_all_streams"] = s.numSyncAllStreams
	st["num_device_alloc"] = s.numDeviceAlloc
	st["num_device_free"] = s.numDeviceFree
	st["max_split_size"] = -1 // PyTorch reports SIZE_MAX as -1
	if p.maxSplit != math.MaxUint64 {
		st["max_split_size"] = int64(p.maxSplit)
	}
	st["largest_free_block_bytes"] = int64(p.LargestFreeBytes())
	st["expandable_segments"] = int64(p.liveES())
	r := &p.rec
	st["recorded_segments_adopted"] = r.adopted
	st["recorded_segments_refused"] = r.refused
	st["recorded_releases"] = r.releases
	st["recorded_releases_ignored"] = r.releasesIgnored
	st["recorded_segment_size_match"] = r.sizeMatch
	st["recorded_segment_size_mismatch"] = r.sizeMismatch
	st["model_segments"] = r.modelSegments
	st["start_state_placed"] = r.startStatePlaced
	st["start_state_misplaced"] = r.startStateMiss
	st["recorded_calls_followed"] = p.followed
	st["recorded_calls_ignored"] = r.ignored
	return st
}

// WalkChunks lists every block of every segment in address order. A free
// block's Bin is its pool: 0 small, 1 large.
func (p *PyTorch) WalkChunks(fn func(Chunk)) {
	region := 0
	p.segTree.Ascend(func(k ptSegKey) bool {
		s := &p.segs[k.idx]
		for h := s.first; h != noChunk; h = p.blocks[h].next {
			b := &p.blocks[h]
			c := Chunk{Addr: b.addr, Size: b.size, InUse: b.allocated, Bin: -1, Region: region}
			if b.allocated {
				c.Requested = b.requested
			} else {
				c.Bin = ptPoolIndex(s.small)
			}
			fn(c)
		}
		region++
		return true
	})
}
