package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
)

// A recording names the allocator it ran, with its settings or without:
// a PyTorch snapshot from before allocator_settings ran PyTorch's.
func TestSetupNamesTheRecordedAllocator(t *testing.T) {
	for _, tc := range []struct {
		h    trace.Header
		want string
	}{
		{trace.Header{Source: "pytorch-snapshot"}, "pytorch"},
		{trace.Header{Source: "pytorch-snapshot", Meta: map[string]string{trace.SettingsKey: `{"allocator":"pytorch","expandable_segments":"true"}`}}, "pytorch"},
		{trace.Header{Source: "jax-profiler"}, "bfc"},
		{trace.Header{Source: "tensorflow-profiler"}, "bfc"},
		{trace.Header{Source: "mtrace"}, ""},
		{trace.Header{Source: "gen"}, ""},
		{trace.Header{}, ""},
	} {
		s, err := SetupOf(tc.h)
		require.NoError(t, err)
		assert.Equal(t, tc.want, s.Recorded.Allocator, "source %q", tc.h.Source)
	}
	s, err := SetupOf(trace.Header{Source: "pytorch-snapshot"})
	require.NoError(t, err)
	assert.Empty(t, s.Recorded.Options, "no settings recorded: the defaults")
}

// The recorded allocator goes first, with the options it was given.
func TestRecordedFirst(t *testing.T) {
	defaults := []AllocatorSpec{{Name: "bfc"}, {Name: "arena"}, {Name: "aligned"}, {Name: "naive"}}
	pt := Setup{Recorded: trace.RecordedSettings{Allocator: "pytorch"}}
	assert.Equal(t, []AllocatorSpec{{Name: "pytorch"}, {Name: "bfc"}, {Name: "arena"}, {Name: "aligned"}, {Name: "naive"}},
		pt.RecordedFirst(defaults))

	set := []AllocatorSpec{{Name: "bfc"}, {Name: "pytorch", Options: allocators.Options{"expandable_segments": "true"}}}
	assert.Equal(t, []AllocatorSpec{{Name: "pytorch", Options: allocators.Options{"expandable_segments": "true"}}, {Name: "bfc"}},
		pt.RecordedFirst(set), "moved to the front with its options")

	jax := Setup{Recorded: trace.RecordedSettings{Allocator: "bfc"}}
	assert.Equal(t, defaults, jax.RecordedFirst(defaults), "bfc leads already")
	assert.Equal(t, defaults, Setup{}.RecordedFirst(defaults), "a trace of no recording")
}
