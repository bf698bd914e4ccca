package allocators

import (
	"fmt"
	"slices"
	"strings"
)

// Factory builds one kind of allocator from text options.
type Factory struct {
	Name    string
	Summary string
	Options []Option
	// New builds the allocator over sp and returns it with its effective
	// options (every option, defaults included, typed) for reports.
	New func(sp Space, o Options) (Allocator, map[string]any, error)
	// Bounds are the options that only bound the memory the allocator may
	// hold, or say what to do with a recording's decisions, without
	// changing how it decides: a recording replayed with other values of
	// them is not a what-if of other settings.
	Bounds []string
	// LimitOption is the option that limits the memory the allocator may
	// reserve on a device, as its reference takes a limit (pytorch's
	// memory_limit: set_per_process_memory_fraction); "" when the limit is
	// the device's capacity. A search for the smallest device varies it.
	LimitOption string
	// Granularity is the step, in bytes, in which the reference's memory
	// limit is worth stating (0: the space's granule).
	Granularity uint64
}

// Factories returns the one table of allocators, in the order reports list
// them. It is a function, not a variable, because aligned builds its base
// allocator through the same table. The caller owns the slice.
func Factories() []Factory {
	return []Factory{
		{
			Name:    "bfc",
			Summary: "TensorFlow's best-fit-with-coalescing allocator (classic TF behaviour)",
			Options: bfcOptions,
			New:     newBFCFromOptions,
			Bounds:  []string{"memory_limit"},
			// TensorFlow takes a GPU's memory limit in MiB
			// (VirtualDeviceConfiguration.memory_limit).
			Granularity: 1 << 20,
		},
		{
			Name:    "arena",
			Summary: "bump-pointer arena: O(1) allocation, no individual free, reset when empty",
			Options: arenaOptions,
			New:     newArenaFromOptions,
		},
		{
			Name:    "aligned",
			Summary: "TBB-style cache-aligned allocation over a base allocator",
			Options: alignedOptions,
			New:     newAlignedFromOptions,
		},
		{
			Name:    "naive",
			Summary: "one device reservation per allocation (cudaMalloc per tensor)",
			Options: nil,
			New: func(sp Space, o Options) (Allocator, map[string]any, error) {
				if _, err := newSettings("naive", nil, o); err != nil {
					return nil, nil, err
				}
				return NewNaive(sp), map[string]any{}, nil
			},
		},
		{
			Name:        "pytorch",
			Summary:     "PyTorch's CUDA caching allocator: small/large pools, stream-aware best fit, segment sizing, OOM ladder",
			Options:     pytorchOptions,
			New:         newPyTorchFromOptions,
			Bounds:      PyTorchBounds,
			LimitOption: "memory_limit",
			// Segments are whole multiples of 2 MiB (kRoundLarge), and
			// so is every limit that changes an outcome.
			Granularity: ptRoundLarge,
		},
		{
			Name:    "planner",
			Summary: "offline greedy-by-size placement of the whole trace, the near-optimal reference (reads the trace twice)",
			Options: plannerOptions,
			New:     newGreedyBySizeFromOptions,
		},
	}
}

// DefaultNames are the allocators replay runs when none are named.
var DefaultNames = []string{"bfc", "arena", "aligned", "naive"}

// Names returns the allocators' names in table order.
func Names() []string {
	fs := Factories()
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return names
}

// Lookup returns the factory of the named allocator.
func Lookup(name string) (Factory, error) {
	fs := Factories()
	i := slices.IndexFunc(fs, func(f Factory) bool { return f.Name == name })
	if i < 0 {
		return Factory{}, fmt.Errorf("unknown allocator %q (want one of %s)", name, strings.Join(Names(), ", "))
	}
	return fs[i], nil
}

// New builds the named allocator over sp with options o.
func New(name string, sp Space, o Options) (Allocator, map[string]any, error) {
	f, err := Lookup(name)
	if err != nil {
		return nil, nil, err
	}
	return f.New(sp, o)
}
