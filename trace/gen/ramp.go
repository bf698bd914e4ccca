package gen

import (
	"fmt"

	"github.com/bfcsim/bfcsim/trace"
)

// Ramp allocates every size from From to To (by Step) in order, or with
// Shuffle in an order drawn from Seed, and then, with FreeAll, frees them in
// the order they were allocated. It is the shape of
// TensorFlow's own allocator conformance tests: the defaults are the NoDups
// test, sizes 1..1023, after which a BFC allocator on a 1 GiB device without
// growth reports 1023 allocations, 654336 bytes in use at the peak and a
// largest allocation of 1024 bytes.
type Ramp struct {
	// Seed orders the sizes when Shuffle is set.
	Seed uint64 `help:"seed for the order of sizes with --shuffle"`
	// Shuffle allocates the sizes in a random order instead of ascending.
	// The sizes are held in memory, one word each.
	Shuffle bool `help:"allocate the sizes in a random order"`
	// From is the first size, in bytes.
	From int64 `help:"first size (bytes)"`
	// To is the last size, in bytes, included when (To-From) is a multiple
	// of Step.
	To int64 `help:"last size (bytes)"`
	// Step is the distance between sizes, in bytes.
	Step int64 `help:"distance between sizes (bytes)"`
	// FreeAll frees every allocation, in allocation order, at the end.
	FreeAll bool `help:"free every allocation at the end"`
}

// DefaultRamp returns TensorFlow's NoDups test: sizes 1..1023, all freed.
func DefaultRamp() Ramp { return Ramp{Seed: 1, From: 1, To: 1023, Step: 1, FreeAll: true} }

var _ Generator = Ramp{}

// Header implements Generator.
func (c Ramp) Header() trace.Header {
	name := fmt.Sprintf("ramp from=%d to=%d step=%d", c.From, c.To, c.Step)
	if c.Shuffle {
		name += fmt.Sprintf(" shuffled seed=%d", c.Seed)
	}
	return header("ramp", name, c)
}

// Validate reports the first invalid field, if any.
func (c Ramp) Validate() error {
	ck := checker{workload: "ramp"}
	ck.atLeast("From", c.From, 0)
	ck.atLeast("To", c.To, c.From)
	ck.atLeast("Step", c.Step, 1)
	if ck.err == nil && c.To > maxTensorBytes {
		ck.fail("to must be at most %d, got %d", int64(maxTensorBytes), c.To)
	}
	if ck.err == nil && c.Shuffle && (c.To-c.From)/c.Step >= maxHeld {
		ck.fail("with shuffle, at most %d sizes (they are held in memory), got %d", maxHeld, (c.To-c.From)/c.Step+1)
	}
	return ck.err
}

// Generate implements Generator.
func (c Ramp) Generate(emit func(trace.Event) error) error {
	if err := c.Validate(); err != nil {
		return err
	}
	e := newEmitter(emit, 0)
	first := e.nextID
	// Sizes From, From+Step, ... up to To, counted so that no sum overflows.
	n := (c.To-c.From)/c.Step + 1
	if c.Shuffle {
		sizes := make([]int64, n)
		for i := range sizes {
			sizes[i] = c.From + int64(i)*c.Step
		}
		rng := newRand(c.Seed)
		rng.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })
		for _, size := range sizes {
			e.alloc(size, "")
		}
	} else {
		for i := int64(0); i < n && e.err == nil; i++ {
			e.alloc(c.From+i*c.Step, "")
		}
	}
	if c.FreeAll {
		for id := first; id < e.nextID && e.err == nil; id++ {
			e.free(id)
		}
	}
	return e.err
}
