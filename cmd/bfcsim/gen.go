package main

import (
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/trace/gen"
)

func newGenCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gen WORKLOAD [flags]",
		Short: "Write a deterministic synthetic trace",
		Long: `Write a synthetic trace of one of the workloads below. The same workload,
flags and --seed always give the same bytes. The output is JSON Lines,
compressed when -o ends in .gz or .zst; without -o it goes to standard output.`,
		Example: `  bfcsim gen transformer-train --seed 1 -o t.jsonl
  bfcsim gen random --events 5000000 --target-live 2000 -o big.jsonl.zst
  bfcsim gen cnn-infer --runs 20 | bfcsim replay -`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("gen needs a workload: one of %s", strings.Join(gen.Names(), ", "))
			}
			return fmt.Errorf("unknown workload %q (want one of %s)", args[0], strings.Join(gen.Names(), ", "))
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	for _, name := range gen.Names() {
		cmd.AddCommand(newGenWorkloadCmd(e, name))
	}
	return cmd
}

func newGenWorkloadCmd(e *env, name string) *cobra.Command {
	g, err := gen.New(name)
	if err != nil {
		panic(err) // gen.Names lists only known workloads
	}
	var out, traceName, capacity string
	cmd := &cobra.Command{
		Use:   name + " [flags]",
		Short: "Generate a " + name + " trace",
		Long:  docOf(g),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := gen.Validate(g); err != nil {
				return err
			}
			h := g.Header()
			if traceName != "" {
				h.Name = traceName
			}
			if capacity != "" {
				n, err := allocators.ParseSize(capacity)
				if err != nil {
					return fmt.Errorf("--capacity: %w", err)
				}
				h.CapacityBytes = n
			}
			write := func(w io.Writer) error { return gen.Write(cmd.Context(), g, h, w) }
			if out == "" || out == "-" {
				return write(cmd.OutOrStdout())
			}
			if err := checkOutputs(nil, "", out); err != nil {
				return err
			}
			return outfile.Write(out, write)
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "output file (.gz or .zst to compress; default standard output)")
	cmd.Flags().StringVar(&traceName, "name", "", "trace name for the header (default: the workload and its main parameters)")
	cmd.Flags().StringVar(&capacity, "capacity", "", "device capacity to record in the header, e.g. 16GiB (default: none)")
	bindConfigFlags(cmd.Flags(), g)
	return cmd
}

// docOf returns a workload's long help: its header name with default values.
func docOf(g gen.Generator) string {
	return "Defaults: " + g.Header().Name + "."
}

// bindConfigFlags makes one flag per field of the config struct g points to:
// SeqLen becomes --seq-len, with the field's help tag and current value as
// default. Fields counting bytes (named ...Size or ...Bytes) accept units.
func bindConfigFlags(fs *pflag.FlagSet, g gen.Generator) {
	v := reflect.ValueOf(g).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		flag := gen.FlagName(f.Name)
		help := f.Tag.Get("help")
		p := v.Field(i).Addr().Interface()
		switch p := p.(type) {
		case *int:
			fs.IntVar(p, flag, *p, help)
		case *int64:
			if strings.HasSuffix(f.Name, "Size") || strings.HasSuffix(f.Name, "Bytes") {
				fs.Var((*sizeFlag)(p), flag, help+" (units allowed: 64KiB, 2GiB)")
			} else {
				fs.Int64Var(p, flag, *p, help)
			}
		case *uint64:
			fs.Uint64Var(p, flag, *p, help)
		case *float64:
			fs.Float64Var(p, flag, *p, help)
		case *bool:
			fs.BoolVar(p, flag, *p, help)
		case *string:
			fs.StringVar(p, flag, *p, help)
		default:
			panic(fmt.Sprintf("gen config field %s has unsupported type %s", f.Name, f.Type))
		}
	}
}

// sizeFlag is an int64 byte count that accepts units.
type sizeFlag int64

func (s *sizeFlag) String() string { return strconv.FormatInt(int64(*s), 10) }
func (s *sizeFlag) Type() string   { return "size" }
func (s *sizeFlag) Set(text string) error {
	n, err := allocators.ParseSize(text)
	if err != nil {
		return err
	}
	if n > 1<<62 {
		return fmt.Errorf("size %s is too large", text)
	}
	*s = sizeFlag(n)
	return nil
}
