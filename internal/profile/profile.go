// Package profile writes the Go profiles of a run that bfcsim's
// --cpuprofile and --memprofile ask for: where a replay spends its time,
// for a model's author or a slow trace's report, and where it allocates.
package profile

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Profiles are the profiles of one run.
type Profiles struct {
	cpu *os.File
}

// Start starts a CPU profile written to cpuPath ("": none).
func (p *Profiles) Start(cpuPath string) error {
	if cpuPath == "" {
		return nil
	}
	f, err := os.Create(cpuPath)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	p.cpu = f
	return nil
}

// Stop ends the CPU profile, if one was started, and writes a heap profile
// to memPath ("": none), whose alloc_space view shows where the run
// allocated. It is called once the run has ended, whether it succeeded or
// not: a profile of a failing run is wanted too.
func (p *Profiles) Stop(memPath string) error {
	var errs []error
	if memPath != "" {
		if err := writeHeap(memPath); err != nil {
			errs = append(errs, fmt.Errorf("--memprofile: %w", err))
		}
	}
	if p.cpu != nil {
		pprof.StopCPUProfile()
		if err := p.cpu.Close(); err != nil {
			errs = append(errs, fmt.Errorf("--cpuprofile: %w", err))
		}
		p.cpu = nil
	}
	return errors.Join(errs...)
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	// A heap profile counts what was allocated up to the last collection
	// only: without one now, the allocations since (half of a large
	// replay's, which grows its tables to the end) would be left out.
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
