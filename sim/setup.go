package sim

import (
	"maps"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
)

// Setup is what a trace's header says about replaying it: the device it
// was recorded on, and the settings and layout of the allocator that
// recorded it.
type Setup struct {
	// CapacityBytes is the recorded device's size, or 0.
	CapacityBytes uint64
	// Recorded are the recorded allocator's settings (Config.Recorded).
	// A recording whose header has none gets its framework's allocator
	// with no options (its defaults): Recorded.Allocator names the
	// allocator of every recording bfcsim imports.
	Recorded trace.RecordedSettings
	// SpaceOptions are what the recording's addresses need of a virtual
	// device (the header's space_settings), or nil.
	SpaceOptions allocators.Options
	// ExpandableRanges are where its expandable segments' ranges start
	// (Config.ExpandableRanges).
	ExpandableRanges []trace.ExpandableRange
	// Source is where the trace came from (the header's source:
	// "pytorch-snapshot", "jax-profiler", …).
	Source string
}

// SetupOf reads a trace header's replay settings. A header whose settings
// do not parse is an error, so that a replay never silently models another
// allocator or layout than the recording says.
func SetupOf(h trace.Header) (Setup, error) {
	s := Setup{CapacityBytes: h.CapacityBytes, Source: h.Source}
	var err error
	var ok bool
	if s.Recorded, ok, err = h.Settings(); err != nil {
		return Setup{}, err
	}
	if !ok {
		// A recording whose header names no settings still ran its
		// framework's allocator: a PyTorch snapshot from before
		// allocator_settings (PyTorch 2.6) ran PyTorch's, as far as it
		// shows with its defaults. Other settings are then what-ifs.
		if a := sourceAllocators[h.Source]; a != "" {
			s.Recorded = trace.RecordedSettings{Allocator: a}
		}
	}
	sp, err := h.SpaceSettings()
	if err != nil {
		return Setup{}, err
	}
	if len(sp) > 0 {
		s.SpaceOptions = allocators.Options(sp)
	}
	if s.ExpandableRanges, err = h.ExpandableRanges(); err != nil {
		return Setup{}, err
	}
	return s, nil
}

// sourceAllocators names, by the header's source, the allocator that
// models the one a recording ran.
var sourceAllocators = map[string]string{
	"pytorch-snapshot":    "pytorch",
	"tensorflow-profiler": "bfc",
	"jax-profiler":        "bfc",
}

// RecordedFirst returns specs with the recorded allocator first: moved to
// the front if specs has it, else added there with no options. specs is
// returned as it is for a trace that names no allocator.
func (s Setup) RecordedFirst(specs []AllocatorSpec) []AllocatorSpec {
	name := s.Recorded.Allocator
	if name == "" {
		return specs
	}
	out := []AllocatorSpec{{Name: name}}
	for _, sp := range specs {
		if sp.Name == name {
			out[0] = sp
		} else {
			out = append(out, sp)
		}
	}
	return out
}

// Capacity returns the device capacity to replay on: given, else the
// recorded one, else DefaultCapacity.
func (s Setup) Capacity(given uint64) uint64 {
	switch {
	case given > 0:
		return given
	case s.CapacityBytes > 0:
		return s.CapacityBytes
	}
	return DefaultCapacity
}

// Apply sets cfg up to replay the trace: the recorded settings and ranges,
// and, on a virtual device, the space options the recording's addresses
// need under those given in cfg (which win).
func (s Setup) Apply(cfg *Config) {
	cfg.Recorded = s.Recorded
	cfg.ExpandableRanges = s.ExpandableRanges
	if len(s.SpaceOptions) > 0 && (cfg.Space.Kind == "" || cfg.Space.Kind == "virtual") {
		merged := maps.Clone(s.SpaceOptions)
		maps.Copy(merged, cfg.Space.Options)
		cfg.Space.Options = merged
	}
}
