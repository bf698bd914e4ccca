package trace

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// appendFloat's shortcut for whole numbers writes what strconv's 'f'
// format does, and every number reads back exactly.
func TestAppendFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []float64{0, math.Copysign(0, -1), 1, -1, 7, 1e15, 1700000000000007, 1<<53 - 1, 1 << 53, -(1 << 53), 1e20, 1e21, 0.5, 1e-7, 123.25}
	for range 10000 {
		xs = append(xs, float64(rng.Int64N(1<<53)), math.Trunc(rng.NormFloat64()*1e12), rng.Float64()*1e6)
	}
	for _, x := range xs {
		got := string(appendFloat(nil, x))
		if x == math.Trunc(x) && math.Abs(x) < 1e21 {
			assert.Equal(t, strconv.FormatFloat(x, 'f', -1, 64), got, "%v", x)
		}
		back, err := strconv.ParseFloat(got, 64)
		assert.NoError(t, err)
		assert.Equal(t, math.Float64bits(x), math.Float64bits(back), "%s reads back as %v", got, x)
	}
}
