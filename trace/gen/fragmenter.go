package gen

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/bfcsim/bfcsim/trace"
)

// Fragmenter is an adversarial workload for best-fit-with-coalescing (and
// for every allocator that does not move blocks): the live bytes stay under
// about twice one round's worth while the memory an allocator must reserve
// grows by a round's worth every round. It follows Robson's worst-case
// construction:
//
//  1. Round r allocates Count>>r blocks of SmallSize<<r bytes: every round
//     asks for the same Count·SmallSize bytes in blocks twice as large as
//     the round before's.
//  2. It then frees every other block of the round, leaving holes of one
//     block between live "pins".
//  3. Before round r allocates, every older round k thins its pins so that
//     they are 2^(r−k) blocks apart: the holes between them, of
//     (2^(r−k)−1)·(SmallSize<<k) bytes, are all smaller than round r's
//     blocks, so round r cannot reuse any of them and must take fresh
//     memory. Coalescing cannot help: the pins keep the holes apart.
//  4. After the last round and a last thinning, one request of LargeSize
//     bytes, slightly larger than any hole when LargeSize ≥
//     SmallSize<<Rounds, is made; then everything is freed.
//
// A round ends with a step event named by its 0-based index. The seed
// shuffles the order of the frees within each thinning, which changes free
// lists but not which memory is free.
//
// The pins are blocks of the round's own size rather than small ones because
// best fit defeats small pins: it places a small block into the smallest
// hole that fits, an old one, instead of between the new large blocks.
type Fragmenter struct {
	// Seed shuffles the order of the frees within each round and thinning.
	Seed uint64 `help:"seed for the order of frees"`
	// Rounds is the number of rounds, each with blocks twice as large.
	Rounds int `help:"rounds of doubling block sizes"`
	// Count is the number of blocks of the first round; round r allocates
	// Count>>r. It must be a positive multiple of 2^Rounds, so that every
	// round has an even number of blocks and every thinning is exact.
	Count int `help:"blocks in the first round (a multiple of 2^rounds)"`
	// SmallSize is the size of the first round's blocks, in bytes; round r's
	// are SmallSize<<r.
	SmallSize int64 `help:"block size of the first round (bytes)"`
	// LargeSize is the size of the request made after the last round, in
	// bytes; 0 makes none. At least SmallSize<<Rounds, it fits no hole.
	LargeSize int64 `help:"size of the final request, larger than any hole (bytes)"`
}

// DefaultFragmenter returns 8 rounds of 4 MiB each, from 1024 blocks of
// 4 KiB to 8 blocks of 512 KiB, and a final request of 1 MiB: about 4,000
// events, under 0.2 MB of JSONL. The peak live bytes are about 8 MiB, but
// an allocator that never moves blocks spreads them over about 33 MiB of
// addresses (every round's 4 MiB plus the last request): on a 32 MiB
// first-fit device even naive fails the final request, and bfc with growth
// reserves 62 MiB for it.
func DefaultFragmenter() Fragmenter {
	return Fragmenter{
		Seed:      1,
		Rounds:    8,
		Count:     1024,
		SmallSize: 4096,
		LargeSize: 1 << 20,
	}
}

var _ Generator = Fragmenter{}

// Header implements Generator.
func (c Fragmenter) Header() trace.Header {
	name := fmt.Sprintf("fragmenter rounds=%d count=%d small-size=%d large-size=%d seed=%d",
		c.Rounds, c.Count, c.SmallSize, c.LargeSize, c.Seed)
	return header("fragmenter", name, c)
}

// Validate reports the first invalid field, if any.
func (c Fragmenter) Validate() error {
	ck := checker{workload: "fragmenter"}
	ck.atLeast("Rounds", int64(c.Rounds), 1)
	ck.atLeast("SmallSize", c.SmallSize, 1)
	ck.atLeast("LargeSize", c.LargeSize, 0)
	if ck.err == nil && c.Rounds > 30 {
		ck.fail("rounds must be at most 30, got %d", c.Rounds)
	}
	ck.atMost("Count", int64(c.Count), maxHeld)
	if ck.err == nil && (c.Count <= 0 || c.Count%(1<<c.Rounds) != 0) {
		ck.fail("count must be a positive multiple of 2^rounds = %d, got %d", 1<<c.Rounds, c.Count)
	}
	if ck.err == nil {
		ck.bytes("the last round's blocks", c.SmallSize, 1<<c.Rounds)
		ck.bytes("one round", c.SmallSize, int64(c.Count))
	}
	if ck.err == nil && c.LargeSize > maxTensorBytes {
		ck.fail("large-size must be at most %d, got %d", int64(maxTensorBytes), c.LargeSize)
	}
	return ck.err
}

// Generate implements Generator.
func (c Fragmenter) Generate(emit func(trace.Event) error) error {
	if err := c.Validate(); err != nil {
		return err
	}
	e := newEmitter(emit, 0)
	rng := newRand(c.Seed)
	// rounds[k][p] is the id of round k's block p, 0 once freed.
	rounds := make([][]uint64, 0, c.Rounds)
	var frees []uint64
	for r := 0; r <= c.Rounds && e.err == nil; r++ {
		// Thin the older rounds: round k's pins go from 2^(r−1−k) to
		// 2^(r−k) blocks apart.
		frees = frees[:0]
		for k := 0; k+1 < r; k++ {
			m := 1 << (r - k)
			for p := m / 2; p < len(rounds[k]); p += m {
				frees = append(frees, rounds[k][p])
				rounds[k][p] = 0
			}
		}
		freeShuffled(e, rng, frees)
		if r == c.Rounds {
			break
		}

		tag := "round" + strconv.Itoa(r)
		blocks := make([]uint64, c.Count>>r)
		for p := range blocks {
			blocks[p] = e.alloc(c.SmallSize<<r, tag)
		}
		frees = frees[:0]
		for p := 1; p < len(blocks); p += 2 {
			frees = append(frees, blocks[p])
			blocks[p] = 0
		}
		freeShuffled(e, rng, frees)
		rounds = append(rounds, blocks)
		e.step(strconv.Itoa(r))
	}
	if c.LargeSize > 0 {
		e.free(e.alloc(c.LargeSize, "probe"))
	}
	for _, blocks := range rounds {
		for _, id := range blocks {
			if id != 0 {
				e.free(id)
			}
		}
	}
	return e.err
}

// freeShuffled frees ids in an order drawn from rng.
func freeShuffled(e *emitter, rng *rand.Rand, ids []uint64) {
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, id := range ids {
		e.free(id)
	}
}
