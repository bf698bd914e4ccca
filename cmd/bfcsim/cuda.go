package main

import (
	"fmt"
	"strings"

	"github.com/bfcsim/bfcsim/allocators/cudadrv"
)

// openCUDA opens a GPU for --space cuda; tests replace it with a fake
// driver's.
var openCUDA = cudadrv.Open

// checkCUDA refuses, before any trace is read, a --space cuda replay that
// cannot run: no driver or no such GPU (one line, exit 2), or several
// allocators, which would share the GPU's memory at once.
func checkCUDA(o *replayOptions) error {
	if len(o.allocators) != 1 {
		return fmt.Errorf("--space %s replays one allocator at a time, on the GPU's own memory (-a %s each in turn, not %s at once)",
			o.space, o.allocators[0], strings.Join(o.allocators, ","))
	}
	d, err := openCUDA(o.device)
	if err != nil {
		return fmt.Errorf("--space %s: %w", o.space, err)
	}
	return d.Close()
}
