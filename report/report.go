package report

import (
	"encoding/json"
	"strings"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/diagnose/bfcdump"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// Version is the value of the report's "bfcsim_report" key.
const Version = 1

// Report is everything bfcsim learned from one run.
type Report struct {
	Version int     `json:"bfcsim_report"`
	Traces  []Trace `json:"traces"`
}

// Trace is one replayed trace and the results of each allocator on it.
type Trace struct {
	Name          string `json:"name"`
	Path          string `json:"path"`
	Events        int64  `json:"events"`
	Allocs        int64  `json:"allocs"`
	Frees         int64  `json:"frees"`
	Steps         int64  `json:"steps"`
	PeakLiveBytes uint64 `json:"peak_live_bytes"`
	// LowerBoundBytes is the lower bound on any allocator's footprint for
	// this trace: no allocator can hold less than the most bytes live at
	// once, so it equals PeakLiveBytes.
	LowerBoundBytes uint64 `json:"lower_bound_bytes"`
	TotalAllocBytes uint64 `json:"total_alloc_bytes"`
	// PeakCallSites are the bytes live at the trace's peak by call site:
	// the largest TopCallSites, then the rest in one row; they add up to
	// PeakLiveBytes. Empty when the replay did not count them.
	PeakCallSites []CallSite `json:"peak_call_sites"`
	// Stacks and Frames name the call sites of the blocks the explore view
	// draws; they are not part of report.json.
	Stacks        *trace.StackTable `json:"-"`
	Frames        trace.FrameRule   `json:"-"`
	CapacityBytes uint64            `json:"capacity_bytes"`
	Space         string            `json:"space"`
	SkippedEvents int64             `json:"skipped_events"`
	SkippedErrors []string          `json:"skipped_errors,omitempty"`
	// Device is the device of a recording of a GPU job this trace holds
	// (a PyTorch snapshot's device), when its header names one.
	Device *int `json:"device,omitempty"`
	// Header is the trace's header line, when it has one.
	Header  *Header  `json:"header,omitempty"`
	Results []Result `json:"results"`
}

// Header is a trace's header: where it came from and the device it was
// recorded on, with every other key as it was written.
type Header struct {
	Source        string                     `json:"source,omitempty"`
	TimeUnit      string                     `json:"time_unit,omitempty"`
	CapacityBytes uint64                     `json:"capacity_bytes,omitempty"`
	Meta          map[string]json.RawMessage `json:"meta,omitempty"`
}

// Result is one allocator's metrics on one trace; docs/metrics.md defines them.
type Result struct {
	Allocator string         `json:"allocator"`
	Options   map[string]any `json:"options"`
	// OptionsFromRecording lists the options taken from the trace
	// header's allocator_settings (the recording's own), not from --set or
	// the defaults.
	OptionsFromRecording []string `json:"options_from_recording,omitempty"`
	OKAllocs             int64    `json:"ok_allocs"`
	FailedAllocs         int64    `json:"failed_allocs"`
	FirstOOMEvent        *int64   `json:"first_oom_event"`
	FirstOOMLine         *int64   `json:"first_oom_line,omitempty"`
	Stopped              bool     `json:"stopped_at_oom,omitempty"`
	PeakReservedBytes    uint64   `json:"peak_reserved_bytes"`
	// FootprintVsLowerBound is PeakReservedBytes over the trace's lower
	// bound (its peak live bytes): 1 is the best any allocator can do. It
	// is 0 when nothing was ever live.
	FootprintVsLowerBound    float64 `json:"footprint_vs_lower_bound"`
	PeakInUseBytes           uint64  `json:"peak_in_use_bytes"`
	PeakLiveBytes            uint64  `json:"peak_live_bytes"`
	FinalReservedBytes       uint64  `json:"final_reserved_bytes"`
	Fragmentation            float64 `json:"fragmentation"`
	Utilization              float64 `json:"utilization"`
	InternalWasteAtPeakBytes uint64  `json:"internal_waste_at_peak_bytes"`
	TFFragmentation          MaxMean `json:"tf_fragmentation"`
	DeviceReserveCalls       int64   `json:"device_reserve_calls"`
	DeviceReleaseCalls       int64   `json:"device_release_calls"`
	FailedDeviceReserves     int64   `json:"failed_device_reserves"`
	ModeledDeviceSeconds     float64 `json:"modeled_device_seconds"`
	// MeasuredDevice is the device time the calls took on a real GPU
	// (--space cuda); absent on a simulated device.
	MeasuredDevice *MeasuredDevice `json:"measured_device,omitempty"`
	LatencyNs      Latencies       `json:"latency_ns"`
	// LatencySampleEvery says latency_ns comes from one call in this many.
	LatencySampleEvery   int           `json:"latency_sample_every"`
	ReplaySeconds        float64       `json:"replay_seconds"`
	EventsPerSecond      float64       `json:"events_per_second"`
	Events               int64         `json:"events"`
	RecordedAddressMatch *AddressMatch `json:"recorded_address_match,omitempty"`
	// RecordedBlockMatch counts the served allocations whose trace carried
	// the recorded block size (checked) and those whose block the allocator
	// gave exactly that size (matched).
	RecordedBlockMatch *AddressMatch `json:"recorded_block_match,omitempty"`
	// RecordedOOMMatch counts the allocations the recorded program failed
	// (checked) and those the allocator failed too (matched).
	RecordedOOMMatch *AddressMatch `json:"recorded_oom_match,omitempty"`
	// RecordedDecisions says what the allocator did with the segment
	// decisions the recording carries: followed them to the end, up to an
	// event and why, or decided alone from the start (a what-if).
	RecordedDecisions *Decisions       `json:"recorded_decisions,omitempty"`
	AllocatorStats    map[string]int64 `json:"allocator_stats"`
	SpaceOptions      map[string]any   `json:"space_options"`
	OOM               *OOMDiagnostics  `json:"oom_diagnostics,omitempty"`
	// ReservedAtPeak is what the reserved bytes held at their peak: live
	// by call site, cached free, the largest free ranges and the blocks
	// that pin them. OOMExplained is the same at the first failed
	// allocation, with a verdict.
	ReservedAtPeak *Held `json:"reserved_at_peak,omitempty"`
	OOMExplained   *Held `json:"oom_explained,omitempty"`
	// Series are what plots are drawn from; they are not part of report.json.
	Series *Series `json:"-"`
}

// Series are the data plots are drawn from. Timeline, Memmap and Layout
// are there when the replay recorded them (sim.Config.Record); Layout is
// also nil when the moment asked for came after the trace ended.
type Series struct {
	Timeline *sim.Timeline
	Memmap   *sim.Memmap
	Layout   *sim.Layout
	// AllocLatency and FreeLatency are the call latencies, in nanoseconds,
	// at sim.CurveQuantiles; empty when there were no calls.
	AllocLatency, FreeLatency []int64
}

// OOMDiagnostics is what TensorFlow prints when its BFC allocator runs out
// of memory, and what it means, for an allocator that can describe its pool
// (bfc). It describes the pool right after the first failed allocation.
type OOMDiagnostics struct {
	Event        int64  `json:"event"`
	Line         int64  `json:"line"`
	RequestBytes uint64 `json:"request_bytes"`
	RoundedBytes uint64 `json:"rounded_bytes"`
	// Verdict is one word for the cause (bfcdump's Verdict constants:
	// fragmentation, out-of-memory, too-large, device-full, unexplained);
	// Explanation says it in plain language with the numbers.
	Verdict     string          `json:"verdict"`
	Explanation string          `json:"explanation"`
	Summary     bfcdump.Summary `json:"summary"`
	// Bins are the non-empty bins, as DumpMemoryLog's bin lines count them.
	Bins []OOMBin `json:"bins"`
	// Occupancy is TF's RenderOccupancy strip: 100 cells over the pool,
	// '*' requested bytes, 'x' slack inside in-use chunks, '_' free.
	Occupancy string `json:"occupancy"`
	// MemoryLog is DumpMemoryLog's text: the bin summary, every chunk, and
	// the in-use chunks by size.
	MemoryLog string `json:"memory_log"`
}

// OOMBin is one bin of DumpMemoryLog's summary.
type OOMBin struct {
	Bin            int    `json:"bin"`
	BinSizeBytes   uint64 `json:"bin_size_bytes"`
	Chunks         int64  `json:"chunks"`
	ChunksInUse    int64  `json:"chunks_in_use"`
	Bytes          uint64 `json:"bytes"`
	BytesInUse     uint64 `json:"bytes_in_use"`
	RequestedInUse uint64 `json:"requested_in_use"`
}

// NewOOMDiagnostics describes a snapshot taken at a failed allocation.
func NewOOMDiagnostics(s *bfcdump.Snapshot) *OOMDiagnostics {
	ex := bfcdump.Explain(s)
	d := &OOMDiagnostics{
		Event: s.Event, Line: s.Line,
		Verdict: ex.Verdict, Explanation: ex.Text,
		Summary:   s.Summarize(),
		Bins:      []OOMBin{},
		Occupancy: s.RenderOccupancy(),
	}
	if s.Request != nil {
		d.RequestBytes, d.RoundedBytes = s.Request.Bytes, s.Request.Rounded
	}
	for _, b := range s.Bins() {
		if b.TotalChunks == 0 {
			continue
		}
		d.Bins = append(d.Bins, OOMBin{
			Bin: b.Bin, BinSizeBytes: b.BinSize, Chunks: b.TotalChunks, ChunksInUse: b.ChunksInUse,
			Bytes: b.BytesInBin, BytesInUse: b.BytesInUse, RequestedInUse: b.RequestedInUse,
		})
	}
	var log strings.Builder
	if err := bfcdump.WriteMemoryLog(&log, s); err != nil {
		// Only a snapshot that breaks its own invariants gets here.
		log.Reset()
		log.WriteString("no memory log: " + err.Error() + "\n")
	}
	d.MemoryLog = log.String()
	return d
}

// MaxMean is a metric's maximum and mean over the replay.
type MaxMean struct {
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Latencies are the per-call latency summaries.
type Latencies struct {
	Alloc Latency `json:"alloc"`
	Free  Latency `json:"free"`
}

// Latency is one call's latency distribution, in nanoseconds.
type Latency struct {
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P99  int64   `json:"p99"`
	P999 int64   `json:"p999"`
	Max  int64   `json:"max"`
	Mean float64 `json:"mean"`
}

// AddressMatch counts allocations whose recorded outcome (an address, a
// block size, or a failure) the allocator reproduced.
type AddressMatch struct {
	Checked int64 `json:"checked"`
	Matched int64 `json:"matched"`
}

// TraceRun is what Build needs to know about one replayed trace.
type TraceRun struct {
	Name, Path    string
	Header        trace.Header
	Summary       trace.Summary
	CapacityBytes uint64
	Space         string
	Skipped       []*trace.SyntaxError
	Results       []sim.Result
	// CallSites are what the trace's call sites held at its peak
	// (trace.Reader.PeakCallSites), named from Stacks by Frames.
	CallSites []trace.SiteBytes
	Stacks    *trace.StackTable
	Frames    trace.FrameRule
}

// Build makes the report model from the runs, in order.
func Build(runs []TraceRun) Report {
	rep := Report{Version: Version, Traces: make([]Trace, 0, len(runs))}
	for _, run := range runs {
		s := run.Summary
		tr := Trace{
			Name: run.Name, Path: run.Path,
			Events: s.Events, Allocs: s.Allocs, Frees: s.Frees, Steps: s.Steps,
			PeakLiveBytes: s.PeakLiveBytes, LowerBoundBytes: s.PeakLiveBytes, TotalAllocBytes: s.TotalAllocBytes,
			CapacityBytes: run.CapacityBytes, Space: run.Space,
			SkippedEvents: s.Skipped,
			Results:       make([]Result, 0, len(run.Results)),
		}
		for _, e := range run.Skipped {
			tr.SkippedErrors = append(tr.SkippedErrors, e.Error())
		}
		if d, ok := run.Header.Device(); ok {
			tr.Device = &d
		}
		if h := run.Header; h.Version != 0 {
			tr.Header = &Header{Source: h.Source, TimeUnit: h.TimeUnit, CapacityBytes: h.CapacityBytes}
			for k, v := range h.Meta {
				if tr.Header.Meta == nil {
					tr.Header.Meta = map[string]json.RawMessage{}
				}
				tr.Header.Meta[k] = json.RawMessage(v)
			}
		}
		tr.Stacks, tr.Frames = run.Stacks, run.Frames
		tr.PeakCallSites = callSites(run.CallSites, run.Stacks, run.Frames, TopCallSites)
		if tr.PeakCallSites == nil {
			tr.PeakCallSites = []CallSite{}
		}
		for i := range run.Results {
			r := &run.Results[i]
			res := buildResult(r, tr.LowerBoundBytes)
			res.ReservedAtPeak = buildHeld(r.Held, run.Stacks, run.Frames)
			if res.OOMExplained = buildHeld(r.HeldAtOOM, run.Stacks, run.Frames); res.OOMExplained != nil {
				explainOOM(res.OOMExplained, r.Allocator, r.Options, r.FirstOOMBytes, run.CapacityBytes)
			}
			tr.Results = append(tr.Results, res)
		}
		rep.Traces = append(rep.Traces, tr)
	}
	return rep
}

// buildResult makes one allocator's result; lowerBound is the trace's lower
// bound on any footprint, its peak live bytes.
func buildResult(r *sim.Result, lowerBound uint64) Result {
	out := Result{
		Allocator:                r.Allocator,
		Options:                  r.Options,
		OKAllocs:                 r.OKAllocs,
		FailedAllocs:             r.FailedAllocs,
		Stopped:                  r.Stopped,
		PeakReservedBytes:        r.PeakReservedBytes,
		PeakInUseBytes:           r.PeakInUseBytes,
		PeakLiveBytes:            r.PeakLiveBytes,
		FinalReservedBytes:       r.FinalReservedBytes,
		Fragmentation:            r.Fragmentation(),
		Utilization:              r.Utilization(),
		InternalWasteAtPeakBytes: r.InternalWasteAtPeakBytes,
		TFFragmentation:          MaxMean{Max: r.TFFragmentationMax, Mean: r.TFFragmentationMean},
		DeviceReserveCalls:       r.Space.ReserveCalls,
		DeviceReleaseCalls:       r.Space.ReleaseCalls,
		FailedDeviceReserves:     r.Space.FailedReserves,
		ModeledDeviceSeconds:     r.Space.ModeledTime.Seconds(),
		MeasuredDevice:           measuredDevice(r.Space),
		LatencyNs:                Latencies{Alloc: latency(r.AllocLatency), Free: latency(r.FreeLatency)},
		LatencySampleEvery:       r.LatencySampleEvery,
		ReplaySeconds:            r.ReplaySeconds,
		EventsPerSecond:          r.EventsPerSecond(),
		Events:                   r.Events,
		AllocatorStats:           r.AllocatorStats,
		SpaceOptions:             r.SpaceOptions,
	}
	if lowerBound > 0 {
		out.FootprintVsLowerBound = float64(r.PeakReservedBytes) / float64(lowerBound)
	}
	if out.Options == nil {
		out.Options = map[string]any{}
	}
	if out.AllocatorStats == nil {
		out.AllocatorStats = map[string]int64{}
	}
	if r.FirstOOMEvent >= 0 {
		ev, line := r.FirstOOMEvent, r.FirstOOMLine
		out.FirstOOMEvent, out.FirstOOMLine = &ev, &line
	}
	if r.AddrChecked > 0 {
		out.RecordedAddressMatch = &AddressMatch{Checked: r.AddrChecked, Matched: r.AddrMatched}
	}
	if r.BlockChecked > 0 {
		out.RecordedBlockMatch = &AddressMatch{Checked: r.BlockChecked, Matched: r.BlockMatched}
	}
	if r.RecordedOOMs > 0 {
		out.RecordedOOMMatch = &AddressMatch{Checked: r.RecordedOOMs, Matched: r.OOMsMatched}
	}
	out.OptionsFromRecording = r.OptionsFromRecording
	out.RecordedDecisions = newDecisions(r.Decisions)
	if r.OOMSnapshot != nil {
		out.OOM = NewOOMDiagnostics(bfcdump.FromState(r.OOMSnapshot))
	}
	out.Series = &Series{
		Timeline: r.Timeline, Memmap: r.Memmap, Layout: r.Layout,
		AllocLatency: r.AllocLatency.Curve, FreeLatency: r.FreeLatency.Curve,
	}
	return out
}

func latency(l sim.Latency) Latency {
	return Latency{P50: l.P50, P90: l.P90, P99: l.P99, P999: l.P999, Max: l.Max, Mean: l.Mean}
}

// WithoutTimings returns a copy of rep whose wall-clock measurements (latency,
// replay time, events per second) are zero: the part of a report that is
// identical from run to run.
func WithoutTimings(rep Report) Report {
	out := rep
	out.Traces = make([]Trace, len(rep.Traces))
	for i, tr := range rep.Traces {
		tr.Results = append([]Result(nil), tr.Results...)
		for j := range tr.Results {
			r := &tr.Results[j]
			r.LatencyNs = Latencies{}
			r.ReplaySeconds = 0
			r.EventsPerSecond = 0
		}
		out.Traces[i] = tr
	}
	return out
}

// DumpFileName names a file -o DIR holds for one trace and allocator, such
// as "transformer-train.bfc.oom.log": kind is "oom.log", "oom.memdump" or
// "peak.memdump". Characters that do not belong in a file name become '_'.
func DumpFileName(traceName, allocator, kind string) string {
	return traceFilePrefix(traceName) + "." + cleanFileName(allocator) + "." + kind
}

// traceFilePrefix is a trace's name made fit to start a file name.
func traceFilePrefix(traceName string) string {
	name := strings.TrimLeft(cleanFileName(traceName), ".")
	if name == "" {
		name = "trace"
	}
	return name
}

// cleanFileName replaces the characters that do not belong in a file name with '_'.
func cleanFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
}

// MeasuredDevice is what a real GPU's calls took (--space cuda): their
// total time, their count, and the median and 99th percentile of one.
type MeasuredDevice struct {
	Device    string  `json:"device,omitempty"`
	Seconds   float64 `json:"seconds"`
	Calls     int64   `json:"calls"`
	CallP50Ns int64   `json:"call_p50_ns"`
	CallP99Ns int64   `json:"call_p99_ns"`
}

func measuredDevice(s allocators.SpaceStats) *MeasuredDevice {
	if !s.Measured {
		return nil
	}
	return &MeasuredDevice{Device: s.Device, Seconds: s.MeasuredTime.Seconds(), Calls: s.Calls,
		CallP50Ns: s.CallP50.Nanoseconds(), CallP99Ns: s.CallP99.Nanoseconds()}
}
