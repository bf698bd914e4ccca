package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/allocators/bfcdump"
	"github.com/bfcsim/bfcsim/trace"
)

type inspectOptions struct {
	format string
	chunks bool
	export string
}

var inspectFormats = []string{"text", "json"}

func newInspectCmd(e *env) *cobra.Command {
	o := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect [flags] FILE",
		Short: "Explain a BFC memory dump or a TensorFlow out-of-memory log",
		Long: `Read the state of a BFC allocator and explain it: the pool's size and use,
the bins, TensorFlow's 100-character occupancy strip, and why an allocation
failed (fragmentation or lack of memory).

FILE is one of:
  - a MemoryDump protobuf, as TensorFlow writes it on an out-of-memory when
    TF_BFC_MEMORY_DUMP is set, or as 'bfcsim replay -o DIR' writes it
    (TRACE.bfc.oom.memdump, TRACE.bfc.peak.memdump);
  - the text TensorFlow logs when its BFC allocator runs out of memory, from
    any release since 2015 ("Allocator (GPU_0_bfc) ran out of memory ...",
    the bin lines, the "Chunk at"/"InUse at"/"Free  at" chunk lines, the
    in-use summary, Stats), whole or in part, pasted as it is: glog prefixes,
    "> " quotes, wrapped lines, CRLF and other loggers' lines are fine;
  - - for standard input.
Either may be gzip- or zstd-compressed.

A pasted log is read for TensorFlow's own figures first (Stats, the bin
lines, the in-use summary, the pool line), the chunk lines second: each
figure says where it comes from, a partial paste is called partial with
the reason, and the report says what the paste leaves out. A MemoryDump
does not record the memory limit or where regions begin, so bfcsim infers
regions from gaps between chunks and reasons about the pool alone.
docs/allocators/bfc.md lists every TensorFlow release's log format.`,
		Example: `  bfcsim inspect out/transformer-train.bfc.oom.memdump
  bfcsim inspect oom.log --chunks
  pbpaste | bfcsim inspect -
  bfcsim inspect oom.log --export oom.memdump   # convert a pasted log to a MemoryDump`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("inspect takes one file (a MemoryDump or a TensorFlow log), or - for standard input; got %d (see '%s --help')",
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
	var in io.Reader = e.stdin
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, path
	}
	rc, err := trace.NewDecompressReader(in)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer rc.Close()
	snap, _, err := bfcdump.Read(trace.ContextReader(cmd.Context(), rc), name)
	if err != nil {
		return err
	}
	if o.export != "" {
		data, err := bfcdump.Marshal(snap)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(o.export, func(w io.Writer) error {
			_, err := w.Write(data)
			return err
		}); err != nil {
			return err
		}
	}
	w := &stickyWriter{w: cmd.OutOrStdout()}
	if o.format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(bfcdump.NewInspectReport(snap, o.chunks)); err != nil {
			return err
		}
	} else if err := bfcdump.WriteInspect(w, snap, bfcdump.InspectOptions{Chunks: o.chunks}); err != nil {
		return err
	}
	if w.err != nil {
		return fmt.Errorf("writing the report: %w", w.err)
	}
	return nil
}
