package pytorch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
)

// recorded turns a snapshot's allocator settings into the pytorch model's
// options, for the trace header (trace.RecordedSettings): the values in
// effect where allocator_settings gives them, and PYTORCH_CUDA_ALLOC_CONF
// for the rest. Settings the model has no option for are noted in Stats.
func (st *settings) recorded(stats *Stats) trace.RecordedSettings {
	opts := map[string]string{
		"expandable_segments":          strconv.FormatBool(st.expandable),
		"max_split_size_mb":            "unlimited",
		"garbage_collection_threshold": strconv.FormatFloat(st.gcThreshold, 'g', -1, 64),
	}
	if st.maxSplitSize >= 0 {
		opts["max_split_size_mb"] = strconv.FormatInt(st.maxSplitSize>>20, 10)
	}
	if st.conf != "" {
		opts["PYTORCH_CUDA_ALLOC_CONF"] = st.conf
	}
	for _, kv := range splitConf(st.conf) {
		key, val, _ := strings.Cut(kv, ":")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "roundup_power2_divisions":
			// One number, or PyTorch's list by size, which the model
			// takes as it is.
			if n, ok := uniformDivisions(val); ok {
				opts[key] = strconv.FormatUint(n, 10)
			} else {
				opts[key] = val
			}
		case "max_non_split_rounding_mb", "large_segment_size_mb":
			opts[key] = val
		case "per_process_memory_fraction":
			// PyTorch 2.11: set_per_process_memory_fraction from the
			// environment.
			opts["memory_fraction"] = val
		case "backend":
			if val != "native" {
				stats.Unmodelled = append(stats.Unmodelled, fmt.Sprintf("backend:%s (the model is the native caching allocator)", val))
			}
		case "expandable_segments", "max_split_size_mb", "garbage_collection_threshold", "":
			// Read from allocator_settings, where the values in effect are.
		case "pinned_use_cuda_host_register", "pinned_num_register_threads", "release_lock_on_cudamalloc",
			"pinned_use_background_threads", "graph_capture_record_stream_reuse":
			// Host (pinned) memory and locking: nothing the device model sees.
		default:
			stats.Unmodelled = append(stats.Unmodelled, kv)
		}
	}
	stats.Unmodelled = append(stats.Unmodelled, st.problems...)
	if len(stats.Unmodelled) > 0 {
		// Kept for reports, and so that advise can refuse: advice for an
		// allocator that ran otherwise than the model would not hold.
		opts["unmodelled"] = strings.Join(stats.Unmodelled, "; ")
	}
	return trace.RecordedSettings{Allocator: "pytorch", Options: opts}
}

// splitConf splits PYTORCH_CUDA_ALLOC_CONF at its commas, except those
// inside brackets (roundup_power2_divisions:[256:1,512:2,>:8]).
func splitConf(conf string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(conf); i++ {
		switch conf[i] {
		case '[':
			depth++
		case ']':
			depth = max(depth-1, 0)
		case ',':
			if depth == 0 {
				parts = append(parts, conf[start:i])
				start = i + 1
			}
		}
	}
	if start < len(conf) {
		parts = append(parts, conf[start:])
	}
	return parts
}

// uniformDivisions reads roundup_power2_divisions as one number: "4", or a
// list that gives every size the same, "[1:4,>:4]" (a list's first entry
// also sets every interval below it).
func uniformDivisions(val string) (uint64, bool) {
	if n, err := strconv.ParseUint(val, 10, 64); err == nil {
		return n, true
	}
	if !strings.HasPrefix(val, "[") || !strings.HasSuffix(val, "]") {
		return 0, false
	}
	var n uint64
	for i, item := range strings.Split(val[1:len(val)-1], ",") {
		_, v, ok := strings.Cut(item, ":")
		if !ok {
			return 0, false
		}
		d, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil || (i > 0 && d != n) {
			return 0, false
		}
		n = d
	}
	return n, true
}
