package pytorch

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// PYTORCH_CUDA_ALLOC_CONF fills in what allocator_settings leaves out, and
// what the model has no option for is listed, not silently dropped.
func TestRecordedSettings(t *testing.T) {
	for _, tc := range []struct {
		st         settings
		want       map[string]string
		unmodelled []string
	}{
		{settings{maxSplitSize: -1}, map[string]string{
			"expandable_segments": "false", "max_split_size_mb": "unlimited", "garbage_collection_threshold": "0"}, nil},
		{settings{conf: "expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:[256:4,>:4],garbage_collection_threshold:0.6",
			expandable: true, maxSplitSize: 128 << 20, gcThreshold: 0.6},
			map[string]string{"expandable_segments": "true", "max_split_size_mb": "128", "garbage_collection_threshold": "0.6",
				"roundup_power2_divisions": "4",
				"PYTORCH_CUDA_ALLOC_CONF":  "expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:[256:4,>:4],garbage_collection_threshold:0.6"}, nil},
		{settings{conf: "roundup_power2_divisions:[256:1,512:2,>:8],backend:cudaMallocAsync,max_non_split_rounding_mb:64,pinned_num_register_threads:8,foo:1",
			maxSplitSize: -1},
			map[string]string{"expandable_segments": "false", "max_split_size_mb": "unlimited", "garbage_collection_threshold": "0",
				"max_non_split_rounding_mb": "64", "roundup_power2_divisions": "[256:1,512:2,>:8]",
				"PYTORCH_CUDA_ALLOC_CONF": "roundup_power2_divisions:[256:1,512:2,>:8],backend:cudaMallocAsync,max_non_split_rounding_mb:64,pinned_num_register_threads:8,foo:1",
				"unmodelled":              "backend:cudaMallocAsync (the model is the native caching allocator); foo:1"},
			[]string{
				"backend:cudaMallocAsync (the model is the native caching allocator)",
				"foo:1",
			}},
		{settings{conf: "large_segment_size_mb:32,per_process_memory_fraction:0.5", maxSplitSize: -1},
			map[string]string{"expandable_segments": "false", "max_split_size_mb": "unlimited", "garbage_collection_threshold": "0",
				"large_segment_size_mb": "32", "memory_fraction": "0.5",
				"PYTORCH_CUDA_ALLOC_CONF": "large_segment_size_mb:32,per_process_memory_fraction:0.5"}, nil},
	} {
		var st Stats
		rs := tc.st.recorded(&st)
		assert.Equal(t, "pytorch", rs.Allocator)
		assert.Equal(t, tc.want, rs.Options, tc.st.conf)
		assert.Equal(t, tc.unmodelled, st.Unmodelled, tc.st.conf)
	}
}
