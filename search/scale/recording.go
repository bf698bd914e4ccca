// Package scale varies the workload of a recording: it finds the steps of
// a training or inference loop recorded at a few sizes (a batch, a
// sequence length), models the size of each allocation of a step as a
// function of that value, and writes the program at other values, or finds
// the largest value whose program fits a device (FitIn).
//
// A recording is held in memory whole (every event, about 130 bytes
// each), as the steps are matched against each other.
package scale

import (
	"context"
	"fmt"
	"io"

	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/input"
)

// Recording is a trace held in memory: its header, its stack table and its
// events, frames and stacks aside.
type Recording struct {
	Name   string
	Header trace.Header
	Stacks *trace.StackTable
	Events []trace.Event
}

// Source is what a Recording is read from: a trace.Reader, or a converted
// recording (trace/input's Stream).
type Source interface {
	Next() bool
	Event() trace.Event
	Err() error
	Header() trace.Header
	Stacks() *trace.StackTable
}

// ReadFile reads the recording or trace at path ("-": stdin), converting
// a recording on the fly; of a recording of several devices, the one with
// the most allocations.
func ReadFile(ctx context.Context, path string, stdin io.Reader) (*Recording, error) {
	f, err := input.OpenFile(ctx, path, stdin, input.Options{Device: -1})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(ctx, input.NameOf(path, "stdin"), f.Stream)
}

// MaxEvents bounds the events a Recording holds: at about 130 bytes each,
// 50 million take some 6.5 GB.
const MaxEvents = 50_000_000

// Read reads src to its end. ctx stops it.
func Read(ctx context.Context, name string, src Source) (*Recording, error) {
	rec := &Recording{Name: name}
	for src.Next() {
		if len(rec.Events)&0xffff == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if len(rec.Events) >= MaxEvents {
			return nil, fmt.Errorf("%s: more than %d events: too many to hold in memory for scale", name, MaxEvents)
		}
		rec.Events = append(rec.Events, src.Event())
	}
	if err := src.Err(); err != nil {
		return nil, err
	}
	rec.Header = src.Header()
	rec.Stacks = src.Stacks()
	return rec, nil
}

// site names an allocation's call site: its stack, or its tag where it has
// none.
type site struct {
	stack uint32
	tag   string
}

func siteOf(e *trace.Event) site {
	if e.Stack != 0 {
		return site{stack: e.Stack}
	}
	return site{tag: e.Tag}
}
