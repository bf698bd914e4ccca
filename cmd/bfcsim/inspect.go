package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/diagnose"
	"github.com/bfcsim/bfcsim/diagnose/bfcdump"
	"github.com/bfcsim/bfcsim/diagnose/pytorchoom"
	"github.com/bfcsim/bfcsim/internal/outfile"
)

type inspectOptions struct {
	format   string
	chunks   bool
	export   string
	snapshot string // a PyTorch snapshot of the run whose message is read
}

var inspectFormats = []string{"text", "json"}

func newInspectCmd(e *env) *cobra.Command {
	o := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect [flags] FILE",
		Short: "Explain a BFC memory dump, a TensorFlow out-of-memory log or PyTorch's out-of-memory message",
		Long: `Read the state of a BFC allocator and explain it: the pool's size and use,
the bins, TensorFlow's 100-character occupancy strip, and why an allocation
failed (fragmentation or lack of memory). Or read the message PyTorch's CUDA
caching allocator raises when it runs out of memory, and say why.

FILE is one of:
  - a MemoryDump protobuf, as TensorFlow writes it on an out-of-memory when
    TF_BFC_MEMORY_DUMP is set, or as 'bfcsim replay -o DIR' writes it
    (TRACE.bfc.oom.memdump, TRACE.bfc.peak.memdump);
  - the text TensorFlow logs when its BFC allocator runs out of memory, from
    any release since 2015 ("Allocator (GPU_0_bfc) ran out of memory ...",
    the bin lines, the "Chunk at"/"InUse at"/"Free  at" chunk lines, the
    in-use summary, Stats), whole or in part, pasted as it is: glog prefixes,
    "> " quotes, wrapped lines, CRLF and other loggers' lines are fine;
  - text holding PyTorch's out-of-memory message ("CUDA out of memory. Tried
    to allocate ..."), of any release since 1.0, CUDA or ROCm ("HIP out of
    memory"), pasted as it is: Python tracebacks, "> " quotes, log prefixes
    such as "[rank0]: ", lines wrapped anywhere, CRLF; with several
    messages, the last is explained;
  - - for standard input.
Any of them may be gzip- or zstd-compressed.

A pasted log is read for TensorFlow's own figures first (Stats, the bin
lines, the in-use summary, the pool line), the chunk lines second: each
figure says where it comes from, a partial paste is called partial with
the reason, and the report says what the paste leaves out. A MemoryDump
does not record the memory limit or where regions begin, so bfcsim infers
regions from gaps between chunks and reasons about the pool alone.
docs/allocators/bfc.md lists every TensorFlow release's log format.

For a PyTorch message, the report gives the request and the device's and
PyTorch's figures (total capacity, free, allocated, reserved, reserved but
unallocated, the per-process limit, other processes), each with the
rounding of its two printed decimals and the line it came from, and a
verdict: fragmentation, limit, other-process or no-room, tested in that
order, with the figures it rests on and what the message leaves open.
--chunks and --export do not apply to it. docs/pytorch-oom.md lists every
release's wording and the rules.

With --snapshot, the memory snapshot of the same run (recorded with
torch.cuda.memory._record_memory_history and dumped after the error) is
replayed by the pytorch model under the limit the message describes: the
report says whether the model fails the same way, which call sites held
the memory then, and whether expandable_segments:True, max_split_size_mb or
garbage_collection_threshold would have served the request.`,
		Example: `  bfcsim inspect out/transformer-train.bfc.oom.memdump
  bfcsim inspect oom.log --chunks
  pbpaste | bfcsim inspect -
  bfcsim inspect oom.log --export oom.memdump   # convert a pasted log to a MemoryDump
  bfcsim inspect -f json torch-oom.txt          # a PyTorch out-of-memory message
  bfcsim inspect torch-oom.txt --snapshot oom.pickle   # ... with the run's snapshot`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("inspect takes one file (a MemoryDump, a TensorFlow log or a PyTorch out-of-memory message), or - for standard input; got %d (see '%s --help')",
					len(args), cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInspect(cmd, e, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.format, "format", "f", "text", "output format: text or json")
	f.BoolVar(&o.chunks, "chunks", false, "also list every chunk")
	f.StringVar(&o.export, "export", "", "also write the state as a MemoryDump protobuf to this file")
	f.StringVar(&o.snapshot, "snapshot", "", "with a PyTorch message: the memory snapshot of the same run; name the call sites live at the failure and replay it under other settings")
	_ = cmd.RegisterFlagCompletionFunc("format", fixedCompletion(inspectFormats...))
	return cmd
}

func runInspect(cmd *cobra.Command, e *env, o *inspectOptions, path string) error {
	if !slices.Contains(inspectFormats, o.format) {
		return fmt.Errorf("unknown format %q (want text or json)", o.format)
	}
	if o.export != "" {
		if err := checkOutputs([]string{path}, "", o.export); err != nil {
			return err
		}
	}
	found, err := diagnose.Read(cmd.Context(), path, e.stdin)
	if err != nil {
		return err
	}
	if found.PyTorch != nil {
		return writePyTorchOOM(cmd, e, o, found.PyTorch)
	}
	return writeBFC(cmd, o, found.BFC)
}

// writePyTorchOOM writes the report on a PyTorch message.
func writePyTorchOOM(cmd *cobra.Command, e *env, o *inspectOptions, found *pytorchoom.Input) error {
	if o.chunks || o.export != "" {
		flag := "--chunks"
		if o.export != "" {
			flag = "--export"
		}
		return fmt.Errorf("%s: %s applies to a BFC allocator's state (a MemoryDump or a TensorFlow log); this is PyTorch's out-of-memory message, which has no chunks", found.Name, flag)
	}
	rep := pytorchoom.NewReport(found)
	var check *diagnose.SnapshotCheck
	if o.snapshot != "" {
		var err error
		if check, err = diagnose.CheckSnapshot(cmd.Context(), o.snapshot, e.stdin, rep); err != nil {
			return err
		}
	}
	return diagnose.WritePyTorch(cmd.OutOrStdout(), o.format, rep, check)
}

// writeBFC writes the report on a BFC allocator's state, and with --export
// the state as a MemoryDump.
func writeBFC(cmd *cobra.Command, o *inspectOptions, snap *bfcdump.Snapshot) error {
	if o.snapshot != "" {
		return fmt.Errorf("--snapshot applies to PyTorch's out-of-memory message; this is a BFC allocator's state (a MemoryDump or a TensorFlow log)")
	}
	if o.export != "" {
		data, err := bfcdump.Marshal(snap)
		if err != nil {
			return err
		}
		if err := outfile.Write(o.export, func(w io.Writer) error {
			_, err := w.Write(data)
			return err
		}); err != nil {
			return err
		}
	}
	return diagnose.WriteBFC(cmd.OutOrStdout(), o.format, snap, o.chunks)
}
