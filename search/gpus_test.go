package search

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The table is ordered by size, and every name and alias finds one GPU.
func TestGPUTable(t *testing.T) {
	seen := map[string]string{}
	for i, g := range GPUs {
		if i > 0 {
			assert.Less(t, GPUs[i-1].TotalBytes, g.TotalBytes, "%s after %s: the table runs smallest first", g.Name, GPUs[i-1].Name)
		}
		for _, name := range append([]string{g.Name}, g.Aliases...) {
			key := gpuKey(name)
			require.NotContains(t, seen, key, "%q names both %s and %s", name, seen[key], g.Name)
			seen[key] = g.Name
			got, err := LookupGPU(name)
			require.NoError(t, err)
			assert.Equal(t, g.Name, got.Name)
		}
	}
	_, err := LookupGPU("Voodoo 5")
	assert.ErrorContains(t, err, `unknown GPU "Voodoo 5"`)
	assert.ErrorContains(t, err, "H100 80GB")
}

// The H100's total is the one its driver reported in traces/h100 (cudaMemGetInfo
// under CUDA 13), and the AMD totals are rocminfo's pool sizes per GCD.
func TestGPUTotals(t *testing.T) {
	for name, want := range map[string]uint64{
		"NVIDIA H100 80GB HBM3": 85_017_493_504,
		"MI300X":                206_141_652_992,
		"MI250X":                68_702_699_520,
		"Tesla T4":              14_909 << 20,
	} {
		g, err := LookupGPU(name)
		require.NoError(t, err)
		assert.Equal(t, want, g.TotalBytes, name)
	}
}

// A need fits when it is at most the total less the reserve; a trace that
// fits nowhere fits no GPU.
func TestFitsOn(t *testing.T) {
	g := []GPU{{Name: "small", TotalBytes: 10 << 30}, {Name: "tiny", TotalBytes: 100 << 20}}
	r := FitsOn(9<<30, true, g, 1<<30)
	assert.True(t, r[0].Fits)
	assert.Equal(t, uint64(9<<30), r[0].UsableBytes)
	assert.Equal(t, int64(0), r[0].HeadroomBytes)
	assert.False(t, r[1].Fits, "a reserve larger than the GPU leaves nothing")
	assert.Equal(t, uint64(0), r[1].UsableBytes)
	assert.Equal(t, -int64(9<<30), r[1].HeadroomBytes)

	r = FitsOn(0, false, g, 0)
	assert.False(t, r[0].Fits)
	assert.Equal(t, int64(0), r[0].HeadroomBytes)
}
