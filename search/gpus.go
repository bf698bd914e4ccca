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

// GPUs are the GPUs fit weighs its answer against, smallest first. Each
// total is one a driver reported for that GPU: exactly, where the source
// printed bytes (deviceQuery, rocminfo, the H100 of traces/h100) or MiB
// (torch.cuda.get_device_properties), and to the MiB of a PyTorch
// out-of-memory message's "total capacity" (printed to 0.01 GiB) where
// that is all there is. Drivers differ: the same GPU reports a few hundred
// MiB more or less from one driver release to another, which
// --context-reserve can absorb. docs/fit.md names every source.
var GPUs = []GPU{
	{Name: "T4", Aliases: []string{"Tesla T4", "t4-16gb"}, TotalBytes: 14_909 << 20},
	{Name: "V100 16GB", Aliases: []string{"Tesla V100-SXM2-16GB", "Tesla V100-PCIE-16GB", "v100"}, TotalBytes: 16_160 << 20},
	{Name: "A10G", Aliases: []string{"NVIDIA A10G", "A10", "NVIDIA A10"}, TotalBytes: 23_609_475_072},
	{Name: "L4", Aliases: []string{"NVIDIA L4"}, TotalBytes: 22_579 << 20},
	{Name: "RTX 4090", Aliases: []string{"NVIDIA GeForce RTX 4090", "4090"}, TotalBytes: 24_207 << 20},
	{Name: "RTX 3090", Aliases: []string{"NVIDIA GeForce RTX 3090", "GeForce RTX 3090", "3090"}, TotalBytes: 24_268 << 20},
	{Name: "RTX 5090", Aliases: []string{"NVIDIA GeForce RTX 5090", "5090"}, TotalBytes: 32_122 << 20},
	{Name: "V100 32GB", Aliases: []string{"Tesla V100-SXM2-32GB", "Tesla V100-PCIE-32GB"}, TotalBytes: 32_501 << 20},
	{Name: "A100 40GB", Aliases: []string{"NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB", "a100-40"}, TotalBytes: 40_448 << 20},
	{Name: "L40", Aliases: []string{"NVIDIA L40"}, TotalBytes: 45_465 << 20},
	{Name: "MI250X", Aliases: []string{"AMD Instinct MI250X", "mi250x-gcd", "MI250", "MI210"}, TotalBytes: 67_092_480 << 10},
	{Name: "A100 80GB", Aliases: []string{"NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "a100-80", "a100"}, TotalBytes: 81_039 << 20},
	{Name: "H100 80GB", Aliases: []string{"h100", "h100-sxm", "h100-80gb-hbm3", "NVIDIA H100 80GB HBM3"}, TotalBytes: 85_017_493_504},
	{Name: "H100 NVL", Aliases: []string{"NVIDIA H100 NVL", "h100-94gb"}, TotalBytes: 95_232 << 20},
	{Name: "H200", Aliases: []string{"NVIDIA H200", "h200-141gb"}, TotalBytes: 143_156 << 20},
	{Name: "B200", Aliases: []string{"NVIDIA B200"}, TotalBytes: 182_642 << 20},
	{Name: "MI300X", Aliases: []string{"AMD Instinct MI300X"}, TotalBytes: 201_310_208 << 10},
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
