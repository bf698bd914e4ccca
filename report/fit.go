package report

// The report of bfcsim fit: the smallest device each allocator runs a
// trace on, and what that means on the GPUs people have.

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/bfcsim/bfcsim/search"
	"github.com/bfcsim/bfcsim/sim"
)

// FitVersion is the value of a fit report's "bfcsim_fit" key.
const FitVersion = 1

// FitFormats are the formats of fit's and advise's reports.
var FitFormats = []string{"table", "json"}

// Fit is bfcsim fit's report.
type Fit struct {
	Version int    `json:"bfcsim_fit"`
	Trace   string `json:"trace"`
	Path    string `json:"path"`
	Events  int64  `json:"events"`
	// DeviceCapacityBytes is the device the search ran on (a limit is set
	// on it for an allocator that takes one).
	DeviceCapacityBytes uint64      `json:"device_capacity_bytes"`
	PeakLiveBytes       uint64      `json:"peak_live_bytes"`
	Results             []FitResult `json:"results"`
	// Max is --max, when given: the report says whether every allocator
	// fits in it; CheckGPU is --gpu, when given, likewise.
	MaxBytes uint64 `json:"max_bytes,omitempty"`
	CheckGPU string `json:"check_gpu,omitempty"`
	// DeviceMemoryBytes is the GPU a JAX capture's memory fraction is
	// written for (--device-memory), 0 when not given.
	DeviceMemoryBytes uint64 `json:"device_memory_bytes,omitempty"`
	// Source is where the trace came from (its header's source).
	Source string `json:"source,omitempty"`
	// Device is the device of a job's recording the trace holds, when its
	// header names one.
	Device *int `json:"device,omitempty"`
	// ContextReserveBytes is what each GPU's usable bytes leave out (the
	// CUDA context and libraries).
	ContextReserveBytes uint64 `json:"context_reserve_bytes"`
}

// FitOptions say what a fit report weighs its answer against.
type FitOptions struct {
	// DeviceMemoryBytes is the GPU a JAX capture's memory fraction is
	// written for (--device-memory), 0 when not given.
	DeviceMemoryBytes uint64
	// GPUs are the GPUs the answer is weighed against (search.GPUs, or
	// the one --gpu names), each less ContextReserveBytes.
	GPUs                []search.GPU
	ContextReserveBytes uint64
	// MaxBytes and CheckGPU are what --max and --gpu check, when given.
	MaxBytes uint64
	CheckGPU string
}

func (f Fit) jax() bool { return f.Source == search.JAXSource }

// FitResult is one allocator's answer.
type FitResult struct {
	Allocator string         `json:"allocator"`
	Options   map[string]any `json:"options"`
	// OptionsFromRecording lists the options taken from the recording,
	// and OptionsSet those given with --set.
	OptionsFromRecording []string `json:"options_from_recording,omitempty"`
	OptionsSet           []string `json:"options_set,omitempty"`
	// MinCapacityBytes is the smallest capacity with no failed allocation,
	// to GranularityBytes; null when none up to MaxProbedBytes was.
	MinCapacityBytes *uint64 `json:"min_capacity_bytes"`
	GranularityBytes uint64  `json:"granularity_bytes"`
	// Limit says what was varied: "memory_limit" (PyTorch's
	// set_per_process_memory_fraction, on the device) or "capacity".
	Limit          string `json:"limit"`
	Probes         int    `json:"probes"`
	MaxProbedBytes uint64 `json:"max_probed_bytes"`
	// PeakReservedBytes is the allocator's peak without a limit.
	PeakReservedBytes uint64 `json:"peak_reserved_bytes"`
	// ScratchFailures counts the allocations that failed at the smallest
	// capacity but that the program frees before allocating anything else
	// (a library's workspace): tolerated, unless --strict.
	ScratchFailures int64      `json:"scratch_failures"`
	Decisions       *Decisions `json:"recorded_decisions,omitempty"`
	Trials          []FitTrial `json:"trials"`
	GPUs            []GPUFit   `json:"gpus"`
	// Env is, for a JAX capture's bfc, the line that gives XLA's allocator
	// the smallest memory limit: XLA_PYTHON_CLIENT_MEM_FRACTION of the
	// GPU (--device-memory), preallocation as recorded.
	Env string `json:"env,omitempty"`
}

// FitTrial is one probe of the search.
type FitTrial struct {
	CapacityBytes     uint64 `json:"capacity_bytes"`
	OK                bool   `json:"ok"`
	Cancelled         bool   `json:"cancelled,omitempty"`
	PeakReservedBytes uint64 `json:"peak_reserved_bytes"`
	FailedEvent       *int64 `json:"failed_event"`
}

