package report

import (
	"fmt"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/malloclab"
	"github.com/bfcsim/bfcsim/trace/mtrace"
	"github.com/bfcsim/bfcsim/trace/pytorch"
	"github.com/bfcsim/bfcsim/trace/tensorflow"
)

// Conversion is what converting a recording did, as `bfcsim import` and a
// replay of a recording say it in one line: the events written, and the
// format's own counts and warnings.
type Conversion struct {
	Events, Allocs, Frees int64
	PeakLiveBytes         uint64
	// Notes are format-specific counts worth a mention in the summary line
	// ("12 frees of addresses allocated before tracing dropped").
	Notes []string
	// Warnings are to be printed one per line.
	Warnings []string
	// OtherDevices are the devices of a recording of several that hold
	// allocations besides the one converted (LeftOut).
	OtherDevices []int
}

// WarningsFor are the conversion's warnings, with the devices it left out
// unless everyDevice says each is taken.
func (res Conversion) WarningsFor(everyDevice bool) []string {
	if l := res.LeftOut(); l != "" && !everyDevice {
		return append([]string{l}, res.Warnings...)
	}
	return res.Warnings
}

// LeftOut warns of the other devices that hold allocations, for a command
// that took one device of a recording of several; "" when there are none.
func (res Conversion) LeftOut() string {
	if len(res.OtherDevices) == 0 {
		return ""
	}
	return fmt.Sprintf("the snapshot has allocations on other devices too (%s), left out: pick one with --device",
		joinInts(res.OtherDevices))
}

// NewConversion summarises an importer's statistics: mtrace.Stats,
// pytorch.Stats, tensorflow.Stats or malloclab.Stats, as input.Convert and
// input.Stream.Stats return them. ok is false for anything else (nil: the
// input was a trace, and nothing was converted).
func NewConversion(stats any) (c Conversion, ok bool) {
	switch st := stats.(type) {
	case mtrace.Stats:
		return mtraceResult(st), true
	case pytorch.Stats:
		return pytorchResult(st), true
	case tensorflow.Stats:
		return tensorflowResult(st), true
	case malloclab.Stats:
		return malloclabResult(st), true
	}
	return Conversion{}, false
}

// Describe says "428 events (221 allocs, 207 frees; ...), peak live 16.9 KiB".
func (res Conversion) Describe() string {
	detail := Plural(res.Allocs, "alloc", "allocs") + ", " + Plural(res.Frees, "free", "frees")
	if len(res.Notes) > 0 {
		detail += "; " + strings.Join(res.Notes, ", ")
	}
	return fmt.Sprintf("%s (%s), peak live %s", Plural(res.Events, "event", "events"), detail, Bytes(res.PeakLiveBytes))
}

// countNote appends "N what" to notes, unless n is 0.
func countNote(notes []string, n int64, one, many string) []string {
	if n == 0 {
		return notes
	}
	return append(notes, Plural(n, one, many))
}

// skippedWarnings turns the errors skipped under --skip-invalid into
// warnings.
func skippedWarnings(errs []*trace.SyntaxError, skipped int64) []string {
	var ws []string
	for _, e := range errs {
		ws = append(ws, e.Error()+" (skipped)")
	}
	if rest := skipped - int64(len(errs)); rest > 0 {
		ws = append(ws, fmt.Sprintf("and %s more invalid lines skipped", Count(rest)))
	}
	return ws
}

