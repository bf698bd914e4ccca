package report

// The report of bfcsim advise: the settings with which an allocator needs
// the smallest device, as the line to export.

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/bfcsim/bfcsim/search"
)

// AdviseVersion is the value of an advise report's "bfcsim_advise" key.
const AdviseVersion = 1

// Advise is bfcsim advise's report.
type Advise struct {
	Version   int    `json:"bfcsim_advise"`
	Trace     string `json:"trace"`
	Path      string `json:"path"`
	Allocator string `json:"allocator"`
	// DeviceCapacityBytes is the device searched on (a limit is set on it
	// for an allocator that takes one).
	DeviceCapacityBytes uint64 `json:"device_capacity_bytes"`
	// DeviceMemoryBytes is the GPU to advise for (--device-memory): a JAX
	// capture's lines then set XLA_PYTHON_CLIENT_MEM_FRACTION for it.
	DeviceMemoryBytes uint64 `json:"device_memory_bytes,omitempty"`
	// Recorded are the recording's settings, as it ran them (following its
	// segment decisions).
	Recorded AdviseCandidate `json:"recorded"`
	// RecordedModel are the same settings as the model decides them alone,
	// as it decides every other candidate: what the savings compare with.
	RecordedModel AdviseCandidate `json:"recorded_model"`
	Best          AdviseBest      `json:"best"`
	// SavedBytes is RecordedModel's smallest device less Best's.
	SavedBytes int64             `json:"saved_bytes"`
	Effects    []AdviseEffect    `json:"effects"`
	Candidates []AdviseCandidate `json:"candidates"`
	Notes      []string          `json:"notes"`
	// Devices are the traces of a job, one per device, that the advice
	// is for (search.Job): one set of settings for all, weighed by the
	// trace it suits least. Empty for a single trace.
	Devices []string `json:"devices,omitempty"`
}

// AdviseCandidate is one combination of settings tried.
type AdviseCandidate struct {
	Settings map[string]string `json:"settings"`
	// Env is the line that sets a JAX capture's candidate, its memory
	// fraction included when the GPU's total memory is known.
	Env string `json:"env,omitempty"`
	// MinCapacityBytes is null when the candidate fits no device tried.
	MinCapacityBytes  *uint64 `json:"min_capacity_bytes"`
	PeakReservedBytes uint64  `json:"peak_reserved_bytes"`
	Probes            int     `json:"probes"`
	// Devices are, for a job, what each trace needs with these settings,
	// in the job's order; MinCapacityBytes is the most of them.
	Devices []AdviseDevice `json:"devices,omitempty"`
}

// AdviseDevice is what one trace of a job needs with a candidate's
// settings.
type AdviseDevice struct {
	Trace            string  `json:"trace"`
	MinCapacityBytes *uint64 `json:"min_capacity_bytes"`
}

// AdviseBest is the best candidate, with the line that sets it.
type AdviseBest struct {
	Env string `json:"env"`
	AdviseCandidate
}

// AdviseEffect is what one changed setting did alone.
type AdviseEffect struct {
	Setting          string  `json:"setting"`
	From             string  `json:"from"`
	To               string  `json:"to"`
	MinCapacityBytes *uint64 `json:"min_capacity_bytes"`
	SavedBytes       int64   `json:"saved_bytes"`
}

func newAdviseCandidate(c search.Candidate, devices []string) AdviseCandidate {
	out := AdviseCandidate{Settings: c.Settings, PeakReservedBytes: c.PeakReservedBytes, Probes: c.Fit.Probes,
		MinCapacityBytes: fitBytes(c.Fit)}
	if len(devices) > 1 {
		for i, m := range c.Members {
			out.Devices = append(out.Devices, AdviseDevice{Trace: devices[i], MinCapacityBytes: fitBytes(m)})
		}
	}
	return out
}

// fitBytes is a fit's smallest device, or nil when it fits none tried.
func fitBytes(f search.FitResult) *uint64 {
	if !f.Fits {
		return nil
	}
	v := f.MinCapacityBytes
	return &v
}

