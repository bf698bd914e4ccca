// Command snapgen writes a synthetic PyTorch memory snapshot of the shape
// torch.cuda.memory._dump_snapshot writes, at any size, for measuring the
// importer against real-sized recordings without committing one:
//
//	go run ./internal/snapgen -entries 22000000 -o /tmp/big.pickle   # about 1 GB
//	go run ./internal/snapgen -entries 100000 -json -o /tmp/s.json
//
// See trace/pytorch.WriteSynthetic for what it holds.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/google/renameio/v2"

	"github.com/bfcsim/bfcsim/trace/pytorch"
)

func main() {
	opt := pytorch.DefaultSynthetic(0)
	flag.IntVar(&opt.Entries, "entries", 200_000, "trace entries")
	flag.IntVar(&opt.Stacks, "stacks", opt.Stacks, "distinct stacks (frames lists), with -shared")
	flag.IntVar(&opt.Frames, "frames", opt.Frames, "frames per stack")
	flag.BoolVar(&opt.SharedStacks, "shared", opt.SharedStacks, "allocations share -stacks frames lists; false: each has its own list, as torch writes")
	flag.IntVar(&opt.Live, "live", opt.Live, "about how many allocations are live at once")
	flag.Uint64Var(&opt.Seed, "seed", opt.Seed, "random seed")
	flag.BoolVar(&opt.JSON, "json", false, "write JSON instead of a protocol 4 pickle")
	out := flag.String("o", "", "output file (required)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: snapgen -o FILE [-entries N] [-json] [-shared=false] ...")
		os.Exit(2)
	}
	f, err := renameio.NewPendingFile(*out)
	if err == nil {
		defer f.Cleanup()
		if err = pytorch.WriteSynthetic(f, opt); err == nil {
			err = f.CloseAtomicallyReplace()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "snapgen:", err)
		os.Exit(1)
	}
}
