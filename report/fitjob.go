package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/bfcsim/bfcsim/search"
)

// FitJob is bfcsim fit's report on a job: several traces that run at once,
// one per device (a multi-GPU snapshot's devices, a run recorded one file
// per rank). The job fits a GPU when every trace does; what it needs is
// the most any of its traces needs, and that trace decides (search.Job).
type FitJob struct {
	Version int    `json:"bfcsim_fit"`
	Job     string `json:"job"`
	// Results are the job's answer, per allocator.
	Results []JobFitResult `json:"results"`
	// Devices are each trace's own fit, in the job's order.
	Devices             []Fit  `json:"devices"`
	MaxBytes            uint64 `json:"max_bytes,omitempty"`
	CheckGPU            string `json:"check_gpu,omitempty"`
	ContextReserveBytes uint64 `json:"context_reserve_bytes"`
}

// JobFitResult is one allocator's answer for a job.
type JobFitResult struct {
	Allocator string `json:"allocator"`
	// MinCapacityBytes is the most any trace needs; null when one fits
	// nowhere.
	MinCapacityBytes *uint64 `json:"min_capacity_bytes"`
	GranularityBytes uint64  `json:"granularity_bytes"`
	// DecidingTrace (and DecidingDevice, when its header names one) is the
	// trace that needs the most, or the first that fits nowhere.
	DecidingTrace  string   `json:"deciding_trace"`
	DecidingDevice *int     `json:"deciding_device,omitempty"`
	GPUs           []GPUFit `json:"gpus"`
}

// NewFitJob builds the report of a job named name, of which devices are
// each trace's own fit report and fits the job's fit (search.Job.Fit).
func NewFitJob(name string, devices []Fit, fits []search.JobFit, opt FitOptions) FitJob {
	j := FitJob{Version: FitVersion, Job: name, Results: []JobFitResult{}, Devices: devices,
		ContextReserveBytes: opt.ContextReserveBytes}
	for _, f := range fits {
		d := devices[f.Deciding]
		r := JobFitResult{Allocator: f.Allocator, DecidingTrace: d.Trace, DecidingDevice: d.Device,
			GranularityBytes: f.Members[f.Deciding].GranularityBytes}
		if f.Fits {
			need := f.MinCapacityBytes
			r.MinCapacityBytes = &need
		}
		r.GPUs = newGPUFits(f.MinCapacityBytes, f.Fits, opt)
		j.Results = append(j.Results, r)
	}
	return j
}

// Exceeds lists the allocators with which the job needs more than
// MaxBytes, or does not fit the GPU --gpu checks; none when neither is
// given.
func (j *FitJob) Exceeds() []string {
	var out []string
	for _, r := range j.Results {
		if exceeds(r.MinCapacityBytes, j.MaxBytes, j.CheckGPU, r.GPUs) {
			out = append(out, r.Allocator)
		}
	}
	return out
}

// RenderFitJob writes j in the named format.
func RenderFitJob(w io.Writer, j FitJob, format string) error {
	return renderSearch(w, format, j, func() error { return WriteFitJobTable(w, j) })
}

// WriteFitJobTable writes each trace's answer, then the job's, and the
// GPUs it fits on.
func WriteFitJobTable(w io.Writer, j FitJob) error {
	for _, d := range j.Devices {
		if err := writeFitAnswer(w, d); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%s: a job of %s; it fits a GPU when every one of them does\n", j.Job, plural(int64(len(j.Devices)), "device"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ALLOCATOR\tEVERY DEVICE FITS IN\tBYTES\tDECIDED BY")
	for _, r := range j.Results {
		fitsIn, exact := "nowhere", "-"
		if r.MinCapacityBytes != nil {
			fitsIn, exact = Bytes(*r.MinCapacityBytes), Count(int64(*r.MinCapacityBytes))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Allocator, fitsIn, exact, r.DecidingTrace)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	cols := make([]gpuColumn, len(j.Results))
	for i, r := range j.Results {
		cols[i] = gpuColumn{r.Allocator, r.MinCapacityBytes != nil, r.GPUs}
	}
	if err := writeGPUTable(w, cols, j.ContextReserveBytes); err != nil {
		return err
	}
	writeFitCheck(w, j.MaxBytes, j.CheckGPU, j.Exceeds())
	return nil
}

// JobName names a job of traces: the name they share less its device
// suffix ("run-device0", "run-device1": "run"), else their names joined.
func JobName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	base := func(n string) string {
		if i := strings.LastIndex(n, "-device"); i > 0 {
			return n[:i]
		}
		return n
	}
	first := base(names[0])
	for _, n := range names[1:] {
		if base(n) != first {
			return strings.Join(names, "+")
		}
	}
	return first
}

// FitReport is a fit's report: of one trace (Fit), or of a job of several
// (FitJob).
type FitReport struct {
	One *Fit
	Job *FitJob
}

// NewFitReport builds the report of a fit of job's traces: fits are the
// job's (search.Job.Fit), one per allocator; opt.MaxBytes and opt.CheckGPU
// are what --max and --gpu check.
func NewFitReport(job []search.Recording, fits []search.JobFit, opt FitOptions) FitReport {
	devices := make([]Fit, len(job))
	names := make([]string, len(job))
	for m, r := range job {
		results := make([]search.FitResult, len(fits))
		for i := range fits {
			results[i] = fits[i].Members[m]
		}
		devices[m] = NewFit(r.Name, r.Path, r.Trace, results, opt)
		devices[m].Device, devices[m].MaxBytes, devices[m].CheckGPU = r.Device, opt.MaxBytes, opt.CheckGPU
		names[m] = r.Name
	}
	if len(devices) == 1 {
		return FitReport{One: &devices[0]}
	}
	j := NewFitJob(JobName(names), devices, fits, opt)
	j.MaxBytes, j.CheckGPU = opt.MaxBytes, opt.CheckGPU
	return FitReport{Job: &j}
}

// Render writes the report in the named format.
func (r FitReport) Render(w io.Writer, format string) error {
	if r.Job != nil {
		return RenderFitJob(w, *r.Job, format)
	}
	return RenderFit(w, *r.One, format)
}

// Exceeds lists the allocators that do not fit what --max or --gpu asks.
func (r FitReport) Exceeds() []string {
	if r.Job != nil {
		return r.Job.Exceeds()
	}
	return r.One.Exceeds()
}
