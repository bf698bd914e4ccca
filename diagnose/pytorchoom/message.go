package pytorchoom

import (
	"fmt"
	"strings"
)

// Format is the shape of the message, which tells the PyTorch release that
// printed it.
type Format int

const (
	// FormatUnknown is a message cut before the words that tell its
	// release.
	FormatUnknown Format = 0
	// FormatCached is PyTorch 1.0–1.3 (aten/src/THC/THCCachingAllocator.cpp,
	// then c10/cuda/CUDACachingAllocator.cpp): "CUDA out of memory. Tried to
	// allocate X (GPU 0; T total capacity; A already allocated; F free;
	// C cached)", where cached is reserved but unallocated.
	FormatCached Format = iota
	// FormatReserved is PyTorch 1.4–2.0: "... (GPU 0; T total capacity;
	// A already allocated; F free; [L allowed; ]R reserved in total by
	// PyTorch)", later followed by "If reserved memory is >> allocated
	// memory try setting max_split_size_mb to avoid fragmentation. ...".
	FormatReserved
	// FormatCapacty is PyTorch 2.1: "... Tried to allocate X. GPU 0 has a
	// total capacty of T of which F is free. [Process P has N memory in
	// use. ]... Of the allocated memory A is allocated by PyTorch, and U is
	// reserved by PyTorch but unallocated. If reserved but unallocated
	// memory is large try setting max_split_size_mb ...". The misspelling
	// is PyTorch's.
	FormatCapacty
	// FormatCapacity is PyTorch 2.2 and later: as FormatCapacty, spelt
	// right, with "L allowed; " after the process lines when a limit is
	// set, "with P allocated in private pools (e.g., CUDA Graphs), " in
	// later releases, and the advice "... try setting
	// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ...". PyTorch's XPU
	// allocator (c10/xpu/XPUCachingAllocator.cpp) prints it too from about
	// 2.9, with the advice "Please use `empty_cache` ...".
	FormatCapacity
	// FormatXPU is PyTorch's XPU allocator before it printed the device's
	// free memory (about 2.5–2.8): "XPU out of memory. Tried to allocate
	// X. GPU 0 has a total capacity of T. Of the allocated memory A is
	// allocated by PyTorch, and U is reserved by PyTorch but unallocated.
	// Please use `empty_cache` ...".
	FormatXPU
	// FormatIPEX is the caching allocator of intel-extension-for-pytorch
	// (csrc/gpu/runtime/CachingDeviceAllocator.cpp): "XPU out of memory.
	// Tried to allocate X (GPU 0; T total capacity; A already allocated; R
	// reserved in total by PyTorch)", with no free figure. The same
	// figures follow "Current platform can NOT allocate memory block with
	// size larger than 4GB!" when it refuses a block over 4 GiB.
	FormatIPEX
	// FormatMPS is the MPS allocator of Apple GPUs
	// (aten/src/ATen/mps/MPSAllocator.mm): "MPS backend out of memory (MPS
	// allocated: R, other allocations: O[, max allowed: L]). Tried to
	// allocate X on private|shared pool.[ Use
	// PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for
	// memory allocations (may cause system failure).]" Sizes are in KB,
	// MB, GB (binary, MPS's own format_size) in older releases and KiB,
	// MiB, GiB (c10's) in recent ones.
	FormatMPS
	// FormatMPSEarly is the first MPS allocator's: "MPS backend out of
	// memory (currently allocated: D, max allowed: L). Tried to allocate X
	// on private|shared pool. ...", D being MPS allocated + other
	// allocations.
	FormatMPSEarly
)

