package allocators

import (
	"fmt"
	"time"
)

// Space is a device address space that allocators reserve memory from: the
// model of cudaMalloc/cudaFree (or mmap/munmap) under an allocator.
//
// Ranges are half-open, [addr, addr+n). A Space is used by one goroutine at a
// time.
type Space interface {
	// Reserve sets aside at least n bytes (n > 0) and returns their first
	// address, a multiple of Granule(). The space charges n rounded up to
	// Granule() against its capacity. It returns ErrOutOfMemory, and changes
	// nothing but its call counters, if no free range can hold the request.
	Reserve(n uint64) (addr uint64, err error)

	// Release gives back [addr, addr+n), which must be entirely reserved. A
	// range may cover several adjacent reservations (an allocator that joins
	// adjacent regions releases them as one). Releasing a range that is not
	// reserved returns ErrNotLive and changes nothing.
	Release(addr, n uint64) error

	// Granule is the unit of reservations: their alignment, and the
	// multiple their sizes are rounded up to.
	Granule() uint64

	// Capacity is the most bytes the space can hold reserved at once.
	Capacity() uint64

	// Bounds returns the half-open address range reservations come from.
	Bounds() (base, limit uint64)

	// Stats returns the space's counters so far.
	Stats() SpaceStats
}

// Placer is a Space that can reserve a range the caller chooses, as a CUDA
// driver maps memory at a chosen address of a reserved range (cuMemMap):
// an allocator grows a segment in place with it, or puts a segment where a
// recorded program had it.
type Placer interface {
	// ReserveAt reserves exactly [addr, addr+n), n rounded up to
	// Granule(); addr must be a multiple of Granule(). It returns
	// ErrOutOfMemory, and changes nothing but the call counters, if any of
	// the range is reserved or outside the space, or the capacity would be
	// exceeded.
	ReserveAt(addr, n uint64) error
}

// Toucher is a Space backed by real memory, whose pages can be written.
type Toucher interface {
	// Touch writes one byte in every page of [addr, addr+n), which must lie
	// inside reserved memory, so that the pages are faulted in.
	Touch(addr, n uint64)
}

// SpaceStats are a Space's counters.
type SpaceStats struct {
	ReservedBytes     uint64        // bytes reserved now, after rounding to the granule
	PeakReservedBytes uint64        // the most ever reserved at once
	ReserveCalls      int64         // Reserve calls, failed ones included
	FailedReserves    int64         // Reserve calls that failed
	ReleaseCalls      int64         // successful Release calls
	ModeledTime       time.Duration // device time the cost model charges for the calls
}

// CostModel prices device calls. cudaMalloc and cudaFree are slow, and
// cudaFree synchronizes the device; the point of a caching allocator is to
// avoid them. The defaults are assumptions of the right order of magnitude,
// not measurements of any particular GPU: a fixed cost per call plus a cost
// proportional to the bytes mapped or unmapped. Override them with
// --set space.reserve_cost=..., and so on.
type CostModel struct {
	ReserveFixed  time.Duration // per Reserve call, failed calls included
	ReservePerGiB time.Duration // per GiB reserved
	ReleaseFixed  time.Duration // per Release call
	ReleasePerGiB time.Duration // per GiB released
}

// DefaultCostModel returns the documented default costs.
func DefaultCostModel() CostModel {
	return CostModel{
		ReserveFixed:  10 * time.Microsecond,
		ReservePerGiB: 500 * time.Microsecond,
		ReleaseFixed:  20 * time.Microsecond,
		ReleasePerGiB: 250 * time.Microsecond,
	}
}

// spaceOptions are the --set space.* keys.
var spaceOptions = []Option{
	{Key: "placement", Default: "paged", Help: "paged: pages are mapped into a large virtual range, so only the capacity limits, as on a GPU (CUDA's virtual memory); first-fit: the device is one contiguous range and can fragment, as a heap of fixed size (--space host is always first-fit)"},
	{Key: "reserve_cost", Default: "10us", Help: "modeled time of one device reservation (cudaMalloc), failed ones included"},
	{Key: "reserve_cost_per_gib", Default: "500us", Help: "modeled time per GiB reserved"},
	{Key: "release_cost", Default: "20us", Help: "modeled time of one device release (cudaFree, which synchronizes)"},
	{Key: "release_cost_per_gib", Default: "250us", Help: "modeled time per GiB released"},
}

