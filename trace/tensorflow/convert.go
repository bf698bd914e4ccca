// Package tensorflow imports TensorFlow profiler captures: the XSpace
// (*.xplane.pb) that tf.profiler and the Keras TensorBoard callback write,
// and TensorBoard's derived *.memory_profile.json.gz. Each allocation and
// free a TensorFlow allocator made in the capture window (the
// MemoryAllocation and MemoryDeallocation events BFCAllocator::AddTraceMe
// records, with the chunk's address, requested size and size) becomes a
// trace event; the allocator's running stats on each event give the bytes
// in use when the window opened and the memory limit.
//
// A capture starts mid-run. What is known of the memory in use when it
// opened goes first, between the marks "start state" and "recording
// starts": a chunk allocated before the window and freed in it, with the
// address and sizes its free records; and the rest of the bytes the
// allocator had in use, which no event names, as one allocation without an
// address. Stats says how much of each.
package tensorflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
)

// Options tune a conversion.
type Options struct {
	// Name names the trace in its header; "" uses the allocator's name.
	Name string
	// Allocator picks the allocator whose events are converted
	// ("GPU_0_bfc"); "" takes the only one, and fails with
	// *SeveralAllocatorsError when the capture has more.
	Allocator string
}

// AllocatorCount is one allocator of a capture and its number of events.
type AllocatorCount struct {
	Name   string
	Events int
}

// SeveralAllocatorsError is the error for a capture with events of more
// than one allocator and no Options.Allocator: it lists them, busiest
// first.
type SeveralAllocatorsError struct {
	Allocators []AllocatorCount
}

func (e *SeveralAllocatorsError) Error() string {
	parts := make([]string, len(e.Allocators))
	for i, a := range e.Allocators {
		parts[i] = fmt.Sprintf("%s (%d events)", a.Name, a.Events)
	}
	return fmt.Sprintf("the capture holds the events of %d allocators: %s; pick one with --allocator NAME",
		len(e.Allocators), strings.Join(parts, ", "))
}

// Stats describe a conversion.
type Stats struct {
	// Format is "xplane" or "memory_profile".
	Format string
	// Allocator is the allocator converted; Allocators every allocator of
	// the capture, busiest first.
	Allocator  string
	Allocators []AllocatorCount
	// Events counts the events written, header aside; Allocs and Frees
	// the allocations and frees of the window.
	Events, Allocs, Frees int64
	Steps                 int64
	// CapacityBytes is TensorFlow's memory limit: bytes in use plus
	// reserved plus available, on the first event. 0 when the capture does
	// not say (an allocator without a limit).
	CapacityBytes uint64
	// StartInUseBytes is what the allocator had in use when the window
	// opened; StartChunks and StartChunkBytes the part of it recorded (chunks
	// allocated before and freed in the window, with their addresses), and
	// StartInferredBytes the rest, inferred from the stats.
	StartInUseBytes    uint64
	StartChunks        int
	StartChunkBytes    uint64
	StartInferredBytes uint64
	// WindowPs is the time from the first event to the last, in
	// picoseconds.
	WindowPs int64
	// Inconsistent counts events whose bytes in use do not follow from
	// the one before (previous ± chunk size), which a capture whose events
	// came out of order, or that mixes allocator instances, shows.
	Inconsistent int64
	// Snapshots, Sampled and Truncated describe a memory_profile.json.gz:
	// its snapshots, and whether TensorBoard sampled them (kept some of a
	// longer run) or kept only the 1,000 with the least free memory.
	Snapshots          int
	Sampled, Truncated bool
	// PeakLiveBytes is the most bytes the trace holds allocated at once.
	PeakLiveBytes uint64
	// RecordedPeakInUseBytes and RecordedEndInUseBytes are what the
	// allocator had in use (chunk sizes) at its peak in the window and
	// after its last event, as the capture's stats say.
	RecordedPeakInUseBytes, RecordedEndInUseBytes uint64
	// JAXVersion is the version of JAX that made the capture (its
	// "/host:metadata" plane's jax_version); "" for TensorFlow's.
	JAXVersion string
	// Layout is how the pool was laid out, as a capture from an empty pool
	// shows it: LayoutPreallocate, LayoutGrowth or LayoutEither; "" when
	// the addresses fit neither, or the capture starts mid-run.
	Layout string
	// Regions counts the regions the pool reserved, as the trace's
	// reserve events give them (layoutGrowth: one per region it grew by;
	// otherwise the one preallocated region).
	Regions int
	// Settings are the bfc options a device BFC pool ran with
	// (recordedSettings), written into the header.
	Settings *trace.RecordedSettings
	// AutoPicked says the capture has several allocators and Allocator
	// was picked as its only device allocator (a host allocator, pinned
	// memory for transfers, is never picked by default).
	AutoPicked bool
	// AddressesRebased says the capture starts from an empty pool, so its
	// addresses are in the trace, moved by the same amount to the
	// simulated device's base (the first chunk at 1<<40). Otherwise the
	// trace has none: the layout of what was in use before is unknown.
	AddressesRebased bool
}

