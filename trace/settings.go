package trace

import (
	"encoding/json"
	"fmt"
	"slices"
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
