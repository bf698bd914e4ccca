package trace

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// SettingsKey is the header key under which an imported recording carries
// the settings of the allocator that made it.
const SettingsKey = "allocator_settings"

// RecordedSettings are the settings of the allocator a recording was made
// with: which bfcsim allocator models it, and that allocator's options
// (keys without the allocator's prefix, values as --set takes them). In the
// header they are one JSON object, every value a string:
//
//	"allocator_settings":{"allocator":"pytorch","expandable_segments":"true","max_split_size_mb":"unlimited"}
//
// A key that is not one of the allocator's options (PyTorch's raw
// PYTORCH_CUDA_ALLOC_CONF, say) is kept for reports and changes nothing.
type RecordedSettings struct {
	Allocator string
	Options   map[string]string
}

// Keys returns the option keys in order.
func (s RecordedSettings) Keys() []string {
	keys := make([]string, 0, len(s.Options))
	for k := range s.Options {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// MarshalJSON writes the settings as the header holds them.
func (s RecordedSettings) MarshalJSON() ([]byte, error) {
	m := make(map[string]string, len(s.Options)+1)
	for k, v := range s.Options {
		m[k] = v
	}
	m["allocator"] = s.Allocator
	return json.Marshal(m) // map keys come out sorted
}

// Settings returns the recorded allocator settings of the header, if it
// has them. A header whose allocator_settings is not an object of strings
// naming an allocator is an error, so that a replay never silently models
// another allocator than the one the recording says.
func (h Header) Settings() (RecordedSettings, bool, error) {
	raw, ok := h.Meta[SettingsKey]
	if !ok {
		return RecordedSettings{}, false, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return RecordedSettings{}, false, fmt.Errorf("the trace header's %s is not an object of strings: %w", SettingsKey, err)
	}
	s := RecordedSettings{Allocator: m["allocator"], Options: m}
	delete(m, "allocator")
	if s.Allocator == "" {
		return RecordedSettings{}, false, fmt.Errorf("the trace header's %s does not name its allocator (\"allocator\":\"pytorch\", say)", SettingsKey)
	}
	return s, true, nil
}

// SpaceSettingsKey is the header key under which an imported recording
// says what kind of device its addresses need: {"placement":"paged"} for
// one whose allocator mapped pages into a virtual range larger than the
// memory (PyTorch's expandable segments), which a contiguous device of the
// recorded capacity cannot hold.
const SpaceSettingsKey = "space_settings"

// SpaceSettings returns the header's space settings (keys without the
// "space." prefix), or nil.
func (h Header) SpaceSettings() (map[string]string, error) {
	raw, ok := h.Meta[SpaceSettingsKey]
	if !ok {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("the trace header's %s is not an object of strings: %w", SpaceSettingsKey, err)
	}
	return m, nil
}

// ExpandableRangesKey is the header key under which an imported recording
// says where each of its expandable segments' address ranges starts: the
// lowest address the recording shows mapped in it, which is where PyTorch
// maps a new segment's first pages. An allocator that models expandable
// segments starts its own there, so that it maps pages where the program
// did even below the pages a start state lists.
//
//	"expandable_ranges":[{"addr":"0x10000000000","pool":"large","stream":0}]
const ExpandableRangesKey = "expandable_ranges"

// ExpandableRange is one entry of the header's expandable_ranges.
type ExpandableRange struct {
	// Addr is where the range starts (replayed address).
	Addr uint64
	// Small says it is the small pool's (2 MiB pages), else the large
	// pool's.
	Small bool
	// Stream is the CUDA stream it serves.
	Stream int64
}

type expandableRangeJSON struct {
	Addr   string `json:"addr"`
	Pool   string `json:"pool"`
	Stream int64  `json:"stream"`
}

// FormatExpandableRanges returns the header value for rs.
func FormatExpandableRanges(rs []ExpandableRange) string {
	out := make([]expandableRangeJSON, len(rs))
	for i, r := range rs {
		out[i] = expandableRangeJSON{Addr: fmt.Sprintf("%#x", r.Addr), Pool: "large", Stream: r.Stream}
		if r.Small {
			out[i].Pool = "small"
		}
	}
	b, _ := json.Marshal(out) // strings and integers always marshal
	return string(b)
}

// ExpandableRanges returns the header's expandable_ranges, or nil.
func (h Header) ExpandableRanges() ([]ExpandableRange, error) {
	raw, ok := h.Meta[ExpandableRangesKey]
	if !ok {
		return nil, nil
	}
	var in []expandableRangeJSON
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		return nil, fmt.Errorf("the trace header's %s is not a list of {addr, pool, stream}: %w", ExpandableRangesKey, err)
	}
	rs := make([]ExpandableRange, len(in))
	for i, r := range in {
		addr, err := strconv.ParseUint(r.Addr, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("the trace header's %s: entry %d: addr %q is not an address", ExpandableRangesKey, i+1, r.Addr)
		}
		if r.Pool != "small" && r.Pool != "large" {
			return nil, fmt.Errorf("the trace header's %s: entry %d: pool %q is neither small nor large", ExpandableRangesKey, i+1, r.Pool)
		}
		rs[i] = ExpandableRange{Addr: addr, Small: r.Pool == "small", Stream: r.Stream}
	}
	return rs, nil
}

// DeviceKey is the header key under which an imported recording names the
// device it holds: a PyTorch snapshot's device, of a multi-GPU job.
const DeviceKey = "device"

// Device returns the device the header names (DeviceKey), if it names one.
func (h Header) Device() (int, bool) {
	v, ok := h.Meta[DeviceKey]
	if !ok {
		return 0, false
	}
	d, err := strconv.Atoi(v)
	return d, err == nil && d >= 0
}