// Convert reads an XSpace capture from r and writes the trace of one of its
// allocators to w. file names r in errors.
func Convert(ctx context.Context, r io.Reader, file string, w *trace.Writer, opt Options) (Stats, error) {
	evs, meta, err := readXSpace(r, file)
	if err != nil {
		return Stats{}, err
	}
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	st := Stats{Format: "xplane", JAXVersion: meta["jax_version"]}
	return st, writeEvents(evs, file, w, opt, &st)
}

// pickAllocator chooses the allocator to convert and counts them all.
func pickAllocator(evs []memEvent, opt Options, st *Stats) (string, error) {
	counts := map[string]int{}
	for _, e := range evs {
		counts[e.allocator]++
	}
	for name, n := range counts {
		st.Allocators = append(st.Allocators, AllocatorCount{Name: name, Events: n})
	}
	slices.SortFunc(st.Allocators, func(a, b AllocatorCount) int {
		return cmp.Or(cmp.Compare(b.Events, a.Events), cmp.Compare(a.Name, b.Name))
	})
	switch {
	case len(counts) == 0:
		return "", fmt.Errorf("%w: TensorFlow records them with the profiler's host tracer at level 2 or more (its default), for allocators that keep stats (BFC); see docs/recording.md", errNoMemoryEvents)
	case opt.Allocator != "":
		if counts[opt.Allocator] == 0 {
			names := make([]string, len(st.Allocators))
			for i, a := range st.Allocators {
				names[i] = a.Name
			}
			return "", fmt.Errorf("--allocator %s: the capture has no events of it (it has %s)", opt.Allocator, strings.Join(names, ", "))
		}
		return opt.Allocator, nil
	case len(counts) > 1:
		var device []string
		for _, a := range st.Allocators {
			if !isHostAllocator(a.Name) {
				device = append(device, a.Name)
			}
		}
		if len(device) != 1 {
			return "", &SeveralAllocatorsError{Allocators: st.Allocators}
		}
		st.AutoPicked = true
		return device[0], nil
	}
	return st.Allocators[0].Name, nil
}

// recordedSettings are the bfc options that start it as the capture's
// allocator was configured, for a device BFC pool (GPU_0_bfc) whose layout
// the addresses show.
//
//   - JAX's GPU client makes a tsl::BFCAllocator with its defaults
//     (garbage collection off) and allow_growth = !preallocate: it reserves
//     its whole pool, XLA_PYTHON_CLIENT_MEM_FRACTION of the device, at the
//     first allocation, unless XLA_PYTHON_CLIENT_PREALLOCATE=false makes it
//     grow.
//   - TensorFlow's GPUBFCAllocator (preset tf-gpu: garbage collection on)
//     reserves its memory limit whole unless allow_growth
//     (TF_FORCE_GPU_ALLOW_GROWTH=true) makes it grow.
//
// A capture whose addresses cannot show the layout (it starts mid-run)
// gets the framework's default, preallocation. Nil for another allocator
// (a TPU's, a host's).
func recordedSettings(st *Stats) *trace.RecordedSettings {
	if !isDeviceBFC(st.Allocator) {
		return nil
	}
	growth := strconv.FormatBool(st.Layout == LayoutGrowth)
	if st.JAXVersion != "" {
		return &trace.RecordedSettings{Allocator: "bfc", Options: map[string]string{"allow_growth": growth}}
	}
	opts := map[string]string{"preset": "tf-gpu"}
	if st.Layout == LayoutGrowth {
		opts["allow_growth"] = growth
	}
	return &trace.RecordedSettings{Allocator: "bfc", Options: opts}
}

