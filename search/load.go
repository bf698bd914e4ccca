package search

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/input"
)

// Recording is one trace of a job loaded for a search: a file's, or one
// device's of a recording of several.
type Recording struct {
	*Trace
	// Name is how reports name it: its header's name, else its file's,
	// with -deviceN for a device of a recording of several (or of one
	// name with another file's).
	Name, Path string
	// Device is the device its header names, if any.
	Device *int
	// Header is its trace's header. CallSites are what each call site held
	// at its peak of live bytes, with Stacks naming them, when
	// LoadOptions.Input asked for them (input.Options.CallSites).
	Header    trace.Header
	CallSites []trace.SiteBytes
	Stacks    *trace.StackTable
}

// LoadOptions say how LoadJob opens and loads a job's recordings.
type LoadOptions struct {
	// Input says how each file is read; its Device -1 loads every device
	// of a recording of several that holds allocations, each a trace of
	// its own.
	Input input.Options
	Stdin io.Reader
	// Plan gives the allocators to search and how, from the first trace's
	// setup (and its path, for messages). It is called once.
	Plan func(setup sim.Setup, path string) ([]sim.AllocatorSpec, Options, error)
	// Opened, if set, is told of each trace once it is loaded: for a note
	// of how a recording was converted; everyDevice says no device of its
	// recording is left out.
	Opened func(t *input.File, everyDevice bool)
}

// LoadJob opens and loads the traces at paths as one job (Job): each
// device of a recording of several (unless opt.Input.Device picks one) and
// each file. The traces must be recordings of one allocator, as the
// ranks of one run are. On an error, what was loaded is let go.
func LoadJob(ctx context.Context, paths []string, opt LoadOptions) (job []Recording, err error) {
	defer func() {
		if err != nil {
			for _, r := range job {
				r.Close()
			}
			job = nil
		}
	}()
	var specs []sim.AllocatorSpec
	var sopt Options
	var recorded string // the first trace's recorded allocator
	for _, path := range paths {
		first := len(job)
		err := input.EachDevice(opt.Input.Device, func(device int) ([]int, error) {
			in := opt.Input
			in.Device = device
			t, err := input.OpenFile(ctx, path, opt.Stdin, in)
			if err != nil {
				return nil, err
			}
			defer t.Close()
			setup, err := sim.SetupOf(t.Header())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			switch {
			case specs == nil:
				if specs, sopt, err = opt.Plan(setup, path); err != nil {
					return nil, err
				}
				recorded = setup.Recorded.Allocator
			case setup.Recorded.Allocator != recorded:
				return nil, fmt.Errorf("%s: the recordings of one job must come from one allocator (it ran %s, the first %s); search them one at a time",
					path, allocatorOrNone(setup.Recorded.Allocator), allocatorOrNone(recorded))
			}
			tr, err := Load(ctx, t, setup, specs, sopt)
			if err != nil {
				return nil, err
			}
			r := Recording{Trace: tr, Name: t.Header().Name, Path: path, Header: t.Header(),
				CallSites: t.PeakCallSites(), Stacks: t.Stacks()}
			if r.Name == "" {
				r.Name = input.NameOf(path, "stdin")
			}
			if d, ok := t.Header().Device(); ok {
				r.Device = &d
			}
			job = append(job, r)
			if opt.Opened != nil {
				opt.Opened(t, device < 0)
			}
			return t.OtherDevices(), nil
		})
		if err != nil {
			return job, err
		}
		if devices := job[first:]; len(devices) > 1 {
			for i := range devices {
				if devices[i].Device != nil {
					devices[i].Name = input.DeviceName(devices[i].Name, *devices[i].Device)
				}
			}
			slices.SortStableFunc(devices, func(a, b Recording) int { return cmp.Compare(deviceOrder(a.Device), deviceOrder(b.Device)) })
		}
	}
	distinctNames(job)
	return job, nil
}

// distinctNames gives traces of one name (the files of one run's ranks,
// each named after the snapshot it came from) names of their own:
// NAME-deviceN, else NAME-K by place.
func distinctNames(job []Recording) {
	count := map[string]int{}
	for _, r := range job {
		count[r.Name]++
	}
	for i := range job {
		if count[job[i].Name] < 2 {
			continue
		}
		if job[i].Device != nil {
			job[i].Name = input.DeviceName(job[i].Name, *job[i].Device)
		} else {
			job[i].Name = fmt.Sprintf("%s-%d", job[i].Name, i+1)
		}
	}
}

// deviceOrder sorts traces by device, those without one last.
func deviceOrder(d *int) int {
	if d == nil {
		return math.MaxInt
	}
	return *d
}

// allocatorOrNone names an allocator, or says there is none.
func allocatorOrNone(name string) string {
	if name == "" {
		return "no recorded allocator"
	}
	return name
}

// Traces returns the job's traces, as a Job.
func Traces(job []Recording) Job {
	j := make(Job, len(job))
	for i, r := range job {
		j[i] = r.Trace
	}
	return j
}
