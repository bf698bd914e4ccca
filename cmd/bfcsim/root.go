package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/profile"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; a
// plain build reports the module version, or "devel".
var version = ""

func versionString() string {
	v := version
	if v == "" {
		v = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	return fmt.Sprintf("bfcsim %s (%s %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// rootAllocatorsAndFormats lists, for bfcsim --help, every allocator (from
// the allocators' own table) and every recording format import reads.
func rootAllocatorsAndFormats() string {
	var b strings.Builder
	b.WriteString("\nAllocators (-a; the default set is " + strings.Join(allocators.DefaultNames, ", ") + "):\n")
	for _, f := range allocators.Factories() {
		fmt.Fprintf(&b, "  %-9s %s\n", f.Name, f.Summary)
	}
	b.WriteString("\nRecordings (bfcsim import FORMAT, or any command that takes a trace):\n")
	for _, f := range importFormats {
		fmt.Fprintf(&b, "  %-11s %s\n", f.name, f.help)
	}
	return b.String()
}

// newRootCmd returns the command tree, and what ends the profiles its flags
// may have started, to call once it has run.
func newRootCmd(e *env) (*cobra.Command, func() error) {
	root := &cobra.Command{
		Use:   "bfcsim",
		Short: "Replay memory allocation traces against allocator designs",
		Long: `bfcsim replays a trace of memory allocations and frees against several
allocator designs over a simulated or real address space, and reports
fragmentation, peak usage and latency, as tables, plots and a CI verdict.

  bfcsim replay trace.jsonl                  every allocator side by side
  bfcsim replay run.jsonl.gz -o out/         also write reports, plots and index.html
  bfcsim compare t.jsonl --baseline b.json   exit 1 on a memory regression
  bfcsim diff before.pickle after.pickle     what grew between two runs, by call site
  bfcsim sweep t.jsonl --grid bfc.KEY=V1,V2  replay a grid of options, in parallel
  bfcsim merge shard-*/report.json           combine the shards of a sweep
  bfcsim plot t.jsonl --kind memmap -o m.png draw one plot (PNG or SVG)
  bfcsim gen transformer-train -o t.jsonl    make a synthetic trace
  bfcsim replay snapshot.pickle -a pytorch   a recording as it is: converted on the fly
  bfcsim import pytorch s.pickle -o t.jsonl  convert a recording once
  bfcsim validate trace.jsonl                check a trace and summarise it
  bfcsim inspect oom.log                     explain a TensorFlow BFC dump or OOM log
` + rootAllocatorsAndFormats() + `
Exit codes: 0 success, 1 a comparison failed, 2 bad usage or bad input.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(
		newReplayCmd(e),
		newCompareCmd(e),
		newDiffCmd(e),
		newSweepCmd(e),
		newFitCmd(e),
		newScaleCmd(e),
		newAdviseCmd(e),
		newMergeCmd(e),
		newValidateCmd(e),
		newGenCmd(e),
		newInspectCmd(e),
		newPlotCmd(e),
		newImportCmd(e),
		newRecordCmd(e),
		newCalibrateCmd(e),
		newVersionCmd(),
	)
	end := addProfileFlag(root)
	return root, end
}

// addProfileFlag gives every command --cpuprofile and --memprofile
// (internal/profile). It returns what ends the profiles, to be called once
// the command has run.
func addProfileFlag(root *cobra.Command) (end func() error) {
	var path, memPath string
	var p profile.Profiles
	root.PersistentFlags().StringVar(&path, "cpuprofile", "", "write a CPU profile of the run to this file (see go tool pprof)")
	root.PersistentFlags().StringVar(&memPath, "memprofile", "", "write a Go heap profile, at the end of the run, to this file (see go tool pprof)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return p.Start(path) }
	return func() error { return p.Stop(memPath) }
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print bfcsim's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
}

// traceArgs requires at least one trace argument, with a helpful message.
func traceArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s needs at least one trace file, or - for standard input (see '%s --help')",
			cmd.Name(), cmd.CommandPath())
	}
	return nil
}