// GPUFit says whether the trace fits on a GPU: in its total as the driver
// reports it, less the context reserve (usable).
type GPUFit struct {
	Name             string `json:"name"`
	TotalMemoryBytes uint64 `json:"total_memory_bytes"`
	UsableBytes      uint64 `json:"usable_bytes"`
	Fits             bool   `json:"fits"`
	// HeadroomBytes is the usable bytes less the smallest capacity;
	// negative when it does not fit.
	HeadroomBytes int64 `json:"headroom_bytes"`
}

// newGPUFits weighs need (fits false: none) against opt's GPUs.
func newGPUFits(need uint64, fits bool, opt FitOptions) []GPUFit {
	out := []GPUFit{}
	for _, g := range search.FitsOn(need, fits, opt.GPUs, opt.ContextReserveBytes) {
		out = append(out, GPUFit{Name: g.GPU.Name, TotalMemoryBytes: g.GPU.TotalBytes, UsableBytes: g.UsableBytes,
			Fits: g.Fits, HeadroomBytes: g.HeadroomBytes})
	}
	return out
}

// NewFit builds the report of a fit of the trace at path.
func NewFit(name, path string, tr *search.Trace, results []search.FitResult, opt FitOptions) Fit {
	gpu := opt.DeviceMemoryBytes
	f := Fit{Version: FitVersion, Trace: name, Path: path, Events: tr.Summary.Events,
		PeakLiveBytes: tr.Summary.PeakLiveBytes, Results: []FitResult{}, Source: tr.Setup.Source,
		ContextReserveBytes: opt.ContextReserveBytes}
	if tr.IsJAX() {
		f.DeviceMemoryBytes = gpu
	}
	for i, r := range results {
		out := FitResult{Allocator: r.Allocator, Options: r.Options, OptionsSet: r.Set, GranularityBytes: r.GranularityBytes,
			Limit: "capacity", Probes: r.Probes, MaxProbedBytes: r.MaxProbedBytes,
			PeakReservedBytes: r.PeakReservedBytes, ScratchFailures: r.ScratchFailures,
			Decisions: newDecisions(r.Decisions), Trials: []FitTrial{}, GPUs: []GPUFit{}}
		if i < len(tr.Unlimited) {
			out.OptionsFromRecording = tr.Unlimited[i].OptionsFromRecording
		}
		if r.LimitOption != "" {
			out.Limit = r.LimitOption
		}
		if r.Fits {
			c := r.MinCapacityBytes
			out.MinCapacityBytes = &c
		}
		for _, p := range r.Trials {
			t := FitTrial{CapacityBytes: p.CapacityBytes, OK: p.OK, Cancelled: p.Cancelled, PeakReservedBytes: p.PeakReservedBytes}
			if p.FailedEvent >= 0 && !p.Cancelled {
				e := p.FailedEvent
				t.FailedEvent = &e
			}
			out.Trials = append(out.Trials, t)
		}
		if tr.IsJAX() && r.Allocator == "bfc" && r.Fits && gpu > 0 {
			settings := map[string]string{}
			for k, v := range r.Options {
				settings[k] = fmt.Sprint(v)
			}
			if line, ok := search.XLAEnv(settings, r.MinCapacityBytes, gpu); ok {
				out.Env = line
			}
		}
		out.GPUs = newGPUFits(r.MinCapacityBytes, r.Fits, opt)
		f.Results = append(f.Results, out)
	}
	f.DeviceCapacityBytes = tr.Capacity()
	return f
}

// gpuColumn is one allocator's column of the GPU table.
type gpuColumn struct {
	allocator string
	fits      bool // somewhere
	gpus      []GPUFit
}

