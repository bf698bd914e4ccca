package scale

import "github.com/bfcsim/bfcsim/trace"

// align matches the allocations of two steps, a and b (as and bs give
// their events: as[a[i]]), in order: only allocations of one call site match, and among
// the matchings that keep both orders the one that pairs the most alike
// sizes wins: equal sizes first, then sizes in the ratio of the steps'
// values (or its square), then any. ratio is b's value over a's, or 0 when
// not known. It returns, for each allocation of a, its match in b, or -1.
//
// The matching is a dynamic programme over a band about the diagonal, as
// wide as the steps differ in length and 64 more: steps of one loop differ
// by a few allocations, not by many, and the band keeps the work linear
// in the step's length.
func align(as, bs []trace.Event, a, b []int, ratio float64) []int {
	n, m := len(a), len(b)
	band := 64 + max(n-m, m-n)
	width := 2*band + 1
	if (n+1)*width > maxAlignCells {
		return alignByOccurrence(as, bs, a, b)
	}
	// score[i][w] is the best score of a[:i] against b[:j], j = lo(i)+w.
	lo := func(i int) int {
		c := 0
		if n > 0 {
			c = i * m / n
		}
		return c - band
	}
	const none = int32(-1 << 30)
	score := make([]int32, (n+1)*width)
	move := make([]uint8, (n+1)*width) // 1: a gap in b, 2: a gap in a, 3: a match
	for k := range score {
		score[k] = none
	}
	at := func(i, j int) int {
		w := j - lo(i)
		if j < 0 || j > m || w < 0 || w >= width {
			return -1
		}
		return i*width + w
	}
	if k := at(0, 0); k >= 0 {
		score[k] = 0
	}
	for i := 0; i <= n; i++ {
		for w := range width {
			j := lo(i) + w
			if j < 0 || j > m || (i == 0 && j == 0) {
				continue
			}
			k := i*width + w
			best, mv := none, uint8(0)
			if i > 0 {
				if p := at(i-1, j); p >= 0 && score[p] > best {
					best, mv = score[p], 1
				}
			}
			if j > 0 {
				if p := at(i, j-1); p >= 0 && score[p] > best {
					best, mv = score[p], 2
				}
			}
			if i > 0 && j > 0 {
				if p := at(i-1, j-1); p >= 0 && score[p] != none {
					if s := alike(&as[a[i-1]], &bs[b[j-1]], ratio); s > 0 && score[p]+s > best {
						best, mv = score[p]+s, 3
					}
				}
			}
			score[k], move[k] = best, mv
		}
	}
	match := make([]int, n)
	for i := range match {
		match[i] = -1
	}
	i, j := n, m
	for i > 0 || j > 0 {
		k := at(i, j)
		if k < 0 || move[k] == 0 {
			break // outside the band: the steps are too unlike to match
		}
		switch move[k] {
		case 1:
			i--
		case 2:
			j--
		case 3:
			match[i-1] = j - 1
			i, j = i-1, j-1
		}
	}
	return match
}

// alike scores a match of two allocations: 0 (none) across call sites, 3
// for equal sizes, 2 for sizes in the values' ratio or its square, 1
// otherwise.
func alike(x, y *trace.Event, ratio float64) int32 {
	if siteOf(x) != siteOf(y) {
		return 0
	}
	if x.Size == y.Size {
		return 3
	}
	if ratio > 0 && x.Size > 0 {
		r := float64(y.Size) / float64(x.Size)
		for _, t := range []float64{ratio, ratio * ratio} {
			if r >= 0.75*t && r <= 1.25*t {
				return 2
			}
		}
	}
	return 1
}

// maxAlignCells bounds the dynamic programme's table: steps that differ by
// so many allocations that it would be larger are matched by occurrence.
const maxAlignCells = 1 << 26

// alignByOccurrence matches the k-th allocation of a call site in a with
// the k-th of the same site in b.
func alignByOccurrence(as, bs []trace.Event, a, b []int) []int {
	seen := map[site][]int{}
	for j, i := range b {
		s := siteOf(&bs[i])
		seen[s] = append(seen[s], j)
	}
	used := map[site]int{}
	match := make([]int, len(a))
	for k, i := range a {
		s := siteOf(&as[i])
		match[k] = -1
		if u := used[s]; u < len(seen[s]) {
			match[k] = seen[s][u]
			used[s] = u + 1
		}
	}
	return match
}
