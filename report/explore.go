package report

import (
	"fmt"
	"math"

	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// The data index.html's interactive memory view draws, embedded in the page
// as JSON (exploreData): per trace, per allocator, the timeline's points and
// the memory map, every block as columns of numbers (addresses relative to
// the map's lowest), so that a page of tens of thousands of blocks stays a
// few megabytes. A memory map the replay summarised (more blocks than it
// keeps, sim.RecordConfig.Blocks) comes as its raster of in-use percentages.

type exploreData struct {
	Traces []exploreTrace `json:"traces"`
}

type exploreTrace struct {
	ID         string         `json:"id"`
	Name       string         `json:"name"`
	Events     int64          `json:"events"`
	Allocators []exploreAlloc `json:"allocators"`
	// Frames and Stacks are the recorded stacks of the blocks drawn:
	// each stack lists indexes into Frames, innermost first.
	Frames []string `json:"frames,omitempty"`
	Stacks [][]int  `json:"stacks,omitempty"`

	frameIndex map[trace.Frame]int
	stackIndex map[uint32]int
	frameBytes int // the text of Frames, against maxExploreFrameBytes
	tr         *Trace
}

// Bounds of the stacks a page embeds: a recording's blocks share a few
// thousand stacks; a crafted one could name a new stack of new frames at
// every block. Past the bounds, blocks are drawn without their stack.
const (
	maxExploreStacks     = 1 << 14
	maxExploreFrameBytes = 8 << 20
)

// stackOf returns the index in Stacks of the trace's stack id, adding it
// (at most maxStackText of its frames) the first time; -1 for none.
func (et *exploreTrace) stackOf(id uint32) int {
	if id == 0 || et.tr.Stacks == nil {
		return -1
	}
	if k, ok := et.stackIndex[id]; ok {
		return k
	}
	fr := et.tr.Stacks.Frames(id)
	if len(fr) == 0 || len(et.Stacks) >= maxExploreStacks || et.frameBytes >= maxExploreFrameBytes {
		return -1
	}
	if et.frameIndex == nil {
		et.frameIndex, et.stackIndex = map[trace.Frame]int{}, map[uint32]int{}
	}
	st := make([]int, 0, min(len(fr), maxStackText))
	for _, f := range fr[:min(len(fr), maxStackText)] {
		k, ok := et.frameIndex[f]
		if !ok {
			k = len(et.Frames)
			et.frameIndex[f] = k
			et.Frames = append(et.Frames, f.String())
			et.frameBytes += len(et.Frames[k])
		}
		st = append(st, k)
	}
	et.stackIndex[id] = len(et.Stacks)
	et.Stacks = append(et.Stacks, st)
	return len(et.Stacks) - 1
}

// exploreAlloc's keys are brief: the page carries one set per allocator
// and trace, and the columns dominate its size.
type exploreAlloc struct {
	Name string `json:"name"`
	// Peak and PeakLine locate the first peak of bytes in use; OOM and
	// OOMLine the first failed allocation (-1: none).
	Peak     int64  `json:"peak"`
	PeakLine int64  `json:"peakLine"`
	OOM      int64  `json:"oom"`
	OOMLine  int64  `json:"oomLine"`
	Lo       uint64 `json:"lo"`
	Hi       uint64 `json:"hi"`
	// Exact says Blocks holds every block; else Raster summarises them.
	Exact      bool  `json:"exact"`
	BlockCount int64 `json:"blockCount"`
	// The timeline: each point's first event and its maxima.
	T      []int64        `json:"t"`
	Live   []uint64       `json:"live"`
	U      []uint64       `json:"u"`
	V      []uint64       `json:"v"`
	Blocks *exploreBlocks `json:"blocks,omitempty"`
	Raster *exploreRaster `json:"raster,omitempty"`
}

// exploreBlocks are the memory map's blocks, column by column.
type exploreBlocks struct {
	A, S, R []uint64 // address − Lo, block size, requested size
	B, E    []int64  // allocated by event B, freed by event E
	I       []uint64 // the trace's id
	LA, LF  []int64  // lines of the alloc and the free (0: never freed)
	G       []int    // index into Tags: the block's call site
	Tags    []string // call sites (the tag, or named from the stack by --frames)
	K       []int    // index into the trace's Stacks, -1 for none
}

type exploreRaster struct {
	Rows, Cols int
	RowBytes   uint64
	Width      int64
	// U holds, row-major, the percentage of each cell in use, rounded to
	// a whole number: the page holds 262,144 of them at the default
	// raster's size, which as fractions took most of its JSON's time.
	U []int
}

// newExploreTrace builds a trace's data, or nil when no allocator has a
// recorded memory map (a replay without -o records none).
func newExploreTrace(id string, tr *Trace) *exploreTrace {
	et := &exploreTrace{ID: id, Name: tr.Name, Events: tr.Events, tr: tr}
	for i := range tr.Results {
		r := &tr.Results[i]
		if r.Series == nil || r.Series.Memmap == nil || r.Series.Timeline == nil {
			return nil
		}
		et.Allocators = append(et.Allocators, newExploreAlloc(et, r))
	}
	if len(et.Allocators) == 0 {
		return nil
	}
	return et
}

func newExploreAlloc(et *exploreTrace, r *Result) exploreAlloc {
	mm, tl := r.Series.Memmap, r.Series.Timeline
	a := exploreAlloc{Name: r.Allocator, Lo: mm.Lo, Hi: mm.Hi, Exact: mm.Exact, BlockCount: mm.BlockCount, OOM: -1, OOMLine: -1, Peak: -1}
	if r.FirstOOMEvent != nil {
		a.OOM = *r.FirstOOMEvent
		if r.FirstOOMLine != nil {
			a.OOMLine = *r.FirstOOMLine
		}
	}
	if l := r.Series.Layout; l != nil && l.AtPeak {
		a.Peak, a.PeakLine = l.Event, l.Line
	}
	var best uint64
	for _, p := range tl.Points {
		a.T = append(a.T, p.Event)
		a.Live = append(a.Live, p.Live)
		a.U = append(a.U, p.InUse)
		a.V = append(a.V, p.Reserved)
		if a.Peak < 0 && p.InUse > best {
			best = p.InUse
		}
	}
	if a.Peak < 0 { // no layout at the peak: the first point at the most
		for _, p := range tl.Points {
			if p.InUse == best {
				a.Peak = p.Event
				break
			}
		}
	}
	blocks := mm.Blocks
	if !mm.Exact {
		blocks = mm.Large
	}
	if len(blocks) > 0 || mm.Exact {
		b := &exploreBlocks{}
		tags := map[string]int{}
		for _, m := range blocks {
			b.A = append(b.A, m.Addr-mm.Lo)
			b.S = append(b.S, m.Size)
			b.R = append(b.R, m.Requested)
			b.B = append(b.B, m.Start)
			b.E = append(b.E, m.End)
			b.I = append(b.I, m.ID)
			b.LA = append(b.LA, m.StartLine)
			b.LF = append(b.LF, m.EndLine)
			site := m.Tag
			if m.Stack != 0 || et.tr.Frames.Mine != nil {
				site = siteName(m.Tag, m.Stack, et.tr.Stacks, et.tr.Frames)
			}
			g, ok := tags[site]
			if !ok {
				g = len(b.Tags)
				tags[site] = g
				b.Tags = append(b.Tags, site)
			}
			b.G = append(b.G, g)
			b.K = append(b.K, et.stackOf(m.Stack))
		}
		a.Blocks = b
	}
	if g := mm.Raster; !mm.Exact && g != nil {
		rs := &exploreRaster{Rows: g.Rows, Cols: g.Cols, RowBytes: g.RowBytes, Width: g.Width, U: make([]int, len(g.InUse))}
		for i, f := range g.InUse {
			rs.U[i] = int(math.Round(f * 100))
		}
		a.Raster = rs
	}
	return a
}

// exploreNote says on the page what the view draws of a trace: every
// block, or, for the allocators whose maps were summarised, the largest
// blocks over a raster of the rest.
func exploreNote(et *exploreTrace) string {
	var summarised []string
	var blocks int64
	var smallest uint64
	for _, a := range et.Allocators {
		blocks = max(blocks, a.BlockCount)
		if a.Exact {
			continue
		}
		summarised = append(summarised, a.Name)
		if a.Blocks != nil {
			for _, s := range a.Blocks.S {
				if smallest == 0 || s < smallest {
					smallest = s
				}
			}
		}
	}
	if len(summarised) == 0 {
		return fmt.Sprintf("Every block is drawn (up to %s per allocator): hover one for its allocation.", Count(blocks))
	}
	return fmt.Sprintf("%s made more blocks than a replay keeps one by one (%s): their largest %s blocks (%s and up) are drawn and can be hovered, and the rest are summarised beneath them, each cell shaded by the share of its bytes × events in use (hovering it shows that share). The other allocators' blocks are all drawn.",
		joinNames(summarised), Count(int64(sim.DefaultBlocks)), Count(int64(sim.DefaultBlocks)), Bytes(smallest))
}

func joinNames(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	out := names[0]
	for i, n := range names[1:] {
		if i == len(names)-2 {
			out += " and " + n
		} else {
			out += ", " + n
		}
	}
	return out
}