// NewAdvise builds the report of advice for the trace at path; gpu is the
// GPU's total memory to write a JAX capture's memory fraction for (0: not
// known). devices name a job's traces, when the advice is for a job
// (search.Job.Advise), and are nil for one trace.
func NewAdvise(name, path string, device uint64, a search.Advice, gpu uint64, devices []string) Advise {
	r := Advise{Version: AdviseVersion, Trace: name, Path: path, Allocator: a.Allocator, DeviceCapacityBytes: device,
		Recorded: newAdviseCandidate(a.Recorded, devices), RecordedModel: newAdviseCandidate(a.ModelRecorded, devices),
		Best:    AdviseBest{Env: search.Env(a.Allocator, a.Best.Settings), AdviseCandidate: newAdviseCandidate(a.Best, devices)},
		Effects: []AdviseEffect{}, Candidates: []AdviseCandidate{}, Notes: []string{}, Devices: devices}
	if a.JAX {
		r.DeviceMemoryBytes = gpu
		r.Best.Env = xlaLine(a.Best, gpu)
		r.Best.AdviseCandidate.Env = r.Best.Env
		r.Notes = append(r.Notes, xlaNotes(a, gpu)...)
	}
	if a.Best.Fit.Fits && a.ModelRecorded.Fit.Fits {
		r.SavedBytes = int64(a.ModelRecorded.Fit.MinCapacityBytes) - int64(a.Best.Fit.MinCapacityBytes)
	}
	for _, e := range a.Effects {
		out := AdviseEffect{Setting: e.Key, From: e.From, To: e.To, SavedBytes: e.SavedBytes}
		if e.Fits {
			v := e.MinCapacityBytes
			out.MinCapacityBytes = &v
		}
		r.Effects = append(r.Effects, out)
	}
	for _, c := range a.Candidates {
		out := newAdviseCandidate(c, devices)
		if a.JAX {
			out.Env = xlaLine(c, gpu)
		}
		r.Candidates = append(r.Candidates, out)
	}
	if a.Allocator == "pytorch" && a.Best.Settings["garbage_collection_threshold"] != "0" {
		r.Notes = append(r.Notes, "garbage_collection_threshold acts only under a memory limit: set one with torch.cuda.set_per_process_memory_fraction (the smallest device is such a limit)")
	}
	if a.Allocator == "pytorch" && a.Recorded.Fit.Fits && a.ModelRecorded.Fit.Fits &&
		a.Recorded.Fit.MinCapacityBytes != a.ModelRecorded.Fit.MinCapacityBytes {
		r.Notes = append(r.Notes, fmt.Sprintf("as recorded the settings need %s, as the model decides them from the start %s: the recording began with a layout its warm-up left, and the device placed its segments, which a what-if cannot know; every candidate is a what-if, and compares with the second",
			Bytes(a.Recorded.Fit.MinCapacityBytes), Bytes(a.ModelRecorded.Fit.MinCapacityBytes)))
	}
	return r
}

// RenderAdvise writes a in the named format.
func RenderAdvise(w io.Writer, a Advise, format string) error {
	return renderSearch(w, format, a, func() error { return WriteAdviseTable(w, a) })
}

// sizeOrNone writes a candidate's smallest device.
func sizeOrNone(v *uint64) string {
	if v == nil {
		return "fits no device tried"
	}
	return Bytes(*v)
}

// WriteAdviseTable writes the line to use, its saving, what each setting
// changed, and every candidate tried.
func WriteAdviseTable(w io.Writer, a Advise) error {
	fmt.Fprintf(w, "%s: %s settings for the smallest device\n\n", a.Trace, a.Allocator)
	fmt.Fprintf(w, "  %s\n\n", a.Best.Env)
	fmt.Fprintf(w, "smallest device %s, peak %s without a limit", sizeOrNone(a.Best.MinCapacityBytes), Bytes(a.Best.PeakReservedBytes))
	switch {
	case a.SavedBytes > 0:
		fmt.Fprintf(w, ": %s less than the recorded settings need (%s)\n", Bytes(uint64(a.SavedBytes)), sizeOrNone(a.RecordedModel.MinCapacityBytes))
	case a.SavedBytes < 0:
		fmt.Fprintf(w, ": %s more than the recorded settings need (%s)\n", Bytes(uint64(-a.SavedBytes)), sizeOrNone(a.RecordedModel.MinCapacityBytes))
	default:
		fmt.Fprintf(w, "; the recorded settings are as good (%s)\n", sizeOrNone(a.RecordedModel.MinCapacityBytes))
	}
	if len(a.Devices) > 1 {
		fmt.Fprintf(w, "  for a job of %s, one setting for all; each needs:", plural(int64(len(a.Devices)), "device"))
		for _, d := range a.Best.Devices {
			fmt.Fprintf(w, " %s %s;", d.Trace, sizeOrNone(d.MinCapacityBytes))
		}
		fmt.Fprintln(w, " the largest decides")
	}
	for _, e := range a.Effects {
		change := "fits no device tried"
		if e.MinCapacityBytes != nil {
			switch {
			case e.SavedBytes > 0:
				change = fmt.Sprintf("%s (%s less)", Bytes(*e.MinCapacityBytes), Bytes(uint64(e.SavedBytes)))
			case e.SavedBytes < 0:
				change = fmt.Sprintf("%s (%s more)", Bytes(*e.MinCapacityBytes), Bytes(uint64(-e.SavedBytes)))
			default:
				change = Bytes(*e.MinCapacityBytes) + " (no change)"
			}
		}
		fmt.Fprintf(w, "  %s %s → %s alone: %s\n", e.Setting, e.From, e.To, change)
	}
	for _, n := range a.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SMALLEST DEVICE\tPEAK (NO LIMIT)\tPROBES\tSETTINGS")
	rows := slices.Clone(a.Candidates)
	slices.SortStableFunc(rows, compareCandidates)
	for _, c := range rows {
		label := settingsLabel(c.Settings)
		if equalSettings(c.Settings, a.Best.Settings) {
			label += "  (best)"
		}
		if equalSettings(c.Settings, a.Recorded.Settings) {
			label += "  (recorded, as it ran)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", sizeOrNone(c.MinCapacityBytes), Bytes(c.PeakReservedBytes), c.Probes, label)
	}
	return tw.Flush()
}

