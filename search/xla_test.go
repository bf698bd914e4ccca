package search

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fraction gives XLA at least the limit (it takes size_t(total ×
// fraction)), and one step less at three significant digits would not.
func TestXLAFraction(t *testing.T) {
	f, ok := XLAFraction(756_023_296, 85_017_493_504)
	require.True(t, ok)
	assert.Equal(t, "0.0089", f)

	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		total := 1<<30 + rng.Uint64N(200<<30)
		limit := 1 + rng.Uint64N(total)
		s, ok := XLAFraction(limit, total)
		require.True(t, ok, "%d of %d", limit, total)
		v, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, uint64(float64(total)*v), limit, "%s of %d for %d", s, total, limit)
		step := math.Pow(10, math.Floor(math.Log10(v))-2)
		less := v - step
		require.Less(t, uint64(float64(total)*less), limit, "%s of %d for %d: %g would do", s, total, limit, less)
	}
	f, ok = XLAFraction(7<<20, 100<<20)
	require.True(t, ok)
	assert.Equal(t, "0.07", f, "exactly a step: no step more")
	_, ok = XLAFraction(2<<30, 1<<30)
	assert.False(t, ok, "more than the GPU has")
}

func TestXLAEnv(t *testing.T) {
	line, ok := XLAEnv(map[string]string{"allow_growth": "true"}, 1<<30, 80<<30)
	assert.True(t, ok)
	assert.Equal(t, "export XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=0.0125", line)
	line, _ = XLAEnv(map[string]string{"allow_growth": "false"}, 1<<30, 0)
	assert.Equal(t, "unset XLA_PYTHON_CLIENT_PREALLOCATE", line, "no GPU given: no fraction")
	_, ok = XLAEnv(map[string]string{"allow_growth": "false"}, 100<<30, 80<<30)
	assert.False(t, ok)
}