// mtraceResult summarises an mtrace conversion.
func mtraceResult(st mtrace.Stats) Conversion {
	res := Conversion{Events: st.Events, Allocs: st.Allocs, Frees: st.Frees, PeakLiveBytes: st.PeakLiveBytes}
	res.Notes = countNote(res.Notes, st.DroppedFrees,
		"free of an address allocated before tracing dropped",
		"frees of addresses allocated before tracing dropped")
	res.Notes = countNote(res.Notes, st.DoubleAllocs,
		"malloc of a live address (its free was not logged)",
		"mallocs of live addresses (their frees were not logged)")
	res.Notes = countNote(res.Notes, st.FailedAllocs, "failed allocation", "failed allocations")
	res.Notes = countNote(res.Notes, st.Skipped, "invalid line skipped", "invalid lines skipped")
	if st.CutLastLine {
		res.Notes = append(res.Notes, "the last line, cut short, dropped")
	}
	res.Warnings = skippedWarnings(st.SkippedErrors, st.Skipped)
	return res
}

// pytorchResult summarises a snapshot's conversion.
func pytorchResult(st pytorch.Stats) Conversion {
	res := Conversion{Events: st.Events, Allocs: st.Allocs, Frees: st.Frees, PeakLiveBytes: st.PeakLiveBytes}
	res.Notes = append(res.Notes, deviceNote(st))
	res.OtherDevices = st.DeviceChoice.Others
	if st.Allocs == 0 && st.StartAllocs == 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("device %d has no allocations in the snapshot: a replay of this trace does nothing", st.Device))
	}
	res.Notes = countNote(res.Notes, int64(st.StartAllocs),
		"allocation live when the recording started", "allocations live when the recording started")
	res.Notes = countNote(res.Notes, int64(st.StartSegments), "segment held then", "segments held then")
	res.Notes = countNote(res.Notes, st.PendingFrees,
		"free requested but not completed (kept allocated)", "frees requested but not completed (kept allocated)")
	res.Notes = countNote(res.Notes, int64(st.SizesUnknown),
		"block of unknown size (freed during the recording; its requested size is used)",
		"blocks of unknown size (freed during the recording; their requested sizes are used)")
	res.Notes = countNote(res.Notes, st.OOMs, "allocation the program failed (out of memory)", "allocations the program failed (out of memory)")
	res.Notes = countNote(res.Notes, st.Annotations, "mark where a phase the program named begins or ends (external_annotations)",
		"marks where phases the program named begin and end (external_annotations)")
	if st.CapacityBytes > 0 {
		res.Notes = append(res.Notes, "capacity "+Bytes(st.CapacityBytes)+" (held at the failure plus device_free)")
	}
	if st.Settings != nil {
		res.Notes = append(res.Notes, "allocator settings "+settingsText(*st.Settings))
	}
	res.Notes = countNote(res.Notes, st.Dropped, "entry dropped", "entries dropped")
	for _, u := range st.Unmodelled {
		res.Warnings = append(res.Warnings, "recorded setting the pytorch model does not have: "+u)
	}
	for _, r := range st.DroppedReasons {
		res.Warnings = append(res.Warnings, "dropped: "+r)
	}
	return res
}