// writeGPUTable writes, for each GPU, whether each column's need fits in
// its usable bytes, and by how much.
func writeGPUTable(w io.Writer, cols []gpuColumn, reserve uint64) error {
	if len(cols) == 0 || len(cols[0].gpus) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	heads := []string{"GPU", "USABLE"}
	for _, c := range cols {
		heads = append(heads, strings.ToUpper(c.allocator))
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	for gi, g := range cols[0].gpus {
		cells := []string{g.Name, Bytes(g.UsableBytes)}
		for _, c := range cols {
			gf := c.gpus[gi]
			switch {
			case !c.fits:
				cells = append(cells, "does not fit")
			case gf.Fits:
				cells = append(cells, "fits, "+Bytes(uint64(gf.HeadroomBytes))+" to spare")
			default:
				cells = append(cells, "does not fit, "+Bytes(uint64(-gf.HeadroomBytes))+" short")
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "USABLE is the GPU's memory as its driver reports it, less %s for the CUDA context and libraries (--context-reserve)\n", Bytes(reserve))
	return err
}

// Exceeds lists the allocators whose smallest capacity is above f.MaxBytes
// or does not fit the GPU --gpu checks (or that fit nowhere); none when
// neither is given.
func (f *Fit) Exceeds() []string {
	var out []string
	for _, r := range f.Results {
		if exceeds(r.MinCapacityBytes, f.MaxBytes, f.CheckGPU, r.GPUs) {
			out = append(out, r.Allocator)
		}
	}
	return out
}

// exceeds says whether need (nil: fits nowhere) is over maxBytes, when
// given, or does not fit the one GPU checkGPU names, when given.
func exceeds(need *uint64, maxBytes uint64, checkGPU string, gpus []GPUFit) bool {
	switch {
	case maxBytes == 0 && checkGPU == "":
		return false
	case need == nil:
		return true
	case maxBytes > 0 && *need > maxBytes:
		return true
	}
	return checkGPU != "" && len(gpus) == 1 && !gpus[0].Fits
}

// RenderFit writes f in the named format.
func RenderFit(w io.Writer, f Fit, format string) error {
	return renderSearch(w, format, f, func() error { return WriteFitTable(w, f) })
}

// renderSearch writes a search's answer, v, as JSON or as the table table
// writes.
func renderSearch(w io.Writer, format string, v any, table func() error) error {
	switch format {
	case "table":
		return table()
	case "json":
		return writeIndentedJSON(w, v)
	}
	return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(FitFormats, ", "))
}

// WriteFitTable writes the answer per allocator, the settings it used,
// and a line per common GPU size.
func WriteFitTable(w io.Writer, f Fit) error {
	if err := writeFitAnswer(w, f); err != nil {
		return err
	}
	fmt.Fprintln(w)
	cols := make([]gpuColumn, len(f.Results))
	for i := range f.Results {
		cols[i] = gpuColumn{f.Results[i].Allocator, f.Results[i].MinCapacityBytes != nil, f.Results[i].GPUs}
	}
	if err := writeGPUTable(w, cols, f.ContextReserveBytes); err != nil {
		return err
	}
	writeFitCheck(w, f.MaxBytes, f.CheckGPU, f.Exceeds())
	return nil
}

// writeFitCheck says whether what --max or --gpu asks fits: over lists
// what does not.
func writeFitCheck(w io.Writer, maxBytes uint64, gpu string, over []string) {
	var what string
	switch {
	case maxBytes > 0:
		what = "--max " + Bytes(maxBytes)
	case gpu != "":
		what = "--gpu " + gpu
	default:
		return
	}
	if len(over) > 0 {
		fmt.Fprintf(w, "\n%s: %s does not fit\n", what, strings.Join(over, ", "))
	} else {
		fmt.Fprintf(w, "\n%s: every allocator fits\n", what)
	}
}

// writeFitAnswer writes a fit's answer per allocator and the settings it
// holds for.
func writeFitAnswer(w io.Writer, f Fit) error {
	fmt.Fprintf(w, "%s: %s, peak live %s; the smallest device on which every allocation is served\n",
		f.Trace, plural(f.Events, "event"), Bytes(f.PeakLiveBytes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ALLOCATOR\tFITS IN\tBYTES\tSTEP\tPEAK RESERVED (NO LIMIT)\tPROBES")
	for i := range f.Results {
		r := &f.Results[i]
		fitsIn, exact := "nowhere", fmt.Sprintf("> %s tried", Count(int64(r.MaxProbedBytes)))
		if r.MinCapacityBytes != nil {
			fitsIn, exact = Bytes(*r.MinCapacityBytes), Count(int64(*r.MinCapacityBytes))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", r.Allocator, fitsIn, exact, Bytes(r.GranularityBytes),
			Bytes(r.PeakReservedBytes), r.Probes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i := range f.Results {
		r := &f.Results[i]
		limit := fitLimitName(r, f.DeviceCapacityBytes)
		if f.jax() && r.Allocator == "bfc" {
			limit = "XLA's memory limit (XLA_PYTHON_CLIENT_MEM_FRACTION of the GPU's memory)"
		}
		fmt.Fprintf(w, "  %s: %s; %s\n", r.Allocator, limit, fitSettings(r))
		if l := fitXLALine(f, r); l != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Allocator, l)
		}
		if n := notesOfDecisions(r.Allocator, r.Decisions); n != "" {
			fmt.Fprintf(w, "  %s\n", n)
		}
		if r.ScratchFailures > 0 {
			fmt.Fprintf(w, "  %s: at that size %s that the program frees before allocating anything else failed (scratch space a library can do without, as PyTorch's cuDNN convolutions do by trying another algorithm); --strict counts them\n",
				r.Allocator, plural(r.ScratchFailures, "allocation"))
		}
	}
	return nil
}

// fitLimitName says what a result's capacity is: PyTorch's memory limit
// on the device, or the device's capacity.
func fitLimitName(r *FitResult, device uint64) string {
	if r.Limit == "capacity" {
		return "the device's capacity"
	}
	if r.Limit == "memory_limit" && r.Allocator == "pytorch" {
		return fmt.Sprintf("a memory limit (set_per_process_memory_fraction) on a %s device", Bytes(device))
	}
	return fmt.Sprintf("%s on a %s device", r.Limit, Bytes(device))
}

// fitSettings names a result's settings: those taken from the recording
// and those set, the rest being the allocator's defaults.
func fitSettings(r *FitResult) string {
	var rec, set []string
	for _, k := range slices.Sorted(maps.Keys(r.Options)) {
		v := fmt.Sprintf("%s=%v", k, r.Options[k])
		switch {
		case slices.Contains(r.OptionsSet, k):
			set = append(set, v)
		case slices.Contains(r.OptionsFromRecording, k):
			rec = append(rec, v)
		}
	}
	var parts []string
	if len(rec) > 0 {
		parts = append(parts, "as recorded "+strings.Join(rec, " "))
	}
	if len(set) > 0 {
		parts = append(parts, "set "+strings.Join(set, " "))
	}
	if len(parts) == 0 {
		return "the default settings"
	}
	return strings.Join(parts, ", ") + ", the rest the defaults"
}

// Decisions is what an allocator did with a recording's segment
// decisions (report.json's recorded_decisions).
type Decisions struct {
	Mode          string   `json:"mode"`
	Outcome       string   `json:"outcome"`
	Reason        string   `json:"reason,omitempty"`
	Followed      int64    `json:"followed_calls"`
	DivergedEvent *int64   `json:"diverged_at_event,omitempty"`
	DivergedLine  *int64   `json:"diverged_at_line,omitempty"`
	WhatIf        []string `json:"what_if,omitempty"`
}

func newDecisions(d *sim.Decisions) *Decisions {
	if d == nil {
		return nil
	}
	out := &Decisions{Mode: d.Mode, Outcome: d.Outcome, Reason: d.Reason, Followed: d.Followed, WhatIf: d.WhatIf}
	if d.DivergedEvent >= 0 {
		e, l := d.DivergedEvent, d.DivergedLine
		out.DivergedEvent, out.DivergedLine = &e, &l
	}
	return out
}

// notesOfDecisions says in a line what an allocator did with the
// recording's decisions, or "" when there were none.
func notesOfDecisions(allocator string, d *Decisions) string {
	if d == nil {
		return ""
	}
	switch d.Outcome {
	case "followed":
		return fmt.Sprintf("%s: made each of the recording's %s segment decisions itself, where the device had placed them",
			allocator, Count(d.Followed))
	case "diverged":
		at := ""
		if d.DivergedEvent != nil {
			at = fmt.Sprintf(" at event %s (line %s)", Count(*d.DivergedEvent), Count(*d.DivergedLine))
		}
		return fmt.Sprintf("%s: followed the recording's segment decisions (%s) up to the first it did not make itself%s, then decided alone: %s",
			allocator, Count(d.Followed), at, d.Reason)
	case "model":
		return fmt.Sprintf("%s: decided every segment itself, from the start (%s)", allocator, d.Reason)
	case "adopted":
		return fmt.Sprintf("%s: adopted every recorded segment as it was (segments=recorded)", allocator)
	}
	return ""
}

// fitXLALine is, for a JAX capture's bfc, the line that sets the smallest
// memory limit, or how to have it; "" for any other result.
func fitXLALine(f Fit, r *FitResult) string {
	switch {
	case r.Env != "":
		return r.Env + "   (on a GPU of " + Bytes(f.DeviceMemoryBytes) + ")"
	case r.MinCapacityBytes == nil || r.Allocator != "bfc" || !f.jax():
		return ""
	case f.DeviceMemoryBytes > 0:
		return "needs more than the GPU's " + Bytes(f.DeviceMemoryBytes) + " (--device-memory)"
	}
	return xlaFractionHelp(*r.MinCapacityBytes)
}