// compareCandidates orders candidates as advise ranks them: by smallest
// device (those that fit no device last), then by peak without a limit.
func compareCandidates(x, y AdviseCandidate) int {
	switch {
	case x.MinCapacityBytes == nil && y.MinCapacityBytes == nil:
	case x.MinCapacityBytes == nil:
		return 1
	case y.MinCapacityBytes == nil:
		return -1
	case *x.MinCapacityBytes != *y.MinCapacityBytes:
		return cmp.Compare(*x.MinCapacityBytes, *y.MinCapacityBytes)
	}
	return cmp.Compare(x.PeakReservedBytes, y.PeakReservedBytes)
}

func settingsLabel(s map[string]string) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + s[k]
	}
	return strings.Join(parts, " ")
}

func equalSettings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// xlaLine is the line that runs JAX as candidate c: preallocation off if
// it grows, and the memory fraction of a GPU of gpu bytes that gives its
// smallest device.
func xlaLine(c search.Candidate, gpu uint64) string {
	var limit uint64
	if c.Fit.Fits {
		limit = c.Fit.MinCapacityBytes
	}
	line, ok := search.XLAEnv(c.Settings, limit, gpu)
	if !ok {
		return "# it needs " + Bytes(limit) + ", more than the GPU's " + Bytes(gpu) + ": no XLA_PYTHON_CLIENT_MEM_FRACTION gives that"
	}
	return line
}

// xlaNotes say, for a JAX capture, what the other choice of preallocation
// needs, and how the memory fraction is had.
func xlaNotes(a search.Advice, gpu uint64) []string {
	var notes []string
	for _, c := range a.Candidates {
		if c.Settings["allow_growth"] == a.Best.Settings["allow_growth"] || !c.Fit.Fits {
			continue
		}
		how := "preallocating (JAX's default)"
		if c.Settings["allow_growth"] == "true" {
			how = "growing"
		}
		notes = append(notes, fmt.Sprintf("%s it needs %s: %s", how, Bytes(c.Fit.MinCapacityBytes), xlaLine(c, gpu)))
		break
	}
	switch {
	case !a.Best.Fit.Fits:
	case gpu == 0:
		notes = append(notes, xlaFractionHelp(a.Best.Fit.MinCapacityBytes))
	default:
		if _, ok := search.XLAFraction(a.Best.Fit.MinCapacityBytes, gpu); !ok {
			notes = append(notes, fmt.Sprintf("it needs more than the GPU's %s (--device-memory)", Bytes(gpu)))
		}
	}
	notes = append(notes, "XLA's allocator takes its limit on top of what the CUDA context, cuBLAS and cuDNN hold outside it: leave them room when raising the fraction")
	return notes
}

// xlaFractionHelp says how to have the fraction line without the GPU's
// total memory.
func xlaFractionHelp(limit uint64) string {
	return "XLA_PYTHON_CLIENT_MEM_FRACTION is " + Count(int64(limit)) + " bytes ÷ the GPU's total memory: --device-memory SIZE writes it"
}