// deviceNote says which device was converted, and why when the snapshot
// has several.
func deviceNote(st pytorch.Stats) string {
	c := st.DeviceChoice
	switch {
	case c.Asked || c.Devices <= 1:
		return fmt.Sprintf("device %d", st.Device)
	case c.Allocs == 0:
		return fmt.Sprintf("device %d of %d, none with allocations", st.Device, c.Devices)
	}
	return fmt.Sprintf("device %d of %d, the one with the most allocations (%s)", st.Device, c.Devices, Count(c.Allocs))
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// settingsText lists recorded settings that are options of their
// allocator, as --set would take them.
func settingsText(rs trace.RecordedSettings) string {
	var kv []string
	for _, k := range rs.Keys() {
		if k != "PYTORCH_CUDA_ALLOC_CONF" {
			kv = append(kv, k+"="+rs.Options[k])
		}
	}
	return strings.Join(kv, " ")
}

// malloclabResult summarises a malloc-lab conversion.
func malloclabResult(st malloclab.Stats) Conversion {
	res := Conversion{Events: st.Events, Allocs: st.Allocs, Frees: st.Frees, PeakLiveBytes: st.PeakLiveBytes}
	res.Notes = countNote(res.Notes, st.Reallocs, "realloc", "reallocs")
	res.Notes = countNote(res.Notes, st.Skipped, "invalid line skipped", "invalid lines skipped")
	res.Warnings = append(st.Warnings, skippedWarnings(st.SkippedErrors, st.Skipped)...)
	return res
}

// tensorflowResult summarises a TensorFlow capture's conversion: the
// allocator, what of the start state was recorded and what inferred, the
// memory limit, and whether TensorBoard sampled the memory profile.
func tensorflowResult(st tensorflow.Stats) Conversion {
	res := Conversion{Events: st.Events, Allocs: st.Allocs, Frees: st.Frees, PeakLiveBytes: st.PeakLiveBytes}
	if st.JAXVersion != "" {
		res.Notes = append(res.Notes, "a JAX "+st.JAXVersion+" capture: XLA's BFC allocator")
	}
	res.Notes = append(res.Notes, "allocator "+st.Allocator)
	if len(st.Allocators) > 1 {
		n := fmt.Sprintf("%d allocators in the capture", len(st.Allocators))
		if st.AutoPicked {
			n += ", the only device allocator picked (--allocator for another)"
		}
		res.Notes = append(res.Notes, n)
	}
	if st.StartInUseBytes > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%s in use when the capture started: %s in %d chunks freed in it (recorded), %s not (inferred, no address)",
			Bytes(st.StartInUseBytes), Bytes(st.StartChunkBytes), st.StartChunks, Bytes(st.StartInferredBytes)))
	} else {
		res.Notes = append(res.Notes, "the capture starts from an empty pool")
	}
	if st.CapacityBytes > 0 {
		res.Notes = append(res.Notes, "memory limit "+Bytes(st.CapacityBytes))
	}
	if st.Settings != nil {
		who, grow, whole := "TensorFlow's allocator", "TF_FORCE_GPU_ALLOW_GROWTH=true", "its memory limit"
		if st.JAXVersion != "" {
			who, grow, whole = "XLA's allocator", "XLA_PYTHON_CLIENT_PREALLOCATE=false", "XLA_PYTHON_CLIENT_MEM_FRACTION of the device"
		}
		var how string
		switch st.Layout {
		case tensorflow.LayoutGrowth:
			how = fmt.Sprintf("grew its pool by %d regions as it needed them (%s), at the addresses its chunks show", st.Regions, grow)
		case tensorflow.LayoutPreallocate:
			how = "reserved its whole pool at the start (" + whole + "), as its chunks' addresses show"
		case tensorflow.LayoutEither:
			how = "kept within the first region a growing pool reserves, so its addresses cannot tell whether it grew; taken as preallocated (" + whole + ")"
		default:
			how = "is taken as preallocated (" + whole + "), its default: the capture's addresses cannot show whether it grew"
		}
		res.Notes = append(res.Notes, who+" "+how+"; bfc starts from "+settingsText(*st.Settings))
	}
	if st.AddressesRebased {
		res.Notes = append(res.Notes, "addresses moved to the simulated device's base, to compare")
	} else {
		res.Notes = append(res.Notes, "addresses left out (the pool's layout at the start is unknown)")
	}
	res.Notes = countNote(res.Notes, st.Steps, "step", "steps")
	if st.Inconsistent > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d events whose bytes in use do not follow from the event before: the capture lost or reordered events", st.Inconsistent))
	}
	switch {
	case st.Sampled:
		res.Warnings = append(res.Warnings, fmt.Sprintf("TensorBoard sampled this memory profile: %d snapshots of a longer run, so events are missing; the *.xplane.pb beside it has them all", st.Snapshots))
	case st.Truncated:
		res.Warnings = append(res.Warnings, fmt.Sprintf("TensorBoard kept only the %d snapshots with the least free memory of this run, so events are missing; the *.xplane.pb beside it has them all", st.Snapshots))
	}
	return res
}
