package allocators

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bfcsim/bfcsim/allocators/cudadrv"
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
	// exceeded. It stands for one cudaMalloc that returned addr.
	ReserveAt(addr, n uint64) error
	// MapAt is ReserveAt for one handle of pages an allocator maps into
	// an address range of its own (PyTorch's expandable segments:
	// cuMemCreate, cuMemMap and cuMemSetAccess), priced as a mapping; its
	// Release is cuMemUnmap and cuMemRelease. A real device maps whole
	// pages of its granularity (2 MiB).
	MapAt(addr, n uint64) error
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
	// MeasuredTime is the device time the calls took, on a space that
	// makes real device calls (--space cuda); Measured says it does.
	MeasuredTime time.Duration
	Measured     bool
	// Calls, CallP50 and CallP99 are the device calls made and the
	// median and 99th percentile of their times (measured spaces only).
	Calls            int64
	CallP50, CallP99 time.Duration
	// Device names the GPU of a measured space.
	Device string
}

// CostModel prices device calls. cudaMalloc and cudaFree are slow, and
// cudaFree synchronizes the device; the point of a caching allocator is to
// avoid them. The defaults are an NVIDIA H100's (docs/allocators.md#device-cost-model):
// a fixed cost per call plus a cost per GiB, for whole segments and for
// handles of pages an allocator maps itself. Override them with
// --set space.reserve_cost=..., and so on, or measure a GPU's with
// bfcsim calibrate.
type CostModel struct {
	ReserveFixed  time.Duration // per Reserve call, failed calls included
	ReservePerGiB time.Duration // per GiB reserved
	ReleaseFixed  time.Duration // per Release call
	ReleasePerGiB time.Duration // per GiB released
	// MapFixed and MapPerGiB price one MapAt (cuMemCreate, cuMemMap and
	// cuMemSetAccess of one handle); UnmapFixed and UnmapPerGiB the
	// release of one (cuMemUnmap and cuMemRelease).
	MapFixed    time.Duration
	MapPerGiB   time.Duration
	UnmapFixed  time.Duration
	UnmapPerGiB time.Duration
}

// DefaultCostModel returns the default costs: an NVIDIA H100 80GB's.
func DefaultCostModel() CostModel {
	return CostModel{
		ReserveFixed:  52 * time.Microsecond,
		ReservePerGiB: 130 * time.Microsecond,
		ReleaseFixed:  42 * time.Microsecond,
		ReleasePerGiB: 637 * time.Microsecond,
		MapFixed:      66 * time.Microsecond,
		MapPerGiB:     274 * time.Microsecond,
		UnmapFixed:    43500 * time.Nanosecond,
		UnmapPerGiB:   664 * time.Microsecond,
	}
}

// spaceOptions are the --set space.* keys.
var spaceOptions = []Option{
	{Key: "placement", Default: "paged", Help: "paged: pages are mapped into a large virtual range, so only the capacity limits, as on a GPU (CUDA's virtual memory); first-fit: the device is one contiguous range and can fragment, as a heap of fixed size (--space host is always first-fit)"},
	{Key: "reserve_cost", Default: "52us", Help: "modeled time of one device reservation (cudaMalloc), failed ones included; the default is an H100's"},
	{Key: "reserve_cost_per_gib", Default: "130us", Help: "modeled time per GiB reserved"},
	{Key: "release_cost", Default: "42us", Help: "modeled time of one device release (cudaFree, which synchronizes)"},
	{Key: "release_cost_per_gib", Default: "637us", Help: "modeled time per GiB released"},
	{Key: "map_cost", Default: "66us", Help: "modeled time of mapping one handle of pages an allocator maps itself (cuMemCreate + cuMemMap + cuMemSetAccess: PyTorch's expandable segments)"},
	{Key: "map_cost_per_gib", Default: "274us", Help: "modeled time per GiB mapped"},
	{Key: "unmap_cost", Default: "43.5us", Help: "modeled time of unmapping one handle (cuMemUnmap + cuMemRelease)"},
	{Key: "unmap_cost_per_gib", Default: "664us", Help: "modeled time per GiB unmapped"},
}

