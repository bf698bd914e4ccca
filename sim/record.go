package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/paged"
	"github.com/bfcsim/bfcsim/trace"
)

// Recording keeps, for each allocator, the series that plots are drawn
// from: a timeline of bytes over the trace, a memory map of every block and
// region in address × time, and the layout of the address space at one
// moment. Each is bounded, so that a trace of any length records in memory
// that does not grow with it:
//
//   - the timeline keeps at most Points points; when the trace outgrows them,
//     neighbouring points are merged pairwise and each point summarises twice
//     as many events (maxima of the byte counts, so no peak is lost);
//   - the memory map keeps every block and region as a rectangle while there
//     are at most Blocks of each; past that it paints them into a raster of
//     Rows × Columns cells that records what fraction of each cell's bytes ×
//     events was in use or reserved, and whose cells double in width (time)
//     or height (address) as the trace outgrows them;
//   - the layout is captured exactly. At an event index that is a copy of
//     the live blocks and regions. At the peak it is built once, at the
//     end: the blocks and regions live at the peak are those live at the end
//     that began no later than the peak's event, and those that did and were
//     removed since, which are kept aside as they are removed (a new peak
//     forgets them). Those can be no more than were live at the peak, so
//     the peak costs O(1) per event and memory no larger than its layout.

// RecordConfig asks Replay to record the series plots are drawn from.
type RecordConfig struct {
	// Points bounds the timeline (default DefaultPoints).
	Points int
	// Blocks is the most blocks, and separately regions, the memory map
	// keeps as exact rectangles (default DefaultBlocks).
	Blocks int
	// Rows and Columns size the memory map's raster, used past Blocks
	// (defaults DefaultRows and DefaultColumns).
	Rows, Columns int
	// The layout is captured at the first moment bytes in use reach their
	// peak or, with AtEvent, right after the event of index LayoutEvent
	// (0-based).
	AtEvent     bool
	LayoutEvent int64
}

// Defaults of RecordConfig. A plot is a few hundred to a couple of thousand
// pixels wide, so more points or columns than that would not be seen;
// 20,000 rectangles keep an SVG memory map to a few megabytes.
const (
	DefaultPoints  = 2048
	DefaultBlocks  = 20000
	DefaultRows    = 256
	DefaultColumns = 1024
)

// maxMarks is how many step and mark events the timeline keeps by name.
const maxMarks = 1000

func (c RecordConfig) withDefaults() (RecordConfig, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Points, DefaultPoints)
	def(&c.Blocks, DefaultBlocks)
	def(&c.Rows, DefaultRows)
	def(&c.Columns, DefaultColumns)
	if c.Points < 2 || c.Blocks < 0 || c.Rows < 2 || c.Columns < 2 {
		return c, fmt.Errorf("record: want Points, Rows and Columns of at least 2 and Blocks ≥ 0, got %d, %d, %d and %d",
			c.Points, c.Rows, c.Columns, c.Blocks)
	}
	if c.Rows&(c.Rows-1) != 0 {
		return c, fmt.Errorf("record: Rows must be a power of two, got %d", c.Rows)
	}
	if c.AtEvent && c.LayoutEvent < 0 {
		return c, fmt.Errorf("record: LayoutEvent must be an event index (0, 1, …), got %d", c.LayoutEvent)
	}
	return c, nil
}

// Timeline is bytes live, in use and reserved over a trace.
type Timeline struct {
	// Width is how many events each point summarises: 1 while the trace
	// fits the bound, doubled each time pairs of points are merged.
	Width int64
	// Events is how many events the allocator saw.
	Events int64
	Points []TimelinePoint
	// Marks are the trace's step and mark events, the first maxMarks of
	// them; Steps and MarkEvents count them all.
	Marks             []Mark
	Steps, MarkEvents int64
}

// TimelinePoint summarises the events [Event, Event+Events).
type TimelinePoint struct {
	Event, Events int64
	// Live, InUse and Reserved are the most bytes after any of the events.
	Live, InUse, Reserved uint64
	// TFFragMax is the largest value of TensorFlow's fragmentation metric
	// after any of the events, TFFragSum the sum over them.
	TFFragMax, TFFragSum float64
	// Failed counts failed allocations.
	Failed int64
}

// TFFragMean is the mean of TensorFlow's fragmentation metric over the point's events.
func (p *TimelinePoint) TFFragMean() float64 {
	if p.Events == 0 {
		return 0
	}
	return p.TFFragSum / float64(p.Events)
}

func (p *TimelinePoint) merge(q *TimelinePoint) {
	p.Events += q.Events
	p.Live = max(p.Live, q.Live)
	p.InUse = max(p.InUse, q.InUse)
	p.Reserved = max(p.Reserved, q.Reserved)
	p.TFFragMax = math.Max(p.TFFragMax, q.TFFragMax)
	p.TFFragSum += q.TFFragSum
	p.Failed += q.Failed
}

// Mark is a step or mark event.
type Mark struct {
	Event int64
	Name  string
	Step  bool
}

// add records the state after event i; events arrive in order.
func (t *Timeline) add(i int64, bound int, live, inUse, reserved uint64, frag float64, failed bool) {
	if n := len(t.Points); n == 0 || i >= t.Points[n-1].Event+t.Width {
		// Past the last point: a new one, after merging if need be.
		for i/t.Width >= int64(bound) {
			t.halve()
		}
		if k := i / t.Width; k == int64(len(t.Points)) {
			t.Points = append(t.Points, TimelinePoint{Event: k * t.Width})
		}
	}
	p := &t.Points[len(t.Points)-1]
	p.Events++
	p.Live = max(p.Live, live)
	p.InUse = max(p.InUse, inUse)
	p.Reserved = max(p.Reserved, reserved)
	if frag > p.TFFragMax { // frag is never NaN nor -0: math.Max's cases
		p.TFFragMax = frag
	}
	p.TFFragSum += frag
	if failed {
		p.Failed++
	}
	t.Events = i + 1
}

// halve merges neighbouring points, doubling Width.
func (t *Timeline) halve() {
	n := (len(t.Points) + 1) / 2
	for j := range n {
		p := t.Points[2*j]
		if 2*j+1 < len(t.Points) {
			p.merge(&t.Points[2*j+1])
		}
		t.Points[j] = p
	}
	t.Points = t.Points[:n]
	t.Width *= 2
}

// Memmap is every block and region in address × time.
type Memmap struct {
	// Events is the time axis: [0, Events).
	Events int64
	// Lo and Hi bound every address a block or region covered, [Lo, Hi);
	// both are 0 if there were none.
	Lo, Hi uint64
	// Exact says Blocks and Regions hold every block and region, in the
	// order they ended (those live at the end last, by slot and address);
	// otherwise they are empty and Raster summarises them.
	Exact   bool
	Blocks  []MemBlock
	Regions []MemRegion
	Raster  *Raster
	// Large, when the map is not Exact, are its largest blocks, as many
	// as it would keep exactly (Blocks of RecordConfig), by start event:
	// the blocks worth pointing at, drawn over the raster.
	Large []MemBlock
	// BlockCount and RegionCount count every block and region, drawn or not.
	BlockCount, RegionCount int64
}

// MemBlock is one allocation's block, live over the events [Start, End): it
// was allocated by event Start and freed by event End (End is Memmap.Events
// if it was never freed).
type MemBlock struct {
	Addr, Size uint64
	Requested  uint64
	Start, End int64
	Tag        string
	Stack      uint32 // the alloc's stack in the trace's table, or 0
	// ID is the trace's id for the allocation; StartLine and EndLine the
	// lines of the trace its alloc and free came from (0: unknown, or never
	// freed).
	ID                 uint64
	StartLine, EndLine int64
}

// MemRegion is one reservation from the space, held over [Start, End).
type MemRegion struct {
	Addr, Size uint64
	Start, End int64
}

// Raster summarises a memory map too large to draw block by block. Cell
// (row, col) covers the addresses [Lo + row·RowBytes, Lo + (row+1)·RowBytes)
// and the events [col·Width, min((col+1)·Width, Events)); InUse and
// Reserved hold, row-major, the fraction of the cell's bytes × events that
// blocks, and regions, covered.
type Raster struct {
	Lo, RowBytes    uint64
	Rows, Cols      int
	Width           int64
	InUse, Reserved []float64
}

// At returns the fractions of cell (row, col) in use and reserved.
func (r *Raster) At(row, col int) (inUse, reserved float64) {
	return r.InUse[row*r.Cols+col], r.Reserved[row*r.Cols+col]
}

// Layout is the address space at one moment: right after event Event.
type Layout struct {
	Event, Line int64
	// AtPeak says the moment is the first at which bytes in use peaked.
	AtPeak  bool
	Blocks  []LayoutBlock // by address
	Regions []LayoutRegion
	// LiveBytes, InUseBytes and ReservedBytes sum the requests, the blocks
	// and the regions.
	LiveBytes, InUseBytes, ReservedBytes uint64
}

// LayoutBlock is one live block: Size bytes handed out for Requested.
type LayoutBlock struct {
	Addr, Size, Requested uint64
	Tag                   string
	Stack                 uint32
}

// LayoutRegion is one reservation from the space, [Addr, Addr+Size), its
// size rounded up to the space's granule as the space charges it.
type LayoutRegion struct {
	Addr, Size uint64
}

// recorder records one allocator's series.
type recorder struct {
	cfg     RecordConfig
	granule uint64
	now     int64 // index of the event being applied

	timeline Timeline

	// Live state, by trace slot and by reservation address.
	blocks  paged.Table[recBlock]
	regions map[uint64]recRegion

	mm    Memmap
	grid  *areaGrid   // nil until the memory map outgrows cfg.Blocks
	large largeBlocks // the largest blocks, once it has

	// Layout at the peak, when hasPeak: the blocks and regions live at the
	// end that began by peakEvent, plus gone, those that began by then and
	// were freed or released since.
	hasPeak             bool
	peakEvent, peakLine int64
	gone                peakGone
	layout              *Layout
}

// peakGone holds the blocks and regions live at the peak that have been
// freed or released since.
type peakGone struct {
	blocks  paged.List[LayoutBlock]
	regions []LayoutRegion
}

// recBlock is the block a trace slot holds and the allocation it serves:
// 64 bytes, one cache line (the table's pages are page-aligned), so that
// recording an allocation and painting it when it is freed each touch one
// line of a table of hundreds of thousands.
type recBlock struct {
	addr, size uint64 // size 0: no block
	start      int64
	requested  uint64
	id         uint64
	lineStack  uint64 // the alloc's line << stackBits | its stack
	tag        string
}

// stackBits is how many bits of recBlock.lineStack hold the stack: enough
// for trace.MaxStacks, and 40 left for the line.
const stackBits = 24

func packLineStack(line int64, stack uint32) uint64 {
	return uint64(line)<<stackBits | uint64(stack&(1<<stackBits-1))
}

func (s *recBlock) line() int64   { return int64(s.lineStack >> stackBits) }
func (s *recBlock) stack() uint32 { return uint32(s.lineStack & (1<<stackBits - 1)) }

type recRegion struct {
	size  uint64
	start int64
}

func newRecorder(cfg RecordConfig, granule uint64) *recorder {
	return &recorder{
		cfg: cfg, granule: granule,
		timeline: Timeline{Width: 1},
		regions:  map[uint64]recRegion{},
		mm:       Memmap{Exact: true},
	}
}

func (r *recorder) atPeak() bool { return !r.cfg.AtEvent }

func (r *recorder) alloc(slot uint32, b allocators.Block, requested uint64, tag string, stack uint32, id uint64, line int64) {
	r.blocks.Grow(slot)
	*r.blocks.At(slot) = recBlock{addr: b.Addr, size: b.Size, start: r.now, requested: requested, id: id,
		lineStack: packLineStack(line, stack), tag: tag}
	r.mm.BlockCount++
	r.touchRange(b.Addr, b.Size)
}

func (r *recorder) free(slot uint32, line int64) {
	r.paintBlock(slot, r.now, line)
	s := r.blocks.At(slot)
	if r.hasPeak && s.start <= r.peakEvent {
		r.gone.blocks.Add(s.layoutBlock())
	}
	*s = recBlock{}
}

func (r *recorder) reserve(addr, n uint64) {
	size := roundUp(n, r.granule)
	r.regions[addr] = recRegion{size: size, start: r.now}
	r.mm.RegionCount++
	r.touchRange(addr, size)
}

// release ends the reservations that [addr, addr+n) covers.
func (r *recorder) release(addr, n uint64) {
	for end := addr + n; addr < end; {
		g, ok := r.regions[addr]
		if !ok {
			return // the space refused the release; the checker reports it
		}
		delete(r.regions, addr)
		r.paintRegion(addr, g, r.now)
		if r.hasPeak && g.start <= r.peakEvent {
			r.gone.regions = append(r.gone.regions, LayoutRegion{Addr: addr, Size: g.size})
		}
		addr += g.size
	}
}

func roundUp(n, g uint64) uint64 {
	if g <= 1 {
		return n
	}
	return (n + g - 1) / g * g
}

// peak notes that the allocation just made, by event, reached a new peak of
// bytes in use: what is live now is the peak's layout. Nothing live now was
// removed since, so what was is forgotten.
func (r *recorder) peak(event, line int64) {
	if !r.atPeak() {
		return
	}
	r.hasPeak, r.peakEvent, r.peakLine = true, event, line
	r.gone.blocks.Reset()
	r.gone.regions = r.gone.regions[:0]
}

func (r *recorder) mark(i int64, ev *trace.Event) {
	t := &r.timeline
	if ev.Op == trace.OpStep {
		t.Steps++
	} else {
		t.MarkEvents++
	}
	if len(t.Marks) < maxMarks {
		t.Marks = append(t.Marks, Mark{Event: i, Name: ev.Name, Step: ev.Op == trace.OpStep})
	}
}

// buildPeak builds the layout at the peak: the blocks and regions live now
// that began by the peak's event, and those removed since.
func (r *recorder) buildPeak() {
	if !r.hasPeak {
		return
	}
	l := &Layout{Event: r.peakEvent, Line: r.peakLine, AtPeak: true}
	if len(r.gone.regions) > 0 {
		l.Regions = r.gone.regions
	}
	r.layout = r.fillLayout(l, &r.gone.blocks, r.peakEvent)
	r.gone = peakGone{}
}

func (s *recBlock) layoutBlock() LayoutBlock {
	return LayoutBlock{Addr: s.addr, Size: s.size, Requested: s.requested, Tag: s.tag, Stack: s.stack()}
}

// buildLayout returns the layout now.
func (r *recorder) buildLayout() *Layout { return r.fillLayout(&Layout{}, nil, math.MaxInt64) }

// fillLayout adds to l the blocks of gone (if not nil), then the blocks and
// regions live now that began by the event upTo, adds up its bytes and
// sorts it. The blocks are counted first, so that l.Blocks is allocated
// once, at its size: it can be hundreds of thousands of blocks.
func (r *recorder) fillLayout(l *Layout, gone *paged.List[LayoutBlock], upTo int64) *Layout {
	n := 0
	if gone != nil {
		n = gone.Len()
	}
	for _, s := range r.blocks.All() {
		if s.size != 0 && s.start <= upTo {
			n++
		}
	}
	if n > 0 {
		l.Blocks = make([]LayoutBlock, 0, n)
		if gone != nil {
			l.Blocks = gone.AppendTo(l.Blocks)
		}
		for _, s := range r.blocks.All() {
			if s.size != 0 && s.start <= upTo {
				l.Blocks = append(l.Blocks, s.layoutBlock())
			}
		}
	}
	for a, g := range r.regions {
		if g.start <= upTo {
			l.Regions = append(l.Regions, LayoutRegion{Addr: a, Size: g.size})
		}
	}
	for _, b := range l.Blocks {
		l.LiveBytes += b.Requested
		l.InUseBytes += b.Size
	}
	for _, g := range l.Regions {
		l.ReservedBytes += g.Size
	}
	sortLayout(l)
	return l
}

// sortLayout puts the blocks and the regions in address order. Live blocks
// never share an address, nor do regions, so the order is the one any sort
// gives; a radix sort gives it in linear time, which matters at a peak of
// hundreds of thousands of blocks.
func sortLayout(l *Layout) {
	sortByAddr(l.Blocks, func(b *LayoutBlock) uint64 { return b.Addr })
	sortByAddr(l.Regions, func(g *LayoutRegion) uint64 { return g.Addr })
}

// sortByAddr sorts s by addr, stably: a least-significant-digit radix sort
// by bytes, skipping the bytes every key shares (the high bytes of
// addresses within one space).
func sortByAddr[T any](s []T, addr func(*T) uint64) {
	if len(s) < 64 {
		slices.SortStableFunc(s, func(a, b T) int { return cmp.Compare(addr(&a), addr(&b)) })
		return
	}
	var count [8][256]int
	for i := range s {
		k := addr(&s[i])
		for d := range count {
			count[d][byte(k>>(8*d))]++
		}
	}
	first := addr(&s[0])
	src, dst := s, make([]T, len(s))
	for d := range count {
		c := &count[d]
		if c[byte(first>>(8*d))] == len(s) {
			continue // every key has this byte
		}
		at := 0
		for b, n := range c {
			c[b] = at
			at += n
		}
		for i := range src {
			b := byte(addr(&src[i]) >> (8 * d))
			dst[c[b]] = src[i]
			c[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
}

// touchRange widens the memory map's address bounds to [addr, addr+n).
func (r *recorder) touchRange(addr, n uint64) {
	if r.mm.Hi == 0 {
		r.mm.Lo, r.mm.Hi = addr, addr+n
		return
	}
	r.mm.Lo = min(r.mm.Lo, addr)
	r.mm.Hi = max(r.mm.Hi, addr+n)
}

// paintBlock paints the block of slot, freed by the event end at the line
// endLine.
func (r *recorder) paintBlock(slot uint32, end, endLine int64) {
	s := r.blocks.At(slot)
	if end <= s.start {
		end = s.start + 1 // allocated and freed by one event: draw it one event wide
	}
	if r.mm.Exact && len(r.mm.Blocks) >= r.cfg.Blocks {
		r.toRaster()
	}
	if !r.mm.Exact {
		r.grid.add(0, s.addr, s.size, s.start, end)
		if !r.large.takes(s.size, s.start, s.addr) {
			return
		}
	}
	m := MemBlock{
		Addr: s.addr, Size: s.size, Requested: s.requested,
		Start: s.start, End: end, Tag: s.tag, Stack: s.stack(),
		ID: s.id, StartLine: s.line(), EndLine: endLine,
	}
	if r.mm.Exact {
		r.mm.Blocks = append(r.mm.Blocks, m)
		return
	}
	r.large.offer(m)
}

// largeBlocks keeps the n largest blocks offered: a min-heap by size, ties
// broken by start event and address so that the result is deterministic.
type largeBlocks struct {
	n int
	h []MemBlock
}

func smaller(a, b MemBlock) bool {
	if a.Size != b.Size {
		return a.Size < b.Size
	}
	if a.Start != b.Start {
		return a.Start > b.Start // the later start counts as smaller
	}
	return a.Addr > b.Addr
}

// takes says whether offer would keep a block of size bytes, from the
// event start, at addr: smaller reports it as it would the whole block.
func (l *largeBlocks) takes(size uint64, start int64, addr uint64) bool {
	if l.n <= 0 {
		return false
	}
	if len(l.h) < l.n {
		return true
	}
	return smaller(l.h[0], MemBlock{Size: size, Start: start, Addr: addr})
}

func (l *largeBlocks) offer(m MemBlock) {
	if l.n <= 0 {
		return
	}
	if len(l.h) < l.n {
		l.h = append(l.h, m)
		for i := len(l.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !smaller(l.h[i], l.h[p]) {
				break
			}
			l.h[i], l.h[p] = l.h[p], l.h[i]
			i = p
		}
		return
	}
	if !smaller(l.h[0], m) {
		return
	}
	l.h[0] = m
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(l.h) {
			break
		}
		if c+1 < len(l.h) && smaller(l.h[c+1], l.h[c]) {
			c++
		}
		if !smaller(l.h[c], l.h[i]) {
			break
		}
		l.h[i], l.h[c] = l.h[c], l.h[i]
		i = c
	}
}

// sorted returns the blocks kept, by start event, then address.
func (l *largeBlocks) sorted() []MemBlock {
	out := slices.Clone(l.h)
	slices.SortFunc(out, func(a, b MemBlock) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Addr, b.Addr)) })
	return out
}

func (r *recorder) paintRegion(addr uint64, g recRegion, end int64) {
	if end <= g.start {
		end = g.start + 1
	}
	if r.mm.Exact && len(r.mm.Regions) >= r.cfg.Blocks {
		r.toRaster()
	}
	if r.mm.Exact {
		r.mm.Regions = append(r.mm.Regions, MemRegion{Addr: addr, Size: g.size, Start: g.start, End: end})
		return
	}
	r.grid.add(1, addr, g.size, g.start, end)
}

// toRaster moves the memory map from rectangles to the raster.
func (r *recorder) toRaster() {
	r.grid = newAreaGrid(r.cfg.Rows, r.cfg.Columns)
	r.grid.fitAddr(r.mm.Lo, r.mm.Hi) // the addresses seen so far: fewer merges later
	r.large.n = r.cfg.Blocks
	for _, b := range r.mm.Blocks {
		r.grid.add(0, b.Addr, b.Size, b.Start, b.End)
		r.large.offer(b)
	}
	for _, g := range r.mm.Regions {
		r.grid.add(1, g.Addr, g.Size, g.Start, g.End)
	}
	r.mm.Exact, r.mm.Blocks, r.mm.Regions = false, nil, nil
}

// finish closes what is still live at the end of the trace and returns the
// timeline, memory map and layout. The recorder is done with then.
func (r *recorder) finish(events int64) (*Timeline, *Memmap, *Layout) {
	if r.atPeak() {
		r.buildPeak()
	}
	r.mm.Events = events
	for slot, s := range r.blocks.All() {
		if s.size != 0 {
			r.paintBlock(slot, events, 0)
		}
	}
	addrs := make([]uint64, 0, len(r.regions))
	for a := range r.regions {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	for _, a := range addrs {
		r.paintRegion(a, r.regions[a], events)
	}
	if !r.mm.Exact {
		r.mm.Raster = r.grid.raster(events, r.mm.Lo, r.mm.Hi)
		r.mm.Large = r.large.sorted()
	}
	// Copies, so that the results do not keep the recorder, and its
	// tables of hundreds of thousands of slots, alive.
	tl, mm := r.timeline, r.mm
	return &tl, &mm, r.layout
}

// recordingSpace passes every call to the space under it and shows the
// reservations to the recorder.
type recordingSpace struct {
	allocators.Space
	rec regionObserver
}

// regionObserver is told of each reservation and release a space makes.
type regionObserver interface {
	reserve(addr, n uint64)
	release(addr, n uint64)
}

// regionObservers tells each of several.
type regionObservers []regionObserver

func (os regionObservers) reserve(addr, n uint64) {
	for _, o := range os {
		o.reserve(addr, n)
	}
}

func (os regionObservers) release(addr, n uint64) {
	for _, o := range os {
		o.release(addr, n)
	}
}

func (s recordingSpace) Reserve(n uint64) (uint64, error) {
	addr, err := s.Space.Reserve(n)
	if err == nil {
		s.rec.reserve(addr, n)
	}
	return addr, err
}

func (s recordingSpace) ReserveAt(addr, n uint64) error {
	return s.place(addr, n, allocators.Placer.ReserveAt)
}

func (s recordingSpace) MapAt(addr, n uint64) error {
	return s.place(addr, n, allocators.Placer.MapAt)
}

func (s recordingSpace) place(addr, n uint64, how placeFunc) error {
	if err := placeIn(s.Space, addr, n, how); err != nil {
		return err
	}
	s.rec.reserve(addr, n)
	return nil
}

// placeFunc is allocators.Placer.ReserveAt or MapAt.
type placeFunc func(allocators.Placer, uint64, uint64) error

// placeIn places [addr, addr+n) in sp with how, if sp can place at all: a
// wrapping space offers ReserveAt and MapAt whatever it wraps.
func placeIn(sp allocators.Space, addr, n uint64, how placeFunc) error {
	p, ok := sp.(allocators.Placer)
	if !ok {
		return fmt.Errorf("%w: this space cannot place a reservation at a chosen address", allocators.ErrOutOfMemory)
	}
	return how(p, addr, n)
}

// FindFree says where the space under it would place n bytes, if it can
// (PyTorch's expandable segments ask before reserving page by page).
func (s recordingSpace) FindFree(n uint64) (uint64, bool) {
	if f, ok := s.Space.(interface{ FindFree(uint64) (uint64, bool) }); ok {
		return f.FindFree(n)
	}
	return 0, false
}

func (s recordingSpace) Release(addr, n uint64) error {
	err := s.Space.Release(addr, n)
	if err == nil {
		s.rec.release(addr, n)
	}
	return err
}