// isDeviceBFC says whether an allocator is a GPU's BFC pool, as TensorFlow
// and XLA name them (GPU_0_bfc).
func isDeviceBFC(name string) bool {
	rest, ok := strings.CutPrefix(name, "GPU_")
	if !ok {
		return false
	}
	n, ok := strings.CutSuffix(rest, "_bfc")
	if !ok || n == "" {
		return false
	}
	_, err := strconv.ParseUint(n, 10, 32)
	return err == nil
}

// isHostAllocator says whether an allocator serves host memory (pinned
// buffers for transfers: TensorFlow's gpu_host_bfc, XLA's
// xla_gpu_host_bfc, cpu allocators) rather than a device's.
func isHostAllocator(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "host") || strings.Contains(n, "cpu")
}

// writeEvents writes the trace of one allocator's events. It keeps them in
// all's own array: the caller's events are not used after.
func writeEvents(all []memEvent, file string, w *trace.Writer, opt Options, st *Stats) error {
	name, err := pickAllocator(all, opt, st)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	st.Allocator = name
	evs := slices.DeleteFunc(all, func(e memEvent) bool { return e.allocator != name })
	// The allocator's lock orders its events; their times follow it.
	slices.SortStableFunc(evs, func(a, b memEvent) int { return cmp.Or(cmp.Compare(a.ps, b.ps), cmp.Compare(a.seq, b.seq)) })
	first, last := evs[0], evs[len(evs)-1]
	st.WindowPs = last.ps - first.ps

	// The bytes in use before the first event, and the memory limit.
	start := first.inUse
	if first.alloc {
		start -= first.chunk
	} else {
		start += first.chunk
	}
	if first.hasInUse && start > 0 {
		st.StartInUseBytes = uint64(start)
	}
	if first.hasAvailable && first.hasInUse {
		if limit := first.inUse + first.reserved + first.available; limit > 0 {
			st.CapacityBytes = uint64(limit)
		}
	}

	// Chunks allocated before the window: the frees of addresses the window
	// did not allocate.
	type chunk struct {
		addr             uint64
		requested, chunk int64
		op               string
	}
	var pre []chunk
	live := map[uint64]bool{}
	prevInUse, havePrev := int64(0), false
	for _, e := range evs {
		if e.alloc {
			live[e.addr] = true
		} else if live[e.addr] {
			delete(live, e.addr)
		} else {
			pre = append(pre, chunk{e.addr, e.requested, e.chunk, e.op})
		}
		if e.hasInUse {
			want := prevInUse + e.chunk
			if !e.alloc {
				want = prevInUse - e.chunk
			}
			if havePrev && want != e.inUse && (e.alloc || e.chunk > 0) {
				st.Inconsistent++
			}
			prevInUse, havePrev = e.inUse, true
		}
	}
	var preBytes uint64
	for _, c := range pre {
		preBytes += uint64(max(c.chunk, 0))
	}
	st.StartChunks, st.StartChunkBytes = len(pre), preBytes
	if st.StartInUseBytes > preBytes {
		st.StartInferredBytes = st.StartInUseBytes - preBytes
	}

	// Addresses: a capture from an empty pool starts at the pool's first
	// region, so its addresses, moved to the simulated device's base, are
	// where a faithful replay puts its chunks. The regions the pool
	// reserved go into the trace as reserve events before the allocation
	// that made each (the lowest at the base), so that a replay puts its
	// regions where the device put them. A capture that starts mid-run
	// leaves the layout of what was in use unknown: its addresses could
	// not be compared, and are left out of the trace.
	var shift uint64
	keepAddr := st.StartInUseBytes == 0
	var regions []region
	if keepAddr {
		var lowest uint64
		for _, e := range evs {
			if e.alloc {
				lowest = e.addr
				break
			}
		}
		if st.CapacityBytes > 0 {
			var layout poolLayout
			layout, regions = inferLayout(evs, st.CapacityBytes)
			switch layout {
			case layoutGrowth:
				st.Layout = LayoutGrowth
				for _, r := range regions {
					lowest = min(lowest, r.base)
				}
			case layoutPreallocate, layoutEither:
				st.Layout = LayoutPreallocate
				if layout == layoutEither {
					st.Layout = LayoutEither
				}
				regions = nil
				if i := slices.IndexFunc(evs, func(e memEvent) bool { return e.alloc }); i >= 0 {
					regions = []region{{base: evs[i].addr, size: st.CapacityBytes &^ (bfcRound - 1), event: i}}
				}
			}
		}
		st.Regions = len(regions)
		shift = simBase - lowest
		st.AddressesRebased = true
	}

	traceName := opt.Name
	if traceName == "" {
		traceName = name
	}
	// What TensorFlow had in use (chunk sizes, the start state's
	// included) at its peak in the window and at the end, to compare
	// with the replay's.
	var peakInUse int64
	for _, e := range evs {
		peakInUse = max(peakInUse, e.inUse)
	}
	st.RecordedPeakInUseBytes, st.RecordedEndInUseBytes = uint64(max(peakInUse, 0)), uint64(max(last.inUse, 0))
	meta := map[string]string{
		"tf_allocator": strconv.Quote(name),
		"capture":      strconv.Quote(st.Format),
	}
	if first.hasInUse {
		meta["recorded_peak_in_use_bytes"] = strconv.FormatUint(st.RecordedPeakInUseBytes, 10)
		meta["recorded_end_in_use_bytes"] = strconv.FormatUint(st.RecordedEndInUseBytes, 10)
	}
	if st.Layout != "" {
		// How the pool was laid out, and the regions the reserve events
		// carry, for reports.
		meta["pool_layout"] = strconv.Quote(st.Layout)
		meta["pool_regions"] = strconv.Itoa(st.Regions)
	}
	source := "tensorflow-profiler"
	if st.JAXVersion != "" {
		source = "jax-profiler"
		meta["jax_version"] = strconv.Quote(st.JAXVersion)
	}
	if s := recordedSettings(st); s != nil {
		st.Settings = s
		j, err := s.MarshalJSON()
		if err != nil {
			return err
		}
		meta[trace.SettingsKey] = string(j)
	}
	if err := w.WriteHeader(trace.Header{
		Name: traceName, Source: source, CapacityBytes: st.CapacityBytes, TimeUnit: "ns", Meta: meta,
	}); err != nil {
		return err
	}
	var nextID uint64 = 1
	ids := map[uint64]uint64{} // address → id of the live allocation there
	var liveBytes uint64
	write := func(ev trace.Event) error {
		st.Events++
		switch ev.Op {
		case trace.OpAlloc:
			liveBytes += ev.Size
			st.PeakLiveBytes = max(st.PeakLiveBytes, liveBytes)
		}
		return w.Write(ev)
	}
	sizeOf := map[uint64]uint64{} // id → requested size
	alloc := func(addr uint64, hasAddr bool, requested, chunkSize int64, op string, t float64, hasT bool) error {
		size := uint64(max(requested, 0))
		if size == 0 {
			size = uint64(max(chunkSize, 0))
		}
		ev := trace.Event{Op: trace.OpAlloc, ID: nextID, Size: size, Tag: op}
		if hasAddr {
			ids[addr] = nextID
			if keepAddr {
				ev.Addr, ev.Flags = addr+shift, ev.Flags|trace.HasAddr
			}
		}
		if chunkSize > 0 && uint64(chunkSize) >= size {
			ev.Block, ev.Flags = uint64(chunkSize), ev.Flags|trace.HasBlock
		}
		if hasT {
			ev.T, ev.Flags = t, ev.Flags|trace.HasT
		}
		sizeOf[nextID] = size
		nextID++
		return write(ev)
	}
	if len(pre) > 0 || st.StartInferredBytes > 0 {
		if err := write(trace.Event{Op: trace.OpMark, Name: startStateMark}); err != nil {
			return err
		}
		for _, c := range pre {
			if err := alloc(c.addr, true, c.requested, c.chunk, c.op, 0, false); err != nil {
				return err
			}
		}
		if st.StartInferredBytes > 0 {
			ev := trace.Event{Op: trace.OpAlloc, ID: nextID, Size: st.StartInferredBytes, Tag: "in use before the capture, not freed in it"}
			nextID++
			if err := write(ev); err != nil {
				return err
			}
		}
		if err := write(trace.Event{Op: trace.OpMark, Name: recordingStartsMark}); err != nil {
			return err
		}
	}
	// A step ends when an event of a later step comes: events of several
	// threads interleave, so an earlier step's stragglers do not start it
	// again.
	step, haveStep := int64(0), false
	for i, e := range evs {
		t := float64(e.ps-first.ps) / 1000
		if len(regions) > 0 && regions[0].event == i {
			r := regions[0]
			regions = regions[1:]
			if err := write(trace.Event{Op: trace.OpReserve, Addr: r.base + shift, Size: r.size, T: t, Flags: trace.HasAddr | trace.HasT}); err != nil {
				return err
			}
		}
		if e.hasStep && e.step > 0 {
			if haveStep && e.step > step {
				if err := write(trace.Event{Op: trace.OpStep, Name: "step " + strconv.FormatInt(step, 10), T: t, Flags: trace.HasT}); err != nil {
					return err
				}
				st.Steps++
			}
			if !haveStep || e.step > step {
				step, haveStep = e.step, true
			}
		}
		if e.alloc {
			if id, ok := ids[e.addr]; ok {
				// An allocation at a live address: the capture lost its
				// free. Free it first, so the trace stays valid.
				if err := write(trace.Event{Op: trace.OpFree, ID: id, T: t, Flags: trace.HasT}); err != nil {
					return err
				}
				liveBytes -= sizeOf[id]
				delete(ids, e.addr)
				st.Inconsistent++
			}
			if err := alloc(e.addr, true, e.requested, e.chunk, e.op, t, true); err != nil {
				return err
			}
			st.Allocs++
			continue
		}
		id, ok := ids[e.addr]
		if !ok {
			continue // cannot happen: every free's chunk is live or in the start state
		}
		delete(ids, e.addr)
		liveBytes -= sizeOf[id]
		if err := write(trace.Event{Op: trace.OpFree, ID: id, T: t, Flags: trace.HasT}); err != nil {
			return err
		}
		st.Frees++
	}
	return w.Flush()
}

// The layouts of Stats.Layout.
const (
	// LayoutPreallocate: the pool reserved its whole limit at the first
	// allocation (XLA's default, TensorFlow's without allow_growth).
	LayoutPreallocate = "preallocate"
	// LayoutGrowth: the pool grew a region at a time.
	LayoutGrowth = "growth"
	// LayoutEither: everything the capture allocated fits the first region
	// a growing pool reserves, so the addresses cannot tell; the replay
	// takes the pool as preallocated.
	LayoutEither = "either"
)

// simBase is where the simulated device's addresses start (SPEC: the
// virtual space's base, 1<<40).
const simBase = 1 << 40

// The marks around the start state, which allocators.Replayer reads.
const (
	startStateMark      = trace.StartStateMark
	recordingStartsMark = trace.RecordingStartsMark
)

// errEmpty is returned for an input without any byte.
var errEmpty = errors.New("empty input")