// SpaceOptions lists the space.* options, for help and documentation.
func SpaceOptions() []Option { return spaceOptions }

// MaxCapacity is the largest device a space may model: 4 EiB (2^62 bytes),
// so that every address, base included, fits in 64 bits.
const MaxCapacity = 1 << 62

// SpaceKinds are the values of --space (cuda also as cuda:N, GPU N).
var SpaceKinds = []string{"virtual", "host", "cuda"}

// SpaceConfig describes the spaces a replay creates, one per allocator.
type SpaceConfig struct {
	Kind     string  // "virtual", "host" or "cuda"
	Capacity uint64  // bytes
	Touch    bool    // host and cuda: write every page of every allocation
	Options  Options // space.* settings
	// Device is the GPU of a cuda space; OpenDriver opens it (nil:
	// cudadrv.Open), for tests with a fake driver.
	Device     int
	OpenDriver func(int) (cudadrv.Driver, error)
}

// ParseSpace reads a --space value: virtual, host, cuda or cuda:N.
func ParseSpace(v string) (kind string, device int, err error) {
	if rest, ok := strings.CutPrefix(v, "cuda:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return "", 0, fmt.Errorf("--space %s: want cuda:N, N a GPU's number (0, 1, ...)", v)
		}
		return "cuda", n, nil
	}
	if !slices.Contains(SpaceKinds, v) {
		return "", 0, fmt.Errorf("unknown space %q (want virtual, host, cuda or cuda:N)", v)
	}
	return v, 0, nil
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
	if c.Kind != "virtual" {
		s.preset("placement", "first-fit") // the kernel or the driver places mappings
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
		MapFixed:      s.Duration("map_cost"),
		MapPerGiB:     s.Duration("map_cost_per_gib"),
		UnmapFixed:    s.Duration("unmap_cost"),
		UnmapPerGiB:   s.Duration("unmap_cost_per_gib"),
	}
	if err := s.Err(); err != nil {
		return spaceParams{}, nil, err
	}
	switch c.Kind {
	case "virtual", "host", "cuda":
	default:
		return spaceParams{}, nil, fmt.Errorf("unknown space %q (want virtual, host or cuda)", c.Kind)
	}
	if c.Touch && c.Kind == "virtual" {
		return spaceParams{}, nil, fmt.Errorf("%w: --touch needs --space host or cuda", ErrBadOption)
	}
	if placement == Paged && c.Kind != "virtual" {
		return spaceParams{}, nil, fmt.Errorf("%w: space.placement=paged applies to --space virtual (the host's kernel and a GPU's driver place mappings themselves)", ErrBadOption)
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
	switch c.Kind {
	case "host":
		return NewHostSpace(c.Capacity, p.cost)
	case "cuda":
		return NewCudaSpace(c.Device, c.Capacity, p.cost, c.OpenDriver)
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
	a.releasedMapped(n, 0, 0)
}

// mapped is a successful MapAt of n bytes: a reservation, priced as
// mapping one handle.
func (a *accounting) mapped(n uint64) {
	a.stats.ReserveCalls++
	a.stats.ReservedBytes += n
	a.stats.PeakReservedBytes = max(a.stats.PeakReservedBytes, a.stats.ReservedBytes)
	a.charge(a.cost.MapFixed, a.cost.MapPerGiB, n)
}

// releasedMapped is a Release of n bytes, of which mapped were in handles
// mapped with MapAt: those are priced per handle unmapped, the rest as
// segments.
func (a *accounting) releasedMapped(n, mapped uint64, handles int) {
	a.stats.ReleaseCalls++
	a.stats.ReservedBytes -= n
	if n > mapped || handles == 0 {
		a.charge(a.cost.ReleaseFixed, a.cost.ReleasePerGiB, n-mapped)
	}
	if handles > 0 {
		a.charge(time.Duration(handles)*a.cost.UnmapFixed, a.cost.UnmapPerGiB, mapped)
	}
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }
