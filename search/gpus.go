package search

import (
	"fmt"
	"strings"
)

// GPUs. What a job may use of a GPU is less than its marketing size twice
// over. A GPU's memory is what its driver reports as the total
// (cudaMemGetInfo; hipMemGetInfo on AMD, per GCD on an MI250X), below the
// size on the box: an "80 GB" H100 has 85,017,493,504 bytes, 79.18 GiB.
// And of that, the process's CUDA context and its libraries' handles and
// workspaces (cuBLAS, cuDNN, NCCL) take some before the allocator reserves
// a byte: the context reserve. PyTorch's out-of-memory message shows it
// since 2.2, as what "this process has ... in use" exceeds what PyTorch
// reserved. What the allocator may reserve is the rest, the GPU's usable
// bytes; a trace fits a GPU when its smallest device is at most that.
// docs/fit.md gives the source of every figure.

// GPU is a GPU people run on, with its memory as its driver reports it.
type GPU struct {
	// Name is how reports name it; Aliases are other names LookupGPU
	// takes (the driver's own name among them).
	Name    string
	Aliases []string
	// TotalBytes is the driver's total.
	TotalBytes uint64
}

// GPUs are the GPUs fit weighs its answer against, smallest first.
var GPUs = []GPU{
	{Name: "H100 80GB", Aliases: []string{"h100", "h100-sxm", "h100-80gb-hbm3", "NVIDIA H100 80GB HBM3"}, TotalBytes: 85_017_493_504},
}

// DefaultContextReserveBytes is the context reserve fit assumes on a GPU:
// what the H100 that recorded traces/h100 (PyTorch 2.11, CUDA 13) showed in
// each of its four out-of-memory messages, "this process has X in use" less
// the bytes its snapshot held reserved at the failure: about 760 MiB each
// (751 to 769 MiB within the messages' rounding), rounded up; the test
// TestContextReserveIsTheH100s (diagnose) holds it to them.
const DefaultContextReserveBytes uint64 = 768 << 20

// LookupGPU returns the GPU name names: its Name or an alias, in any case,
// with spaces, dashes and underscores ignored.
func LookupGPU(name string) (GPU, error) {
	key := gpuKey(name)
	var names []string
	for _, g := range GPUs {
		names = append(names, g.Name)
		if gpuKey(g.Name) == key {
			return g, nil
		}
		for _, a := range g.Aliases {
			if gpuKey(a) == key {
				return g, nil
			}
		}
	}
	return GPU{}, fmt.Errorf("unknown GPU %q (want one of %s)", name, strings.Join(names, ", "))
}

func gpuKey(s string) string {
	return strings.NewReplacer(" ", "", "-", "", "_", "").Replace(strings.ToLower(s))
}

// GPUFit says whether a need fits on one GPU.
type GPUFit struct {
	GPU GPU
	// UsableBytes is the GPU's total less the context reserve.
	UsableBytes uint64
	Fits        bool
	// HeadroomBytes is UsableBytes less the need: negative when it does
	// not fit.
	HeadroomBytes int64
}

// FitsOn weighs need, the smallest device a trace or job runs on (fits
// false: none), against each of gpus less reserve bytes each.
func FitsOn(need uint64, fits bool, gpus []GPU, reserve uint64) []GPUFit {
	out := make([]GPUFit, len(gpus))
	for i, g := range gpus {
		usable := g.TotalBytes - min(reserve, g.TotalBytes)
		out[i] = GPUFit{GPU: g, UsableBytes: usable}
		if fits {
			out[i].Fits = need <= usable
			out[i].HeadroomBytes = int64(usable) - int64(need)
		}
	}
	return out
}
