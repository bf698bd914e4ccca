package bfcdump

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Provenance says where one figure of a report comes from.
type Provenance struct {
	// Source is "printed" (TensorFlow printed it), "derived" (computed from
	// printed figures), "chunks" (summed over the chunk lines or chunks),
	// "at-least" (only a lower bound is known) or "unknown".
	Source string `json:"source"`
	// Exact is false for TF's human-readable sizes, which keep three
	// significant digits, for sums of them, and for bounds.
	Exact bool `json:"exact"`
	// From names the lines: "Stats InUse", "pool line", "bin lines", ...
	From string `json:"from,omitempty"`
	// Lines are the lines of the input the figure rests on: "57",
	// "12–40", "12–40, 57".
	Lines string `json:"lines,omitempty"`
}

// Sources of a figure (Provenance.Source).
const (
	SourcePrinted = "printed"
	SourceDerived = "derived"
	SourceChunks  = "chunks"
	SourceAtLeast = "at-least"
	SourceUnknown = "unknown"
)

// reading is a snapshot's figures with their provenance: for a log, TF's
// printed figures ranked above the chunk lines, and what the paste lacks.
type reading struct {
	sum  Summary
	prov map[string]Provenance
	// bins are the report's bins and binsFrom where they come from.
	bins     []InspectBin
	binsFrom string
	// partial lists where the paste is partial or contradicts itself;
	// missing what it leaves out.
	partial, missing []string
	// chunksComplete: the chunk lines are the whole pool as far as the
	// printed figures can tell.
	chunksComplete bool
	// fits says whether a free chunk could hold the request: fitYes,
	// fitNo (shown by the printed lines), or fitUnknown; fitFrom says which.
	fits    int
	fitFrom string
	// binForSmaller says, without the bin lines, that the free chunks
	// "Bin for" lists are all smaller than the request; "" otherwise.
	binForSmaller string
	// limitKnown, poolKnown, inUseKnown: whether those figures are known.
	limitKnown, poolKnown, inUseKnown bool
	// inUseAtLeast: the bytes in use are a lower bound (a partial paste's
	// in-use chunk lines).
	inUseAtLeast bool
	// largestTol is how far the largest free chunk may be above the truth:
	// the rounding of the TF figure it was read from, 0 for an exact one.
	largestTol uint64
}

const (
	fitUnknown = iota
	fitYes
	fitNo
)

// humanTolerance is how far a size TF printed in human-readable form may be
// from the exact one: HumanReadableNumBytes truncates to whole units at each
// step but the last, then prints the last with one decimal (KiB) or two.
func humanTolerance(v uint64) uint64 {
	switch {
	case v < 1<<10:
		return 0
	case v < 1<<20:
		return 1<<10/20 + 1
	}
	u := uint64(1 << 20)
	for v >= u<<10 && u < 1<<60 {
		u <<= 10
	}
	return u/200 + u/1024 + 1
}

// approxEqual reports whether the exact v is what f prints as.
func approxEqual(f Fig, v uint64) bool {
	if f.Exact {
		return f.V == v
	}
	t := max(f.tol, humanTolerance(max(f.V, v)))
	return v+t >= f.V && v <= f.V+t
}

// printedInUse is the bytes in use from the in-use summary: the by-size
// lines when they agree with "Sum Total" (or no Sum Total is there), else
// Sum Total itself.
func printedInUse(ev *LogEvidence) Fig {
	if len(ev.BySize) > 0 {
		var sum uint64
		for _, b := range ev.BySize {
			sum += uint64(b.Count) * b.Size
		}
		if !ev.SumTotal.Known() || approxEqual(ev.SumTotal, sum) {
			return Fig{V: sum, Exact: true, Line: ev.BySize[0].Line}
		}
	}
	return ev.SumTotal
}