// SpaceOptions lists the space.* options, for help and documentation.
func SpaceOptions() []Option { return spaceOptions }

// MaxCapacity is the largest device a space may model: 4 EiB (2^62 bytes),
// so that every address, base included, fits in 64 bits.
const MaxCapacity = 1 << 62

// SpaceKinds are the values of --space.
var SpaceKinds = []string{"virtual", "host"}

// SpaceConfig describes the spaces a replay creates, one per allocator.
type SpaceConfig struct {
	Kind     string  // "virtual" or "host"
	Capacity uint64  // bytes
	Touch    bool    // host only: fault in every page of every allocation
	Options  Options // space.* settings
}

// Validate checks the configuration without creating a space, and returns
// the effective space options.
func (c SpaceConfig) Validate() (map[string]any, error) {
	_, eff, err := c.parse()
	return eff, err
}

func (c SpaceConfig) parse() (spaceParams, map[string]any, error) {
	s, err := newSettings("space", spaceOptions, c.Options)
	if err != nil {
		return spaceParams{}, nil, err
	}
	if c.Kind == "host" {
		s.preset("placement", "first-fit") // the kernel places mappings
	}
	placement := FirstFit
	if s.Choice("placement", "first-fit", "paged") == "paged" {
		placement = Paged
	}
	cm := CostModel{
		ReserveFixed:  s.Duration("reserve_cost"),
		ReservePerGiB: s.Duration("reserve_cost_per_gib"),
		ReleaseFixed:  s.Duration("release_cost"),
		ReleasePerGiB: s.Duration("release_cost_per_gib"),
	}
	if err := s.Err(); err != nil {
		return spaceParams{}, nil, err
	}
	switch c.Kind {
	case "virtual", "host":
	default:
		return spaceParams{}, nil, fmt.Errorf("unknown space %q (want virtual or host)", c.Kind)
	}
	if c.Touch && c.Kind != "host" {
		return spaceParams{}, nil, fmt.Errorf("%w: --touch needs --space host", ErrBadOption)
	}
	if placement == Paged && c.Kind != "virtual" {
		return spaceParams{}, nil, fmt.Errorf("%w: space.placement=paged applies to --space virtual (the host's kernel places mappings itself)", ErrBadOption)
	}
	if c.Capacity == 0 {
		return spaceParams{}, nil, fmt.Errorf("%w: capacity must be > 0", ErrBadOption)
	}
	if c.Capacity > MaxCapacity {
		return spaceParams{}, nil, fmt.Errorf("%w: capacity %d bytes is more than bfcsim can simulate (at most 4 EiB)", ErrBadOption, c.Capacity)
	}
	return spaceParams{cost: cm, placement: placement}, s.Effective(), nil
}

type spaceParams struct {
	cost      CostModel
	placement Placement
}

// NewSpace creates a fresh space from c.
func NewSpace(c SpaceConfig) (Space, error) {
	p, _, err := c.parse()
	if err != nil {
		return nil, err
	}
	if c.Kind == "host" {
		return NewHostSpace(c.Capacity, p.cost)
	}
	return NewVirtualSpace(c.Capacity, p.cost, p.placement), nil
}

// accounting is the bookkeeping every Space shares: reserved bytes, call
// counts and modeled time.
type accounting struct {
	stats SpaceStats
	cost  CostModel
}

func (a *accounting) charge(fixed, perGiB time.Duration, n uint64) {
	a.stats.ModeledTime += fixed + time.Duration(float64(perGiB)*float64(n)/(1<<30))
}

func (a *accounting) reserved(n uint64) {
	a.stats.ReserveCalls++
	a.stats.ReservedBytes += n
	a.stats.PeakReservedBytes = max(a.stats.PeakReservedBytes, a.stats.ReservedBytes)
	a.charge(a.cost.ReserveFixed, a.cost.ReservePerGiB, n)
}

func (a *accounting) failed() {
	a.stats.ReserveCalls++
	a.stats.FailedReserves++
	a.charge(a.cost.ReserveFixed, 0, 0)
}

func (a *accounting) released(n uint64) {
	a.stats.ReleaseCalls++
	a.stats.ReservedBytes -= n
	a.charge(a.cost.ReleaseFixed, a.cost.ReleasePerGiB, n)
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }
