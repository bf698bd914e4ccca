package allocators

// Following a recording's segment decisions (segments=auto).
//
// A trace imported from a PyTorch snapshot carries the device calls the
// program's allocator made: each segment it reserved (segment_alloc, or
// segment_map for pages of an expandable segment) and released
// (segment_free, segment_unmap), just before the allocation that made it
// call. They are decisions the model makes too, by the same rules; what
// the model cannot know is where the device put each new segment, and
// that decides which of two free blocks of one size best fit takes (the
// lower address). So the model decides, and while its decisions are the
// recording's it takes the recorded addresses:
//
//  1. Outside the start state, a recorded reserve or release is not acted
//     on when it arrives: it is kept, in order, as the recording's next
//     device calls (the script).
//  2. When the model makes a device call of its own (a segment or pages
//     on a miss, a release on its out-of-memory path or in garbage
//     collection), it compares it with the script's next call. The same
//     call (same kind, size, stream and, for a release or mapped pages,
//     address) is taken from the script, a new segment at its recorded
//     address.
//  3. Releases the model does not make itself are the program's own
//     (torch.cuda.empty_cache()): released before the next allocation
//     when no reserve follows them, as the program released them.
//  4. At the first call that differs, or a recorded call left over after
//     the allocation it came before, or a recorded segment the device
//     cannot hold (a smaller device, a memory limit), the model stops
//     following: from then on it decides alone, its segments placed by
//     the device model, and the recorded calls are ignored. Decisions()
//     says whether and why.
//
// With a faithful model and a complete recording the allocator follows to
// the end and puts every allocation at its recorded address; on a smaller
// device it follows up to the first segment that does not fit, as the
// program would have run there.

import (
	"fmt"

	"github.com/dustin/go-humanize"
)

// ptAction is a recorded device call: a reserve (segment_alloc,
// segment_map) or a release (segment_free with size 0, segment_unmap).
type ptAction struct {
	release    bool
	addr, size uint64
	stream     int64
}

func (a ptAction) String() string {
	switch {
	case a.release && a.size == 0:
		return fmt.Sprintf("released the segment at %#x", a.addr)
	case a.release:
		return fmt.Sprintf("released %s at %#x", iecBytes(a.size), a.addr)
	default:
		return fmt.Sprintf("reserved %s at %#x", iecBytes(a.size), a.addr)
	}
}

// iecBytes is n in IEC units, for the messages of allocators (the reasons
// Decisions gives, a calibration's): a size in MiB or more with two
// decimals, as the reports write them ("13.61 GiB": a limit 2 MiB below
// another must not read the same).
func iecBytes(n uint64) string {
	if n < 1<<20 {
		return humanize.IBytes(n)
	}
	units := []string{"MiB", "GiB", "TiB", "PiB", "EiB"}
	v, u := float64(n)/(1<<20), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return fmt.Sprintf("%.2f %s", v, units[u])
}

// Decisions says what an allocator did with a recording's segment
// decisions (DecisionFollower).
type Decisions struct {
	// Mode is how it was asked to treat them: "auto" (follow while they
	// are the model's own), "recorded" (adopt them all) or "model"
	// (ignore them).
	Mode string
	// Followed counts the recorded device calls the model made itself and
	// took from the recording.
	Followed int64
	// Diverged says the model stopped following, and Reason why.
	Diverged bool
	Reason   string
}

// scripted takes a recorded call that is not to be adopted: ignored with
// segments=model, kept as the program's next call while following (or
// counted once the following has ended). It reports false for a call to
// adopt: any in segments=recorded, and the start state's.
func (p *PyTorch) scripted(a ptAction) bool {
	switch {
	case p.cfg.Segments == PyTorchSegmentsModel:
		return true
	case p.cfg.Segments == PyTorchSegmentsAuto && !p.startState:
		if p.following {
			p.script = append(p.script, a)
		} else {
			p.rec.ignored++
		}
		return true
	}
	return false
}

// followingNow reports whether recorded calls are being followed: auto mode,
// after the start state, up to the first difference.
func (p *PyTorch) followingNow() bool { return p.following && !p.startState }

// Following reports whether the allocator still follows the recording's
// decisions (DecisionFollower).
func (p *PyTorch) Following() bool { return p.following }

// Decisions says what the allocator did with the recorded decisions.
func (p *PyTorch) Decisions() Decisions {
	return Decisions{Mode: p.cfg.Segments, Followed: p.followed, Diverged: p.diverged != "", Reason: p.diverged}
}

// diverge stops following, for the reason given.
func (p *PyTorch) diverge(format string, args ...any) {
	if !p.following {
		return
	}
	p.following = false
	p.diverged = fmt.Sprintf(format, args...)
	p.script = nil
}

// scriptHead returns the recording's next device call, if any.
func (p *PyTorch) scriptHead() (ptAction, bool) {
	if len(p.script) == 0 {
		return ptAction{}, false
	}
	return p.script[0], true
}

// beforeAllocation runs, while following, before a request of size bytes
// on stream is served. Recorded releases before it are either the
// program's own (empty_cache) or its out-of-memory path's for this
// request, which the model makes itself and matches. They are the
// program's, and are made now, when no reserve follows them and the
// recording did not fail the request, or when the pool serves the request
// without the device: the out-of-memory path is taken only on a miss.
func (p *PyTorch) beforeAllocation(size uint64, stream int64) {
	if !p.followingNow() || len(p.script) == 0 || !p.script[0].release {
		return
	}
	ladder := p.oomNext
	for _, a := range p.script {
		ladder = ladder || !a.release
	}
	if ladder && (size == 0 || size > ptMaxRequest || !p.wouldHit(size, stream)) {
		return
	}
	p.programReleases()
}

// wouldHit reports whether get_free_block would find a block for a
// request of size bytes on stream, changing nothing.
func (p *PyTorch) wouldHit(size uint64, stream int64) bool {
	rounded := ptRoundSize(size, p.divisions(size))
	pool := &p.pools[ptPoolIndex(rounded <= ptSmallSize)]
	k, ok := p.bestFit(pool, rounded, stream)
	return ok && p.oversizeAllows(rounded, k.size)
}

// afterAllocation runs, while following, after an allocation: a recorded
// call the model did not make, or an outcome other than the recording's,
// means the recording decided otherwise.
func (p *PyTorch) afterAllocation(size uint64, failed bool) {
	if !p.followingNow() {
		return
	}
	switch a, ok := p.scriptHead(); {
	case ok:
		p.diverge("for a %s request the program %s, which the model did not", iecBytes(size), a)
	case failed && !p.oomNext:
		p.diverge("the model failed a %s request the program served", iecBytes(size))
	case !failed && p.oomNext:
		p.diverge("the model served a %s request the program failed", iecBytes(size))
	}
}

// betweenAllocations runs, while following, at a free or a mark: recorded
// releases since the last allocation were the program's own.
func (p *PyTorch) betweenAllocations() {
	if p.followingNow() && len(p.script) > 0 {
		p.programReleases()
	}
}

// programReleases makes the leading releases of the script, which the
// program made itself: a fixed segment that is wholly free, or pages of
// an expandable segment inside one free block.
func (p *PyTorch) programReleases() {
	for len(p.script) > 0 && p.script[0].release {
		a := p.script[0]
		p.script = p.script[1:]
		p.applying = true
		ok := p.releaseRecorded(a.addr, a.size)
		p.applying = false
		if !ok {
			p.diverge("the program %s, which is not free in the model", a)
			return
		}
		p.followed++
	}
}

// expectReserve is called when the model reserves a fixed segment of size
// bytes for stream. While following, it takes the script's next call if it
// is that reserve, and returns where the program had the segment; ok false
// means the model places it itself.
func (p *PyTorch) expectReserve(size uint64, stream int64) (addr uint64, ok bool) {
	if !p.followingNow() {
		return 0, false
	}
	p.skipProgramReleases()
	a, has := p.scriptHead()
	switch {
	case !has && p.oomNext:
		return 0, false // the program failed here: see afterAllocation
	case !has:
		p.diverge("the model reserved a %s segment where the program reserved none", iecBytes(size))
		return 0, false
	case a.release || a.size != size || a.stream != stream:
		p.diverge("the model reserved a %s segment where the program %s", iecBytes(size), a)
		return 0, false
	}
	p.script = p.script[1:]
	return a.addr, true
}

// expectMap is expectReserve for pages [addr, addr+size) of an expandable
// segment: ok says they are the program's next call. PyTorch records one
// call per mapping; a recording that lists the pages one by one (or in
// runs) matches too.
func (p *PyTorch) expectMap(addr, size uint64) bool {
	if !p.followingNow() {
		return false
	}
	p.skipProgramReleases()
	a, has := p.scriptHead()
	if !has && p.oomNext {
		return false
	}
	if n := p.scriptCovers(addr, size); n > 0 {
		p.script = p.script[n:]
		p.followed++
		return true
	}
	what := "mapped none"
	if has {
		what = a.String()
	}
	p.diverge("the model mapped %s at %#x where the program %s", iecBytes(size), addr, what)
	return false
}

// scriptCovers returns how many reserves at the head of the script map
// exactly [addr, addr+size), one after another; 0 if they do not.
func (p *PyTorch) scriptCovers(addr, size uint64) int {
	end := addr + size
	for i, a := range p.script {
		if a.release || a.addr != addr || a.size > end-addr {
			return 0
		}
		if addr += a.size; addr == end {
			return i + 1
		}
	}
	return 0
}

// expectNewES is called when the model starts an expandable segment with
// its first size bytes of pages: while following, the program's next call
// must map as many, and gives the segment's address.
func (p *PyTorch) expectNewES(size uint64) (addr uint64, ok bool) {
	if !p.followingNow() {
		return 0, false
	}
	p.skipProgramReleases()
	a, has := p.scriptHead()
	if !has && p.oomNext {
		return 0, false
	}
	n := 0
	if has && !a.release && p.rangeFree(a.addr, size) {
		n = p.scriptCovers(a.addr, size)
	}
	if n == 0 {
		what := "mapped none"
		if has {
			what = a.String()
		}
		p.diverge("the model started an expandable segment with %s where the program %s", iecBytes(size), what)
		return 0, false
	}
	p.script = p.script[n:]
	return a.addr, true
}

// expectRelease is called when the model releases [addr, addr+size) on its
// own (its out-of-memory path, garbage collection): while following, it
// must be the program's next call. whole says a fixed segment goes.
func (p *PyTorch) expectRelease(addr, size uint64, whole bool) {
	if !p.followingNow() || p.applying {
		return
	}
	a, has := p.scriptHead()
	if has && a.release && a.addr == addr && (a.size == size || whole && a.size == 0) {
		p.script = p.script[1:]
		p.followed++
		return
	}
	what := "released nothing"
	if has {
		what = a.String()
	}
	p.diverge("the model released %s at %#x where the program %s", iecBytes(size), addr, what)
}

// skipProgramReleases makes the releases at the head of the script when
// the model is about to reserve: the program released them before this
// allocation (empty_cache), not on its out-of-memory path, which the
// model would have taken first.
func (p *PyTorch) skipProgramReleases() {
	if len(p.script) > 0 && p.script[0].release {
		p.programReleases()
	}
}

// refusedByLimit is called when the memory limit refuses the model a
// segment of size bytes. If the recording released memory next, it was
// refused too (it ran under the same limit): the model's out-of-memory
// path follows its releases. A recorded segment the limit does not allow
// ends the following.
func (p *PyTorch) refusedByLimit(size uint64) {
	if !p.followingNow() {
		return
	}
	a, ok := p.scriptHead()
	if ok && a.release || !ok && p.oomNext {
		return // the recording took its out-of-memory path here too
	}
	if ok {
		p.diverge("the program's next segment (%s) does not fit under the memory limit of %s (%s reserved)",
			iecBytes(a.size), iecBytes(p.allowedMax), iecBytes(p.totalAllocated))
		return
	}
	p.diverge("a %s segment does not fit under the memory limit of %s (%s reserved)",
		iecBytes(size), iecBytes(p.allowedMax), iecBytes(p.totalAllocated))
}

// placedRecorded reserves the fixed segment [addr, addr+size) where the
// recording had it; false means the device refused it (a smaller device),
// which ends the following.
func (p *PyTorch) placedRecorded(addr, size uint64) bool {
	if p.placer != nil && !p.placerBroken && p.placer.ReserveAt(addr, size) == nil {
		p.followed++
		return true
	}
	if p.overCapacity(size) {
		p.diverge("the device, %s, cannot hold the program's next segment (%s; %s reserved)",
			iecBytes(p.space.Capacity()), iecBytes(size), iecBytes(p.space.Stats().ReservedBytes))
		return false
	}
	p.diverge("the device cannot place the program's %s segment at %#x", iecBytes(size), addr)
	return false
}