// lineRange is lines a to b, "12–40" (or "12" when a == b); "" when a is 0.
func lineRange(a, b int) string {
	switch {
	case a <= 0:
		return ""
	case b <= a:
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d–%d", a, b)
}

// joinLines joins line references ("12–40", "57"), merging ranges that
// touch or overlap, in line order.
func joinLines(parts ...string) string {
	type rg struct{ a, b int }
	var rs []rg
	for _, p := range parts {
		for _, f := range strings.Split(p, ", ") {
			if f == "" {
				continue
			}
			var r rg
			if a, b, ok := strings.Cut(f, "–"); ok {
				r.a, _ = strconv.Atoi(a)
				r.b, _ = strconv.Atoi(b)
			} else {
				r.a, _ = strconv.Atoi(f)
				r.b = r.a
			}
			if r.a > 0 {
				rs = append(rs, r)
			}
		}
	}
	slices.SortFunc(rs, func(x, y rg) int { return x.a - y.a })
	var out []string
	for i := 0; i < len(rs); {
		cur := rs[i]
		for i++; i < len(rs) && rs[i].a <= cur.b+1; i++ {
			cur.b = max(cur.b, rs[i].b)
		}
		out = append(out, lineRange(cur.a, cur.b))
	}
	return strings.Join(out, ", ")
}

func printed(f Fig, from string) Provenance {
	return Provenance{Source: SourcePrinted, Exact: f.Exact, From: from, Lines: lineRange(f.Line, f.Line)}
}

// read computes s's reading. A snapshot without a log is taken as it is:
// every figure from its chunks and stats.
func (s *Snapshot) read() *reading {
	sum := s.Summarize()
	r := &reading{sum: sum, chunksComplete: true, limitKnown: sum.MemoryLimit > 0, poolKnown: true, inUseKnown: true}
	for _, b := range s.Bins() {
		if b.TotalChunks > 0 {
			r.bins = append(r.bins, InspectBin{BinSummary: b})
		}
	}
	r.binsFrom = "chunks"
	if s.Log == nil {
		if s.Request != nil {
			r.fits = fitNo
			if requestSizes(s.Request).Rounded <= sum.LargestFreeChunk {
				r.fits = fitYes
			}
		}
		return r
	}
	r.readLog(s)
	return r
}

// readLog ranks a log's printed figures above its chunk lines.
func (r *reading) readLog(s *Snapshot) {
	ev := s.Log
	r.prov = map[string]Provenance{}
	chunkLines := lineRange(ev.FirstChunkLine, ev.LastChunkLine)
	fromChunks := func(exact bool) Provenance {
		return Provenance{Source: SourceChunks, Exact: exact, From: "chunk lines", Lines: chunkLines}
	}
	hasChunks := len(s.Chunks) > 0
	r.partial = append(r.partial, capNotes(ev.Damage, "more lines of other dumps")...)
	var inUseLines, allLines, chunkBytes uint64
	for _, c := range s.Chunks {
		allLines += c.Size
		if c.InUse {
			inUseLines += c.Size
		}
	}
	chunkBytes = allLines

	// The bin lines: all 21 of them, or part.
	allBins := len(ev.Bins) > 0 && !ev.BinsFreeOnly
	var binTotal, binInUse int64
	var binBytes, binInUseBytes Fig
	binLines := ""
	for _, b := range ev.Bins {
		binTotal += b.Total
		binInUse += b.InUse
		binBytes.V += b.BytesInBin.V
		binBytes.tol += humanTolerance(b.BytesInBin.V)
		binInUseBytes.V += b.BytesInUse.V
		binInUseBytes.tol += humanTolerance(b.BytesInUse.V)
	}
	binsWhole := ev.BinsWhole()
	if len(ev.Bins) > 0 {
		binBytes.Line, binInUseBytes.Line = ev.Bins[0].Line, ev.Bins[0].Line
		binLines = lineRange(ev.Bins[0].Line, ev.Bins[len(ev.Bins)-1].Line)
	}

	// Bytes in use.
	inUse, inUseFrom := ev.InUse, "Stats InUse"
	// summaryBounded: the by-size lines without their "Sum Total" may be
	// only part of the in-use summary, so their sum is a lower bound.
	summaryBounded := false
	if !inUse.Exact {
		if f := printedInUse(ev); f.Known() && (f.Exact || !inUse.Known()) {
			inUse, inUseFrom = f, "in-use summary"
			if !f.Exact {
				inUseFrom = "Sum Total of in-use chunks"
			}
			summaryBounded = len(ev.BySize) > 0 && !ev.SumTotal.Known()
		}
	}
	if (!inUse.Known() || summaryBounded) && allBins && binsWhole {
		inUse, inUseFrom, summaryBounded = binInUseBytes, "bin lines", false
	}
	switch {
	case summaryBounded:
		r.sum.BytesInUse = max(inUse.V, inUseLines)
		r.inUseKnown, r.inUseAtLeast = false, true
		r.prov["bytes_in_use"] = Provenance{Source: SourceAtLeast, From: "in-use summary without its Sum Total", Lines: lineRange(ev.BySize[0].Line, ev.BySize[len(ev.BySize)-1].Line)}
		r.partial = append(r.partial, "The in-use summary's \"N Chunks of size\" lines are there without their \"Sum Total of in-use chunks\": they may be only part of it, so the bytes in use are a lower bound.")
	case inUse.Known() && hasChunks && !inUse.Exact && approxEqual(inUse, inUseLines):
		r.sum.BytesInUse = inUseLines
		p := printed(inUse, inUseFrom)
		p.Exact, p.Source, p.From = true, SourceChunks, "chunk lines, agreeing with "+inUseFrom
		p.Lines = joinLines(p.Lines, chunkLines)
		r.prov["bytes_in_use"] = p
	case inUse.Known():
		r.sum.BytesInUse = inUse.V
		r.prov["bytes_in_use"] = printed(inUse, inUseFrom)
		if hasChunks && !approxEqual(inUse, inUseLines) {
			if inUseLines < inUse.V {
				r.partial = append(r.partial, fmt.Sprintf("The in-use chunk lines add up to %s; %s (line %d) says %s: lines of in-use chunks are missing.",
					sizeWithBytes(inUseLines), inUseFrom, inUse.Line, sizeWithBytes(inUse.V)))
			} else {
				r.partial = append(r.partial, fmt.Sprintf("The in-use chunk lines add up to %s, more than the %s of %s (line %d): the lines may come from more than one dump.",
					ib(inUseLines), inUseFrom, ib(inUse.V), inUse.Line))
			}
		}
	case hasChunks:
		r.prov["bytes_in_use"] = fromChunks(true)
	default:
		r.inUseKnown = false
		r.prov["bytes_in_use"] = Provenance{Source: SourceUnknown}
	}

	if ev.ChunkAtAll {
		note := "TensorFlow 0.6–0.7 print every chunk, free ones too, as \"Chunk at\" and count them all in the in-use summary: which listed chunks were free is unknown, so they are all shown in use."
		if ev.BinsWhole() && ev.BinsFreeOnly && r.inUseKnown {
			free := binBytes.V
			r.sum.BytesInUse -= min(free, r.sum.BytesInUse)
			r.prov["bytes_in_use"] = Provenance{Source: SourceDerived, From: "chunk lines less the free bytes the bin lines count", Lines: joinLines(binLines, chunkLines)}
			note += fmt.Sprintf(" The bin lines count %s free, which the bytes in use exclude.", ib(free))
		}
		r.missing = append(r.missing, note)
	}

	// Chunk counts.
	switch {
	case allBins && binsWhole:
		r.sum.Chunks, r.sum.ChunksInUse = int(binTotal), int(binInUse)
		r.sum.FreeChunks = int(binTotal - binInUse)
		p := Provenance{Source: SourcePrinted, Exact: true, From: "bin lines", Lines: binLines}
		r.prov["chunks"], r.prov["chunks_in_use"], r.prov["free_chunks"] = p, p, p
	case ev.BinsFreeOnly && binsWhole:
		r.sum.FreeChunks = int(binTotal)
		r.prov["free_chunks"] = Provenance{Source: SourcePrinted, Exact: true, From: "bin lines (free chunks only)", Lines: binLines}
		if len(ev.BySize) > 0 {
			var n int64
			for _, b := range ev.BySize {
				n += b.Count
			}
			r.sum.ChunksInUse = int(n)
			r.sum.Chunks = int(n + binTotal)
			p := Provenance{Source: SourcePrinted, Exact: true, From: "in-use summary", Lines: lineRange(ev.BySize[0].Line, ev.BySize[len(ev.BySize)-1].Line)}
			r.prov["chunks_in_use"] = p
			r.prov["chunks"] = Provenance{Source: SourceDerived, Exact: true, From: "bin lines and in-use summary", Lines: joinLines(binLines, p.Lines)}
			if ev.ChunkAtAll {
				// The summary counts every chunk: the free ones are in it.
				r.sum.Chunks, r.sum.ChunksInUse = int(n), int(max(0, n-binTotal))
				p.From, p.Source = "in-use summary (every chunk) less the bin lines' free chunks", SourceDerived
				r.prov["chunks_in_use"] = p
				r.prov["chunks"] = Provenance{Source: SourcePrinted, Exact: true, From: "in-use summary (every chunk)", Lines: lineRange(ev.BySize[0].Line, ev.BySize[len(ev.BySize)-1].Line)}
			}
		}
	}
	for _, key := range []string{"chunks", "chunks_in_use", "free_chunks"} {
		if _, ok := r.prov[key]; ok {
			continue
		}
		switch {
		case !hasChunks:
			r.prov[key] = Provenance{Source: SourceUnknown}
		case len(r.partial) > 0 || ev.ChunkAtAll:
			r.prov[key] = Provenance{Source: SourceAtLeast, From: "chunk lines (partial)", Lines: chunkLines}
		default:
			r.prov[key] = fromChunks(true)
		}
	}
	if hasChunks && binsWhole && !ev.ChunkAtAll {
		want, have, what := binTotal, int64(ev.ChunkLines), "chunks"
		if ev.BinsFreeOnly {
			have, what = int64(ev.FreeChunkLines), "free chunks"
		}
		switch {
		case have < want:
			r.partial = append(r.partial, fmt.Sprintf("The bin lines (lines %s) count %d %s; the paste lists %d: %d chunk lines are missing.",
				binLines, want, what, have, want-have))
		case have > want:
			r.partial = append(r.partial, fmt.Sprintf("The paste lists %d %s but the bin lines (lines %s) count %d: the lines may come from more than one dump.",
				have, what, binLines, want))
		}
	}
	if len(ev.Bins) > 0 && !binsWhole {
		r.partial = append(r.partial, fmt.Sprintf("Only %d of TensorFlow's bin lines (%d or more) are in the paste.", len(ev.Bins), NumBins))
	}

	if hasChunks && !binsWhole && !inUse.Known() && !ev.Pool.Known() {
		r.partial = append(r.partial, "Nothing in the paste counts the chunks (the bin lines, the Stats block, the pool line): the chunk lines may be only part of the dump, so figures over them are lower bounds.")
	}

	// The memory limit.
	limit, limitFrom := ev.PoolLimit, "pool line"
	if !limit.Exact && ev.Limit.Known() && (ev.Limit.Exact || !limit.Known()) {
		limit, limitFrom = ev.Limit, "Stats Limit"
	}
	if limit.Known() {
		r.sum.MemoryLimit = limit.V
		r.prov["memory_limit"] = printed(limit, limitFrom)
	} else {
		r.limitKnown = false
		r.sum.MemoryLimit = 0
		r.prov["memory_limit"] = Provenance{Source: SourceUnknown}
	}
	r.limitKnown = limit.Known()

	// The pool.
	var regionBytes uint64
	for _, rg := range s.Regions {
		regionBytes += rg.Size
	}
	pool, poolFrom, poolSource := ev.Pool, "pool line", SourcePrinted
	switch {
	case pool.Exact:
	case pool.Known() && len(s.Regions) > 0 && approxEqual(pool, regionBytes):
		pool, poolFrom = Fig{V: regionBytes, Exact: true, Line: pool.Line}, "region lines, agreeing with the pool line"
	case pool.Known():
	case allBins && binsWhole:
		pool, poolFrom, poolSource = binBytes, "bin lines (bytes allocated for chunks)", SourceDerived
	case ev.BinsFreeOnly && binsWhole && r.inUseKnown:
		pool = Fig{V: binBytes.V + r.sum.BytesInUse, Line: binBytes.Line, tol: binBytes.tol}
		poolFrom, poolSource = "bin lines (free) plus bytes in use", SourceDerived
	}
	poolLines := lineRange(pool.Line, pool.Line)
	if poolSource == SourceDerived {
		poolLines = joinLines(binLines, r.prov["bytes_in_use"].Lines)
	}
	if pool.Known() && !pool.Exact && hasChunks && approxEqual(pool, chunkBytes) {
		// The chunk lines agree with TF's rounded figure: they are exact.
		pool = Fig{V: chunkBytes, Exact: true, Line: pool.Line}
		poolFrom, poolSource = "chunk lines, agreeing with the "+poolFrom, SourceChunks
		poolLines = joinLines(chunkLines, poolLines)
	}
	switch {
	case pool.Known():
		r.sum.PoolBytes = pool.V
		r.prov["pool_bytes"] = Provenance{Source: poolSource, Exact: pool.Exact, From: poolFrom, Lines: poolLines}
		if hasChunks && chunkBytes+humanTolerance(pool.V) < pool.V {
			r.partial = append(r.partial, fmt.Sprintf("The chunk lines cover %s of the %s pool (%s): lines are missing.",
				sizeWithBytes(chunkBytes), sizeWithBytes(pool.V), provenanceText(r.prov["pool_bytes"])))
		}
	case hasChunks && len(r.partial) > 0:
		// A partial chunk list only bounds the pool.
		r.poolKnown = false
		r.sum.PoolBytes = chunkBytes
		r.prov["pool_bytes"] = Provenance{Source: SourceAtLeast, Exact: false, From: "chunk lines (partial)", Lines: chunkLines}
	case len(s.Regions) > 0:
		r.prov["pool_bytes"] = Provenance{Source: SourceChunks, Exact: true, From: "region lines", Lines: chunkLines}
	case hasChunks:
		r.prov["pool_bytes"] = fromChunks(true)
	default:
		r.poolKnown = false
		r.sum.PoolBytes = 0
		r.prov["pool_bytes"] = Provenance{Source: SourceUnknown}
	}

	// Regions: each one's chunks should cover it, without gaps.
	r.partial = append(r.partial, capNotes(regionGaps(s), "more regions with missing chunk lines")...)
	r.prov["regions"] = Provenance{Source: SourceChunks, Exact: true, From: "region lines", Lines: chunkLines}
	if len(r.partial) > 0 {
		r.prov["regions"] = Provenance{Source: SourceAtLeast, From: "region lines (partial)", Lines: chunkLines}
	}
	if len(s.Regions) == 0 {
		r.prov["regions"] = Provenance{Source: SourceChunks, Exact: false, From: "inferred from gaps between chunk lines", Lines: chunkLines}
		if !hasChunks {
			r.prov["regions"] = Provenance{Source: SourceUnknown}
		}
	}

	r.chunksComplete = hasChunks && len(r.partial) == 0 && !ev.ChunkAtAll

	// Free bytes and the largest free chunk.
	switch {
	case r.poolKnown && r.inUseKnown && (r.prov["pool_bytes"].Source != SourceChunks || r.prov["bytes_in_use"].Source != SourceChunks):
		if r.sum.PoolBytes >= r.sum.BytesInUse {
			r.sum.FreeInPool = r.sum.PoolBytes - r.sum.BytesInUse
		}
		pp, pu := r.prov["pool_bytes"], r.prov["bytes_in_use"]
		r.prov["free_in_pool"] = Provenance{Source: SourceDerived, Exact: pp.Exact && pu.Exact, From: "pool − bytes in use",
			Lines: joinLines(pp.Lines, pu.Lines)}
	case len(ev.Bins) > 0 && binsWhole:
		r.sum.FreeInPool = binBytes.V - min(binBytes.V, binInUseBytes.V)
		r.prov["free_in_pool"] = Provenance{Source: SourceDerived, From: "bin lines", Lines: binLines}
	case hasChunks && len(r.partial) == 0:
		r.prov["free_in_pool"] = fromChunks(true)
	case hasChunks:
		r.prov["free_in_pool"] = Provenance{Source: SourceAtLeast, From: "chunk lines (partial)", Lines: chunkLines}
	default:
		r.prov["free_in_pool"] = Provenance{Source: SourceUnknown}
	}
	r.largestFree(s, binLines, chunkLines)
	r.boundFree()
	if r.limitKnown && r.poolKnown && r.sum.MemoryLimit > r.sum.PoolBytes {
		r.sum.Unreserved = r.sum.MemoryLimit - r.sum.PoolBytes
	} else {
		r.sum.Unreserved = 0
	}
	pl, pp := r.prov["memory_limit"], r.prov["pool_bytes"]
	r.prov["unreserved"] = Provenance{Source: SourceDerived, Exact: pl.Exact && pp.Exact, From: "memory limit − pool", Lines: joinLines(pl.Lines, pp.Lines)}
	if !r.limitKnown || !r.poolKnown {
		r.prov["unreserved"] = Provenance{Source: SourceUnknown}
	}
	r.sum.TFFragmentation = tfFragmentation(r.sum.FreeInPool, r.sum.LargestFreeChunk)
	pf, pg := r.prov["free_in_pool"], r.prov["largest_free_chunk"]
	r.prov["tf_fragmentation"] = Provenance{Source: SourceDerived, Exact: pf.Exact && pg.Exact,
		From: "free in pool and the largest free chunk", Lines: joinLines(pf.Lines, pg.Lines)}
	if pf.Source == SourceUnknown || pg.Source == SourceUnknown || pf.Source == SourceAtLeast || pg.Source == SourceAtLeast {
		r.sum.TFFragmentation = 0
		r.prov["tf_fragmentation"] = Provenance{Source: SourceUnknown}
	}
	r.prov["requested_in_use"] = Provenance{Source: SourceUnknown, From: "a log does not print requested sizes per chunk"}
	r.prov["internal_waste"] = r.prov["requested_in_use"]

	r.fitsRequest(s, binsWhole)
	r.missingParts(s)
	r.logBins(s, chunkLines)
	if len(r.partial) > 0 {
		r.boundPartial()
	}
}

// logBins builds the report's bins for a pasted log. A bin whose line is in
// the paste is TensorFlow's count over the whole pool and is taken as
// printed, every figure of it; only a bin without a pasted line is counted
// over the chunk lines, as the bin lines count (the free chunks alone when
// they are of the older, free-only form), and that count is a lower bound
// when the paste is partial. With only some of the bin lines pasted, the
// table bounds the chunk counts from below better than the chunk lines
// alone: it raises those of the summary that are lower bounds.
func (r *reading) logBins(s *Snapshot, chunkLines string) {
	ev := s.Log
	// TF 0.5–0.6 printed bins past 20, each twice the one before.
	binOf, last := BinNumForSize, NumBins-1
	for _, b := range ev.Bins {
		last = max(last, b.Bin)
	}
	if last >= NumBins {
		binOf = func(n uint64) int { return bits.Len64(max(n, 1<<minAllocationBits)>>minAllocationBits) - 1 }
	}
	printed := make([]*PrintedBin, last+1)
	for i, b := range ev.Bins {
		if printed[b.Bin] == nil { // the first line of a bin printed twice
			printed[b.Bin] = &ev.Bins[i]
		}
	}
	counted := make([]BinSummary, last+1)
	for _, c := range s.Chunks {
		b := binOf(c.Size)
		if b > last || printed[b] != nil || ev.BinsFreeOnly && c.InUse {
			continue
		}
		cb := &counted[b]
		cb.TotalChunks++
		cb.BytesInBin += c.Size
		if c.InUse {
			cb.ChunksInUse++
			cb.BytesInUse += c.Size
			cb.RequestedInUse += c.Requested
		}
	}
	countedProv := Provenance{Source: SourceChunks, Exact: true, From: "chunk lines", Lines: chunkLines}
	if len(r.partial) > 0 || ev.ChunkAtAll {
		countedProv = Provenance{Source: SourceAtLeast, From: "chunk lines (partial)", Lines: chunkLines}
	}
	r.bins = r.bins[:0]
	var nPrinted, nCounted int
	var chunks, inUse int64
	for b := range printed {
		switch pb := printed[b]; {
		case pb != nil && pb.Total > 0:
			nPrinted++
			p := Provenance{Source: SourcePrinted, Exact: pb.BytesInBin.Exact && pb.BytesInUse.Exact && pb.RequestedInUse.Exact,
				From: "bin line", Lines: lineRange(pb.Line, pb.Line)}
			r.bins = append(r.bins, InspectBin{BinSummary: BinSummary{Bin: b, BinSize: BinSize(b), TotalChunks: pb.Total, ChunksInUse: pb.InUse,
				BytesInBin: pb.BytesInBin.V, BytesInUse: pb.BytesInUse.V, RequestedInUse: pb.RequestedInUse.V}, Provenance: &p})
			chunks, inUse = chunks+pb.Total, inUse+pb.InUse
		case pb == nil && counted[b].TotalChunks > 0:
			nCounted++
			cb := counted[b]
			cb.Bin, cb.BinSize = b, BinSize(b)
			p := countedProv
			r.bins = append(r.bins, InspectBin{BinSummary: cb, Provenance: &p})
			chunks, inUse = chunks+cb.TotalChunks, inUse+cb.ChunksInUse
		}
	}
	switch {
	case len(ev.Bins) == 0:
		r.binsFrom = "chunks"
	case nCounted > 0 && ev.BinsFreeOnly:
		r.binsFrom = binsMixedFreeOnly
	case nCounted > 0:
		r.binsFrom = binsMixed
	case ev.BinsFreeOnly:
		r.binsFrom = "bin lines (free chunks only)"
	default:
		r.binsFrom = "bin lines"
	}
	if nPrinted == 0 || ev.ChunkAtAll {
		return
	}
	// Each bin's count is a lower bound of that bin, and bins do not
	// overlap: their sum bounds the pool's (its free chunks' alone, for
	// free-only bin lines). In-use and free chunks do not overlap either.
	p := Provenance{Source: SourceAtLeast, From: "bin lines and chunk lines (partial)",
		Lines: joinLines(lineRange(ev.Bins[0].Line, ev.Bins[len(ev.Bins)-1].Line), chunkLines)}
	if nCounted == 0 {
		p.From, p.Lines = "bin lines (partial)", lineRange(ev.Bins[0].Line, ev.Bins[len(ev.Bins)-1].Line)
	}
	// The chunk lines' counts are lower bounds here, or become them in
	// boundPartial.
	raise := func(key string, v *int, n int64, p Provenance) {
		q := r.prov[key]
		bound := q.Source == SourceAtLeast || q.Source == SourceUnknown || q.Source == SourceChunks && len(r.partial) > 0
		if bound && int64(*v) < n {
			*v = int(n)
			r.prov[key] = p
		}
	}
	if !ev.BinsFreeOnly {
		raise("chunks", &r.sum.Chunks, chunks, p)
		raise("chunks_in_use", &r.sum.ChunksInUse, inUse, p)
	}
	raise("free_chunks", &r.sum.FreeChunks, chunks-inUse, p)
	if pu, pf := r.prov["chunks_in_use"], r.prov["free_chunks"]; pu.From != pf.From {
		p = Provenance{Source: SourceAtLeast, From: "bin lines and chunk lines (partial)", Lines: joinLines(pu.Lines, pf.Lines)}
	}
	raise("chunks", &r.sum.Chunks, int64(r.sum.ChunksInUse)+int64(r.sum.FreeChunks), p)
}

// boundFree raises the free bytes and the pool, where only lower bounds of
// them are known, to what the largest free chunk implies: a free chunk of
// the "Bin for" block, say, is free memory in the pool.
func (r *reading) boundFree() {
	lf := r.prov["largest_free_chunk"]
	if lf.Source == SourceUnknown || r.sum.LargestFreeChunk == 0 {
		return
	}
	fp := r.prov["free_in_pool"]
	if fp.Source != SourceAtLeast && fp.Source != SourceUnknown || r.sum.FreeInPool >= r.sum.LargestFreeChunk {
		return
	}
	r.sum.FreeInPool = r.sum.LargestFreeChunk
	r.prov["free_in_pool"] = Provenance{Source: SourceAtLeast, From: "the largest free chunk", Lines: lf.Lines}
	// The pool holds the bytes in use besides. TF's rounded figures are
	// taken less their rounding, so that the sum stays a lower bound.
	pu, pp := r.prov["bytes_in_use"], r.prov["pool_bytes"]
	if r.poolKnown || pp.Source != SourceAtLeast && pp.Source != SourceUnknown {
		return
	}
	inUse := r.sum.BytesInUse
	switch {
	case pu.Source == SourceUnknown:
		inUse = 0
	case !pu.Exact && pu.Source != SourceAtLeast: // one of TF's rounded figures
		inUse -= min(inUse, humanTolerance(inUse))
	}
	free := r.sum.FreeInPool - min(r.sum.FreeInPool, r.largestTol)
	if pool := satAdd(inUse, free); pool > r.sum.PoolBytes {
		r.sum.PoolBytes = pool
		from := "bytes in use + free in pool"
		if inUse == 0 {
			from = "free in pool"
		}
		r.prov["pool_bytes"] = Provenance{Source: SourceAtLeast, From: from, Lines: joinLines(pu.Lines, lf.Lines)}
	}
}

// boundPartial turns figures summed over the chunk lines of a partial paste
// into lower bounds: lines are missing, so the sums fall short.
func (r *reading) boundPartial() {
	for key, p := range r.prov {
		if p.Source != SourceChunks || strings.Contains(p.From, "agreeing") {
			continue
		}
		p.Source, p.Exact, p.From = SourceAtLeast, false, p.From+" (partial)"
		r.prov[key] = p
		switch key {
		case "bytes_in_use":
			r.inUseKnown, r.inUseAtLeast = false, true
		case "pool_bytes":
			r.poolKnown = false
		}
	}
	if p := r.prov["free_in_pool"]; p.Source == SourceAtLeast && r.sum.FreeInPool == 0 {
		r.prov["free_in_pool"] = Provenance{Source: SourceUnknown}
	}
	if p := r.prov["tf_fragmentation"]; p.Source != SourceUnknown {
		if r.prov["free_in_pool"].Source != SourceDerived && r.prov["free_in_pool"].Source != SourcePrinted || r.prov["largest_free_chunk"].Source == SourceAtLeast {
			r.sum.TFFragmentation = 0
			r.prov["tf_fragmentation"] = Provenance{Source: SourceUnknown}
		}
	}
}

// largestFree finds the largest free chunk: exact from a complete chunk
// list or TF's own figure; else from the top bin's line when that bin holds
// one free chunk; else bounded from below by the largest of the highest bin
// line with a free chunk, the free chunk lines and the free chunks listed
// under "Bin for".
func (r *reading) largestFree(s *Snapshot, binLines, chunkLines string) {
	ev := s.Log
	var listed uint64
	for _, c := range s.Chunks {
		if !c.InUse {
			listed = max(listed, c.Size)
		}
	}
	switch {
	case ev.LargestFreeBlock.Known() && ev.LargestFreeBlock.Exact:
		r.sum.LargestFreeChunk = ev.LargestFreeBlock.V
		r.prov["largest_free_chunk"] = printed(ev.LargestFreeBlock, "Stats LargestFreeBlock")
		return
	case r.chunksComplete:
		r.sum.LargestFreeChunk = listed
		r.prov["largest_free_chunk"] = Provenance{Source: SourceChunks, Exact: true, From: "chunk lines", Lines: chunkLines}
		return
	case ev.LargestUsable.Known():
		r.sum.LargestFreeChunk = ev.LargestUsable.V
		r.prov["largest_free_chunk"] = printed(ev.LargestUsable, "Allocator memory summary")
		return
	}
	// The highest bin with a free chunk holds the largest one. With only
	// some of the bin lines pasted, the highest pasted one is that bin only
	// if it is bin 20, the last (since TF 1.4; older releases' bin lines
	// differ).
	whole := ev.BinsWhole()
	top := -1
	var topBin PrintedBin
	for _, b := range ev.Bins {
		free := b.Total
		if !ev.BinsFreeOnly {
			free -= b.InUse
		}
		if free > 0 && b.Bin > top {
			top, topBin = b.Bin, b
		}
	}
	if top < 0 && whole {
		r.sum.LargestFreeChunk = 0
		r.prov["largest_free_chunk"] = Provenance{Source: SourcePrinted, Exact: true, From: "bin lines: no free chunk", Lines: binLines}
		return
	}
	// stated is the largest free chunk TF listed under "Bin for".
	var stated StateChunk
	if bf := ev.BinFor; bf != nil {
		for _, c := range bf.Chunks {
			if !c.InUse && c.Size.V > stated.Size.V {
				stated = c
			}
		}
	}
	// atLeast makes the lower bound v of the bin lines, if any, the
	// largest of it, the free chunk lines and the chunk under "Bin for";
	// tol is v's rounding.
	atLeast := func(v, tol uint64, p Provenance) {
		r.largestTol = tol
		if listed > v {
			v, p = listed, Provenance{Source: SourceAtLeast, From: "free chunk lines (partial)", Lines: chunkLines}
			r.largestTol = 0
		}
		if stated.Size.V > v {
			v, p = stated.Size.V, Provenance{Source: SourceAtLeast, From: "a free chunk under \"Bin for\"", Lines: lineRange(stated.Line, stated.Line)}
			if !stated.Size.Exact {
				r.largestTol = humanTolerance(v)
			}
		}
		r.sum.LargestFreeChunk = v
		if v == 0 {
			p = Provenance{Source: SourceUnknown}
		}
		r.prov["largest_free_chunk"] = p
	}
	if top < 0 {
		atLeast(0, 0, Provenance{})
		return
	}
	free := topBin.Total
	freeBytes := topBin.BytesInBin.V - min(topBin.BytesInBin.V, topBin.BytesInUse.V)
	if !ev.BinsFreeOnly {
		free -= topBin.InUse
	}
	freeTol := humanTolerance(topBin.BytesInBin.V) + humanTolerance(topBin.BytesInUse.V)
	if !whole && (top != NumBins-1 || ev.BinsFreeOnly) {
		// Not the top bin: a lower bound, its one free chunk's size when
		// it holds one, else its bin size.
		p := Provenance{Source: SourceAtLeast, From: fmt.Sprintf("bin %d's line: %d free chunks of %s in all", top, free, ib(freeBytes)),
			Lines: lineRange(topBin.Line, topBin.Line)}
		if free == 1 && freeBytes > BinSize(top) {
			p.From = fmt.Sprintf("bin %d's line: its one free chunk", top)
			atLeast(freeBytes, freeTol, p)
			return
		}
		atLeast(BinSize(top), 0, p)
		return
	}
	if free == 1 && freeBytes > 0 {
		// One free chunk in the top bin: TF printed its size, roughly.
		r.sum.LargestFreeChunk = freeBytes
		if listed > 0 && BinNumForSize(listed) == top && approxEqual(Fig{V: freeBytes}, listed) {
			r.sum.LargestFreeChunk = listed
			r.prov["largest_free_chunk"] = Provenance{Source: SourceChunks, Exact: true, From: "chunk lines, agreeing with the bin lines",
				Lines: joinLines(lineRange(topBin.Line, topBin.Line), lineRange(ev.FirstChunkLine, ev.LastChunkLine))}
			return
		}
		r.prov["largest_free_chunk"] = Provenance{Source: SourceDerived, From: fmt.Sprintf("bin %d's line: its one free chunk", top), Lines: lineRange(topBin.Line, topBin.Line)}
		r.largestTol = freeTol
		return
	}
	p := Provenance{Source: SourceAtLeast, From: fmt.Sprintf("bin %d's line: %d free chunks of %s in all", top, free, ib(freeBytes)),
		Lines: lineRange(topBin.Line, topBin.Line)}
	if stated.Size.V > max(BinSize(top), listed) {
		atLeast(BinSize(top), 0, p)
		return
	}
	r.sum.LargestFreeChunk = max(BinSize(top), listed)
	r.prov["largest_free_chunk"] = p
}

// fitsRequest decides from the printed lines whether a free chunk could
// hold the request.
func (r *reading) fitsRequest(s *Snapshot, binsWhole bool) {
	if s.Request == nil {
		return
	}
	ev := s.Log
	need := requestSizes(s.Request).Rounded
	if r.chunksComplete || r.prov["largest_free_chunk"].Source == SourcePrinted && r.prov["largest_free_chunk"].Exact {
		r.fits = fitNo
		r.fitFrom = fmt.Sprintf("the largest free chunk is %s, from the %s", ib(r.sum.LargestFreeChunk), r.prov["largest_free_chunk"].From)
		if need <= r.sum.LargestFreeChunk {
			r.fits = fitYes
		}
		return
	}
	for _, c := range s.Chunks {
		if !c.InUse && c.Size >= need {
			r.fits, r.fitFrom = fitYes, "a free chunk line"
			return
		}
	}
	if bf := ev.BinFor; bf != nil {
		for _, c := range bf.Chunks {
			// Larger beyond TF's rounding.
			if !c.InUse && c.Size.V >= need && !approxEqual(c.Size, need) {
				r.fits, r.fitFrom = fitYes, fmt.Sprintf("a free chunk of %s under \"Bin for\" (line %d)", ib(c.Size.V), c.Line)
				return
			}
		}
	}
	if bf := ev.BinFor; bf != nil && len(bf.Chunks) > 0 {
		smaller := true
		for _, c := range bf.Chunks {
			if c.InUse || c.Size.V >= need || approxEqual(c.Size, need) {
				smaller = false
			}
		}
		if smaller {
			r.binForSmaller = fmt.Sprintf("the %d free chunks of the request's bin listed under \"Bin for\" (line %d) are all smaller than it", len(bf.Chunks), bf.Line)
			if len(bf.Chunks) == 1 {
				r.binForSmaller = fmt.Sprintf("the one free chunk of the request's bin, listed under \"Bin for\" (line %d), is smaller than it", bf.Line)
			}
		}
	}
	if len(ev.Bins) == 0 {
		return
	}
	rb := BinNumForSize(need)
	if slices.ContainsFunc(ev.Bins, func(b PrintedBin) bool { return b.Bin >= NumBins }) {
		// TF 0.5–0.6 had bins past 20, and searched from the first bin at
		// least as large.
		rb = max(0, bits.Len64(need>>minAllocationBits)-1)
		if BinSize(rb) < need {
			rb++
		}
	}
	// A free chunk in a bin above the request's holds it, whether or not
	// the other bin lines are in the paste.
	for _, b := range ev.Bins {
		free := b.Total
		if !ev.BinsFreeOnly {
			free -= b.InUse
		}
		if b.Bin > rb && free > 0 {
			r.fits, r.fitFrom = fitYes, fmt.Sprintf("bin %d's line (line %d)", b.Bin, b.Line)
			return
		}
	}
	if !binsWhole {
		return
	}
	// Only the request's own bin is left: its free chunks are listed
	// under "Bin for", or the bin has none.
	var inBin int64
	for _, b := range ev.Bins {
		if b.Bin == rb {
			inBin = b.Total
			if !ev.BinsFreeOnly {
				inBin -= b.InUse
			}
		}
	}
	if inBin == 0 {
		r.fits, r.fitFrom = fitNo, fmt.Sprintf("the bin lines (lines %s): no free chunk in bin %d or above", lineRange(ev.Bins[0].Line, ev.Bins[len(ev.Bins)-1].Line), rb)
		return
	}
	if bf := ev.BinFor; bf != nil && int64(len(bf.Chunks)) >= inBin {
		for _, c := range bf.Chunks {
			if !c.InUse && c.Size.V >= need && !approxEqual(c.Size, need-1) {
				return // TF's rounded size cannot tell
			}
		}
		r.fits, r.fitFrom = fitNo, fmt.Sprintf("the bin lines and the chunk state under \"Bin for\" (line %d): every free chunk of bin %d is smaller", bf.Line, rb)
	}
}

// missingParts lists what the paste leaves out.
func (r *reading) missingParts(s *Snapshot) {
	ev := s.Log
	switch {
	case ev.HeadlineLine == 0 && s.Request != nil:
		r.missing = append(r.missing, fmt.Sprintf("The headline is not in the paste: the request's size is from the \"Bin for\" line (line %d), rounded by TF to three digits; the op is unknown.", ev.BinFor.Line))
	case s.Request == nil:
		r.missing = append(r.missing, "The failed request is not in the pasted text (neither the \"ran out of memory\" headline nor the \"Bin for\" line).")
	case !ev.HeadlineRounded:
		r.missing = append(r.missing, "This TensorFlow version's headline gives the request only in its rounded human-readable form, so its exact size is unknown.")
	}
	if ev.StatsLine == 0 {
		r.missing = append(r.missing, "The Stats block (Limit, InUse, MaxInUse, NumAllocs, MaxAllocSize) is not in the paste.")
	}
	if !r.limitKnown {
		r.missing = append(r.missing, "The memory limit is unknown: neither the Stats block's Limit nor the pool line is in the paste.")
	}
	if ev.ChunkLines == 0 {
		r.missing = append(r.missing, "No chunk lines: the layout of the pool is unknown.")
	}
	if len(ev.Bins) == 0 {
		r.missing = append(r.missing, "No bin lines.")
	}
	if !r.poolKnown {
		r.missing = append(r.missing, "The pool's size is unknown.")
	}
	skipped := make([]string, len(ev.Skipped))
	for i, sk := range ev.Skipped {
		skipped[i] = "Skipped " + sk + "."
	}
	r.partial = append(r.partial, capNotes(skipped, "more lines skipped")...)
}

// maxNotes bounds the notes of one kind a report lists: a crafted or
// mangled paste can make one per line.
const maxNotes = 10

// capNotes keeps the first maxNotes notes and counts the rest.
func capNotes(notes []string, more string) []string {
	if len(notes) <= maxNotes {
		return notes
	}
	out := slices.Clone(notes[:maxNotes])
	return append(out, fmt.Sprintf("... and %d %s.", len(notes)-maxNotes, more))
}

// regionGaps finds regions whose chunk lines leave part of them unlisted.
func regionGaps(s *Snapshot) []string {
	var out []string
	if len(s.Regions) == 0 {
		return nil
	}
	chunks, spans := s.layout()
	for i, sp := range spans {
		if i >= len(s.Regions) {
			break
		}
		rg := s.Regions[i]
		var covered uint64
		gaps := 0
		at := rg.Addr
		for k := sp.first; k < sp.end; k++ {
			if chunks[k].Addr != at {
				gaps++
			}
			covered += chunks[k].Size
			at = chunks[k].Addr + chunks[k].Size
		}
		if at != rg.Addr+rg.Size {
			gaps++
		}
		if covered < rg.Size {
			gapWord := "gaps"
			if gaps == 1 {
				gapWord = "gap"
			}
			out = append(out, fmt.Sprintf("The region at %#x of %s has chunk lines for only %s of it (%d %s): lines are missing.",
				rg.Addr, ib(rg.Size), ib(covered), gaps, gapWord))
		}
	}
	return out
}

// poolCannotGrowBy reports whether a lower bound of the pool, with the
// memory limit, shows that the pool could not grow by need bytes (taken
// less TF's rounding when the request is only TF's human-readable figure).
func (r *reading) poolCannotGrowBy(need uint64, reqExact bool) bool {
	if !r.limitKnown || r.poolKnown || r.prov["pool_bytes"].Source != SourceAtLeast || r.sum.PoolBytes == 0 {
		return false
	}
	if !reqExact {
		need -= min(need, humanTolerance(need))
	}
	return r.sum.MemoryLimit-min(r.sum.MemoryLimit, r.sum.PoolBytes) < need
}