// String names the format by the first release that printed it:
// "pytorch-1.0", "pytorch-1.4", "pytorch-2.1", "pytorch-2.2".
func (f Format) String() string {
	switch f {
	case FormatCached:
		return "pytorch-1.0"
	case FormatReserved:
		return "pytorch-1.4"
	case FormatCapacty:
		return "pytorch-2.1"
	case FormatCapacity:
		return "pytorch-2.2"
	case FormatXPU:
		return "pytorch-xpu"
	case FormatIPEX:
		return "ipex"
	case FormatMPS:
		return "pytorch-mps"
	case FormatMPSEarly:
		return "pytorch-mps-1.12"
	case FormatUnknown:
		return "unknown"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// IsMPS is whether the format is the MPS allocator's, whose figures are
// not the CUDA allocator's.
func (f Format) IsMPS() bool { return f == FormatMPS || f == FormatMPSEarly }

// printsFree is whether the format prints the device's free memory.
func (f Format) printsFree() bool {
	switch f {
	case FormatXPU, FormatIPEX, FormatMPS, FormatMPSEarly:
		return false
	}
	return true
}

// allocatorName names the allocator that prints the format, for
// sentences.
func (f Format) allocatorName() string {
	switch f {
	case FormatXPU:
		return "PyTorch's XPU allocator before 2.9"
	case FormatIPEX:
		return "intel-extension-for-pytorch's allocator"
	case FormatMPS, FormatMPSEarly:
		return "the MPS allocator"
	}
	return "PyTorch " + f.Versions()
}

// Versions is the range of PyTorch releases that print the format.
func (f Format) Versions() string {
	switch f {
	case FormatCached:
		return "1.0–1.3"
	case FormatReserved:
		return "1.4–2.0"
	case FormatCapacty:
		return "2.1"
	case FormatCapacity:
		return "2.2 and later"
	case FormatXPU:
		return "2.5–2.8"
	case FormatIPEX:
		return "intel-extension-for-pytorch"
	case FormatMPS:
		return "1.12.1 and later"
	case FormatMPSEarly:
		return "1.12"
	}
	return "unknown"
}

// Shape is the format's wording, for reports.
func (f Format) Shape() string {
	switch f {
	case FormatCached:
		return `"(GPU N; ... total capacity; ... already allocated; ... free; ... cached)"`
	case FormatReserved:
		return `"(GPU N; ... total capacity; ... already allocated; ... free; ... reserved in total by PyTorch)"`
	case FormatCapacty:
		return `"GPU N has a total capacty of ... of which ... is free"`
	case FormatCapacity:
		return `"GPU N has a total capacity of ... of which ... is free"`
	case FormatXPU:
		return `"GPU N has a total capacity of .... Of the allocated memory ..."`
	case FormatIPEX:
		return `"(GPU N; ... total capacity; ... already allocated; ... reserved in total by PyTorch)"`
	case FormatMPS:
		return `"MPS backend out of memory (MPS allocated: ..., other allocations: ..., max allowed: ...)"`
	case FormatMPSEarly:
		return `"MPS backend out of memory (currently allocated: ..., max allowed: ...)"`
	}
	return "unknown"
}

// Figure is one figure of the message: printed, or derived from printed
// ones.
type Figure struct {
	Size
	// Derived, when not empty, says how the figure was computed from
	// printed ones ("allocated + reserved but unallocated"); From and Line
	// are then empty.
	Derived string
	// From is the clause of the message the figure was read from, white
	// space collapsed, e.g. "of which 1.02 GiB is free".
	From string
	// Line is the input line the clause starts on, from 1.
	Line int
}

// Process is a line of NVML's process list, which PyTorch prints from 2.1:
// another process using the device.
type Process struct {
	PID int64
	// InUse is the memory NVML says the process uses; nil where NVML
	// reports it as not available (PyTorch then prints 17179869184.00
	// GiB).
	InUse *Figure
}

// Message is one out-of-memory message, as read. Figures the message does
// not print, or that a partial paste leaves out, are nil.
type Message struct {
	Format Format
	// Exception is the Python exception named before the message, e.g.
	// "torch.OutOfMemoryError" or "RuntimeError"; empty when the paste
	// does not show it.
	Exception string
	// Device is the device API the message names: "CUDA", "HIP" (ROCm
	// builds), "XPU", "MPS" (Apple GPUs); empty when the paste does not
	// show it.
	Device string
	// GPU is the device index; -1 when not printed.
	GPU int

	Request             *Figure
	TotalCapacity       *Figure
	Free                *Figure
	Allocated           *Figure // by PyTorch: tensors, and from 2.x free blocks of private pools
	Reserved            *Figure // by PyTorch in total; derived from 2.1; MPS: "MPS allocated", its heaps
	ReservedUnallocated *Figure // printed as "cached" before 1.4, derived in 1.4–2.0
	Allowed             *Figure // the per-process limit, when printed; MPS: "max allowed"
	PrivatePools        *Figure // "with X allocated in private pools", part of Allocated
	// ProcessInUse is this process's memory by NVML ("Including
	// non-PyTorch memory, this process has ..."), CUDA context and other
	// libraries included.
	ProcessInUse *Figure
	// SelfListed is whether NVML's list named this process, even where its
	// figure was not available.
	SelfListed bool
	// Others are the other processes NVML lists; nil when the message
	// lists none (before 2.1, or where PyTorch cannot load NVML).
	Others []Process

	// OtherAllocations (MPS) is what the process holds from Metal outside
	// PyTorch's heaps ("other allocations"): MPSGraph's and other
	// frameworks' buffers.
	OtherAllocations *Figure
	// DriverAllocated (MPS) is all the process holds from Metal, the
	// figure the high-watermark limit is tested against
	// (torch.mps.driver_allocated_memory): printed as "currently
	// allocated" by the first MPS allocator, MPS allocated + other
	// allocations since.
	DriverAllocated *Figure
	// Pool (MPS) is the pool the request was for: "private" or "shared".
	Pool string
	// NoLimit (MPS) is set when the message's form says no high-watermark
	// limit is set (PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0): it has no "max
	// allowed" and no advice.
	NoLimit bool
	// BlockLimit (IPEX) is set when intel-extension-for-pytorch refused a
	// single block larger than 4 GiB, which the platform cannot allocate.
	BlockLimit bool
	// StartsAt names where a paste that leaves out the message's start
	// begins: "the request", "the parenthesis", "the capacity sentence",
	// "the MPS figures"; empty when it starts at the device's name.
	StartsAt string
	// unitsKB is set when the message prints KB, MB, GB (MPS's own
	// format_size, binary units); figures derived from it are printed so
	// too.
	unitsKB bool

	// Advice is the setting PyTorch's own advice names: "max_split_size_mb",
	// "expandable_segments", "empty_cache" (XPU), or empty.
	Advice string
	// ConfVar is the environment variable the advice names, as printed:
	// PYTORCH_CUDA_ALLOC_CONF, PYTORCH_HIP_ALLOC_CONF, PYTORCH_ALLOC_CONF.
	ConfVar string

	// Line and EndLine are the input lines the message starts and ends on.
	Line, EndLine int
	// Text is the message as read, white space collapsed, at most
	// maxTextBytes.
	Text string
	// Truncated is set when the paste stops before the message does; Cut
	// says after what.
	Truncated bool
	Cut       string
	// Notes are remarks on the reading: an ambiguity the paste leaves, a
	// figure NVML could not report.
	Notes []string
}

// figures lists the message's figures by their JSON names, nil ones
// included, in a fixed order.
func (m *Message) figures() []namedFigure {
	return []namedFigure{
		{"request", "request", m.Request},
		{"total_capacity", "total capacity", m.TotalCapacity},
		{"free", "free", m.Free},
		{"allowed", "allowed (limit)", m.Allowed},
		{"process_in_use", "this process in use", m.ProcessInUse},
		{"allocated", "allocated by PyTorch", m.Allocated},
		{"private_pools", "  in private pools", m.PrivatePools},
		{"reserved", "reserved by PyTorch", m.Reserved},
		{"reserved_unallocated", "reserved, unallocated", m.ReservedUnallocated},
		{"other_allocations", "other allocations", m.OtherAllocations},
		{"driver_allocated", "driver allocated", m.DriverAllocated},
	}
}

type namedFigure struct {
	key, label string
	f          *Figure
}

// Missing lists the figures the message's format prints but the paste
// does not have, by their JSON names.
func (m *Message) Missing() []string {
	var out []string
	for _, nf := range m.figures() {
		if nf.f == nil && m.prints(nf.key) {
			out = append(out, nf.key)
		}
	}
	return out
}

// prints is whether the message's format always prints (or derives) the
// figure of JSON name key; figures printed only in some conditions (a
// limit, NVML's list, private pools) are not.
func (m *Message) prints(key string) bool {
	switch m.Format {
	case FormatMPS:
		switch key {
		case "request", "reserved", "other_allocations", "driver_allocated":
			return true
		case "allowed":
			return !m.NoLimit
		}
		return false
	case FormatMPSEarly:
		switch key {
		case "request", "driver_allocated", "allowed":
			return true
		}
		return false
	}
	switch key {
	case "allowed", "process_in_use", "private_pools", "other_allocations", "driver_allocated":
		return false
	case "free":
		return m.Format.printsFree()
	}
	return true
}

// versions is the release range, narrowed by what the message shows
// beyond its format.
func (m *Message) versions() string {
	if m.Format == FormatCapacity && m.Device == "XPU" {
		return "2.9 and later" // XPU's allocator printed no free figure before
	}
	if m.Format != FormatReserved {
		return m.Format.Versions()
	}
	lo, hi := 104, 200 // 1.4 … 2.0, as major*100+minor
	if m.Allowed != nil {
		lo = max(lo, 108) // set_per_process_memory_fraction
	}
	if m.Advice == "max_split_size_mb" {
		lo = max(lo, 110) // the max_split_size_mb option
	}
	switch m.Exception {
	case "torch.cuda.OutOfMemoryError":
		lo = max(lo, 113)
	case "RuntimeError":
		hi = min(hi, 112)
	}
	if lo > hi { // a fork's mixture: say only what the shape says
		return m.Format.Versions()
	}
	v := func(n int) string { return fmt.Sprintf("%d.%d", n/100, n%100) }
	if lo == hi {
		return v(lo)
	}
	return v(lo) + "–" + v(hi)
}

// variants describes what the message shows beyond its format's core.
func (m *Message) variants() []string {
	var out []string
	if m.StartsAt != "" {
		out = append(out, "a paste that starts at "+m.StartsAt)
	}
	if m.Format.IsMPS() {
		if m.unitsKB {
			out = append(out, "sizes in KB, MB, GB (binary: MPS's own format_size, older releases)")
		} else if m.Request != nil || m.Reserved != nil {
			out = append(out, "sizes in KiB, MiB, GiB (c10's format_size, recent releases)")
		}
		switch {
		case m.Allowed != nil:
			out = append(out, "the high-watermark limit (PYTORCH_MPS_HIGH_WATERMARK_RATIO × the recommended maximum working set size)")
		case m.NoLimit:
			out = append(out, "no high-watermark limit (PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0)")
		}
		if m.Pool != "" {
			out = append(out, "a request on the "+m.Pool+" pool")
		}
		if m.Advice != "" {
			out = append(out, "PyTorch's advice to set "+m.ConfVar+"=0.0")
		}
		return out
	}
	if m.Device != "" && m.Device != "CUDA" {
		d := m.Device
		switch d {
		case "HIP":
			d += " (a ROCm build of PyTorch)"
		case "XPU":
			if m.Format == FormatIPEX {
				d += " (intel-extension-for-pytorch's allocator)"
			}
		}
		out = append(out, d+" out of memory")
	}
	if m.BlockLimit {
		out = append(out, "intel-extension-for-pytorch's refusal of a block larger than 4 GiB")
	}
	if m.Allowed != nil {
		if m.Device == "XPU" {
			out = append(out, "a per-process memory limit (torch.xpu.set_per_process_memory_fraction)")
		} else {
			out = append(out, "a per-process memory limit (torch.cuda.set_per_process_memory_fraction, PyTorch 1.8 and later)")
		}
	}
	if m.SelfListed || m.Others != nil {
		out = append(out, "NVML's list of processes on the device")
	}
	if m.PrivatePools != nil {
		out = append(out, "memory in private pools (CUDA graphs)")
	}
	switch m.Advice {
	case "max_split_size_mb":
		out = append(out, "PyTorch's advice to set max_split_size_mb")
	case "expandable_segments":
		out = append(out, "PyTorch's advice to set "+m.confVar()+"=expandable_segments:True")
	case "empty_cache":
		out = append(out, "PyTorch's advice to call empty_cache")
	}
	return out
}

// confVar is the allocator's environment variable, as the message names
// it or else the one its device reads.
func (m *Message) confVar() string {
	if m.ConfVar != "" {
		return m.ConfVar
	}
	switch m.Device {
	case "HIP":
		return "PYTORCH_HIP_ALLOC_CONF"
	case "XPU":
		return "PYTORCH_XPU_ALLOC_CONF"
	}
	return "PYTORCH_CUDA_ALLOC_CONF"
}

// describe names a figure for sentences: "1.54 GiB", "about 12.75 GiB"
// for a derived one.
func describe(f *Figure) string {
	if f == nil {
		return "unknown"
	}
	if f.Derived != "" && f.Tolerance > 0 {
		return "about " + f.Printed
	}
	return f.Printed
}

// collapse joins fields with single spaces.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }
