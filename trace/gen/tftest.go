package gen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
)

// TFTest replays one of TensorFlow's own BFC allocator tests
// (gpu_bfc_allocator_test.cc) as a trace, so that the numbers those tests
// assert can be reproduced through `bfcsim replay`. Each case's header
// carries the memory limit the test used as the trace's capacity; the
// allocator options each test needs are listed in tfTestCases and in
// traces/README.md. NoDups is the ramp workload's default.
type TFTest struct {
	// Case names the test; see TFTestCases.
	Case string `help:"the TensorFlow test to replay: exercise-coalescing, allocated-vs-requested, custom-limit, bin-debug-info, region-growth, region-deallocation, fragmentation-oom or growth-start"`
}

// DefaultTFTest returns the ExerciseCoalescing test.
func DefaultTFTest() TFTest { return TFTest{Case: "exercise-coalescing"} }

var _ Generator = TFTest{}

type tfTestCase struct {
	name     string
	capacity uint64 // the test's memory limit
	gen      func(e *emitter)
}

// tfTestCases are the tests, each with TensorFlow's memory limit.
var tfTestCases = []tfTestCase{
	{"exercise-coalescing", 1 << 30, func(e *emitter) {
		// One float[1024], freed; then 1024 rounds of float[1024],
		// int64[1048576], double[2048] and float[10485760], all four freed.
		// TF then checks num_allocs 4097, bytes_in_use 0, peak
		// 50352128 and largest_alloc_size 41943040.
		e.free(e.alloc(4096, "float[1024]"))
		for range 1024 {
			a := e.alloc(4096, "float[1024]")
			b := e.alloc(8388608, "int64[1048576]")
			c := e.alloc(16384, "double[2048]")
			d := e.alloc(41943040, "float[10485760]")
			e.free(a)
			e.free(b)
			e.free(c)
			e.free(d)
		}
	}},
	{"allocated-vs-requested", 1 << 30, func(e *emitter) {
		// One float: 4 bytes requested, a 256-byte chunk handed out.
		e.free(e.alloc(4, "float[1]"))
	}},
	{"custom-limit", 2 << 20, func(e *emitter) {
		// On a 2 MiB limit, float[64] succeeds and float[2<<20] (8 MiB)
		// fails.
		e.alloc(256, "float[64]")
		e.alloc(8<<20, "float[2097152]")
	}},
	{"bin-debug-info", 1 << 30, func(e *emitter) {
		// Two allocations each of 256<<i for i in 0..4: 11 chunks, bins
		// 0..4 holding two in-use chunks each, bin 20 the free rest of the
		// 1 GiB region. Then every second allocation is freed.
		var ids []uint64
		for i := range 5 {
			for range 2 {
				ids = append(ids, e.alloc(256<<i, ""))
			}
		}
		for i := 1; i < len(ids); i += 2 {
			e.free(ids[i])
		}
	}},
	{"region-growth", 2 << 30, func(e *emitter) {
		// 128 × 4 MiB with growth: regions of 4, 4, 8, ..., 256 MiB.
		for range 128 {
			e.alloc(4<<20, "")
		}
	}},
	{"region-deallocation", 2 << 30, func(e *emitter) {
		// The same, then everything but the last freed, then a 1.625 GiB
		// request: more than the 1.5 GiB left of the limit, so it fails
		// unless garbage collection gives the seven free regions (256 MiB)
		// back first; then it gets a new region of its own.
		keepLastOf128(e)
		e.alloc(1664<<20, "")
	}},
	{"fragmentation-oom", 512 << 20, func(e *emitter) {
		// 128 × 4 MiB on a 512 MiB limit with growth, the first 127 freed,
		// then 508 MiB: regions that cannot merge leave no chunk large
		// enough (PhysicalAllocatorOomsFragmentation); coalescing regions
		// do (VirtualAllocatorPromotesReuse).
		keepLastOf128(e)
		e.alloc(508<<20, "")
	}},
	{"growth-start", 2 << 30, func(e *emitter) {
		// One small allocation: the first region is 2 MiB with growth, the
		// whole 2 GiB limit without.
		e.alloc(1024, "")
	}},
}

// keepLastOf128 allocates 128 × 4 MiB, then frees all but the last: with
// growth, regions of 4, 4, 8, ..., 256 MiB, all free but the last.
func keepLastOf128(e *emitter) {
	ids := make([]uint64, 128)
	for i := range ids {
		ids[i] = e.alloc(4<<20, "")
	}
	for _, id := range ids[:127] {
		e.free(id)
	}
}

// TFTestCases returns the case names, in the order of the help text.
func TFTestCases() []string {
	names := make([]string, len(tfTestCases))
	for i, c := range tfTestCases {
		names[i] = c.name
	}
	return names
}

func (c TFTest) lookup() (tfTestCase, error) {
	i := slices.IndexFunc(tfTestCases, func(tc tfTestCase) bool { return tc.name == c.Case })
	if i < 0 {
		return tfTestCase{}, fmt.Errorf("tf-test: unknown case %q (want one of %s)", c.Case, strings.Join(TFTestCases(), ", "))
	}
	return tfTestCases[i], nil
}

// Header implements Generator. The capacity is the test's memory limit.
func (c TFTest) Header() trace.Header {
	h := header("tf-test", "tf-test "+c.Case, c)
	if tc, err := c.lookup(); err == nil {
		h.CapacityBytes = tc.capacity
	}
	return h
}

// Validate reports an unknown case.
func (c TFTest) Validate() error {
	_, err := c.lookup()
	return err
}

// Generate implements Generator.
func (c TFTest) Generate(emit func(trace.Event) error) error {
	tc, err := c.lookup()
	if err != nil {
		return err
	}
	e := newEmitter(emit, 0)
	tc.gen(e)
	return e.err
}
