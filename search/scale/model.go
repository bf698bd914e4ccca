package scale

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"slices"
)

// Kind is the form of an allocation's size as a function of the step's
// value.
type Kind int8

// The kinds, lowest degree first.
const (
	Unexplained Kind = -1
	// Local is a size no polynomial through every recorded point gives:
	// at a value, the line through the two recorded values nearest it.
	Local     Kind = 3
	Constant  Kind = 0
	Affine    Kind = 1
	Quadratic Kind = 2
)

func (k Kind) String() string {
	switch k {
	case Constant:
		return "constant"
	case Affine:
		return "affine"
	case Quadratic:
		return "quadratic"
	case Local:
		return "local"
	}
	return "unexplained"
}

// sizeFn is one allocation's size as a polynomial in the value, through
// recorded points, in exact rational arithmetic.
type sizeFn struct {
	kind Kind
	xs   []int64
	ys   []uint64
	// trend, of a Local size, is the polynomial the recorded sizes keep
	// to within a padding (a few bytes some steps add and others do not):
	// at a value, the size is the nearest recorded value's moved along
	// it. Without one, the line through the two nearest values.
	trend *sizeFn
}

// at is the size at value x, rounded up to a whole byte; ok is false where
// it is below 1.
func (f sizeFn) at(x int64) (uint64, bool) {
	if f.kind == Unexplained {
		return 0, false
	}
	v := f.value(x)
	if v.Sign() <= 0 {
		return 0, false
	}
	q, r := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsUint64() {
		return 0, false
	}
	return q.Uint64(), true
}

// value is the size at x, exactly.
func (f sizeFn) value(x int64) *big.Rat {
	if f.kind == Local {
		if f.trend == nil {
			return f.near(x).value(x)
		}
		i := f.nearest(x)
		v := new(big.Rat).SetInt(new(big.Int).SetUint64(f.ys[i]))
		v.Add(v, f.trend.value(x))
		return v.Sub(v, f.trend.value(f.xs[i]))
	}
	sum := new(big.Rat)
	for i, xi := range f.xs {
		t := new(big.Rat).SetInt(new(big.Int).SetUint64(f.ys[i]))
		for j, xj := range f.xs {
			if j != i {
				t.Mul(t, big.NewRat(x-xj, xi-xj))
			}
		}
		sum.Add(sum, t)
	}
	return sum
}

// nearest is the index of the recorded value nearest x (the lower of two
// as near).
func (f sizeFn) nearest(x int64) int {
	best := 0
	for i, xi := range f.xs {
		if d, b := abs(x-xi), abs(x-f.xs[best]); d < b {
			best = i
		}
	}
	return best
}

// near is the line through the two recorded values nearest x (of a Local
// size, whose xs are distinct and sorted).
func (f sizeFn) near(x int64) sizeFn {
	i, _ := slices.BinarySearch(f.xs, x)
	lo := min(max(i-1, 0), len(f.xs)-2)
	if i < len(f.xs) && f.xs[i] == x {
		return sizeFn{kind: Constant, xs: f.xs[i : i+1], ys: f.ys[i : i+1]}
	}
	if i > 0 && i < len(f.xs) {
		lo = i - 1 // between two: interpolate
	}
	return sizeFn{kind: Affine, xs: f.xs[lo : lo+2], ys: f.ys[lo : lo+2]}
}

// approx is the polynomial at x in floating point.
func (f sizeFn) approx(x int64) float64 {
	sum := 0.0
	for i, xi := range f.xs {
		t := float64(f.ys[i])
		for j, xj := range f.xs {
			if j != i {
				t *= float64(x-xj) / float64(xi-xj)
			}
		}
		sum += t
	}
	return sum
}

// point is a recorded size at a value.
type point struct {
	x int64
	y uint64
}

// fitSize finds the polynomial of the lowest degree (0, 1, 2) through every
// point, one per step (a value recorded twice is two points): two values
// give an affine size, three a quadratic one. A size no such polynomial
// gives (a library chose another workspace at some size) is Local: at a
// value, the line through the two recorded values nearest it, which tell
// more of the sizes near them than a curve through the others does.
func fitSize(pts []point) sizeFn {
	// Every step's size is a point; a polynomial is drawn through points
	// of distinct values.
	ps := slices.Clone(pts)
	slices.SortFunc(ps, func(a, b point) int {
		if a.x != b.x {
			return int(a.x - b.x)
		}
		return cmp.Compare(a.y, b.y)
	})
	var xs []point // one point per value, for the bases
	for i, p := range ps {
		if i == 0 || p.x != ps[i-1].x {
			xs = append(xs, p)
		}
	}
	for deg := 0; deg <= 2 && deg < len(xs); deg++ {
		need := len(ps)
		best, bestHits := sizeFn{kind: Unexplained}, -1
		for _, base := range bases(ps, deg+1) {
			f := sizeFn{kind: Kind(deg)}
			for _, p := range base {
				f.xs = append(f.xs, p.x)
				f.ys = append(f.ys, p.y)
			}
			hits := 0
			for _, p := range ps {
				// A float estimate rules most misses out before the exact
				// arithmetic confirms a hit.
				if d := f.approx(p.x) - float64(p.y); d > 1+1e-9*float64(p.y) || d < -1-1e-9*float64(p.y) {
					continue
				}
				if y, ok := f.at(p.x); ok && y == p.y {
					hits++
				}
			}
			if hits > bestHits {
				best, bestHits = f, hits
			}
			if hits == len(ps) {
				break
			}
		}
		if bestHits >= need {
			return best
		}
	}
	if len(xs) >= 2 {
		// One size per value: the smallest recorded at it.
		f := sizeFn{kind: Local}
		for _, p := range xs {
			f.xs = append(f.xs, p.x)
			f.ys = append(f.ys, p.y)
		}
		f.trend = trendOf(xs)
		return f
	}
	return sizeFn{kind: Unexplained}
}

// trendOf finds the polynomial of the lowest degree that every point keeps
// to within a padding (at most 1/1024 of its size) and through as many
// points as any: the recorded sizes are then the polynomial plus one of
// a few paddings, and among polynomials through as many points the one
// with the fewest distinct paddings, then the smallest, is kept. ps has
// one point per value. Nil where no polynomial of degree 2 or less does:
// the sizes changed by more than a padding (a library chose another
// workspace).
func trendOf(ps []point) *sizeFn {
	for deg := 0; deg <= 2 && deg+1 < len(ps); deg++ {
		var best *sizeFn
		var bestHits, bestPads int
		var bestDev float64
		for _, base := range bases(ps, deg+1) {
			f := sizeFn{kind: Kind(deg)}
			for _, p := range base {
				f.xs = append(f.xs, p.x)
				f.ys = append(f.ys, p.y)
			}
			hits, worst, pads, ok := 0, 0.0, map[string]bool{}, true
			for _, p := range ps {
				d := math.Abs(f.approx(p.x) - float64(p.y))
				if d > float64(p.y)/1024 {
					ok = false
					break
				}
				worst = max(worst, d)
				pad := new(big.Rat).SetInt(new(big.Int).SetUint64(p.y))
				pad.Sub(pad, f.value(p.x))
				if pad.Sign() == 0 {
					hits++
				}
				pads[pad.RatString()] = true
			}
			if !ok {
				continue
			}
			if best == nil || hits > bestHits || hits == bestHits &&
				(len(pads) < bestPads || len(pads) == bestPads && worst < bestDev) {
				best, bestHits, bestPads, bestDev = &f, hits, len(pads), worst
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// bases lists the sets of k points of distinct values among ps.
func bases(ps []point, k int) [][]point {
	var out [][]point
	for _, c := range combinations(len(ps), k) {
		set := make([]point, k)
		ok := true
		for i, j := range c {
			set[i] = ps[j]
			if i > 0 && set[i].x == set[i-1].x {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, set)
		}
	}
	return out
}

// combinations lists the k-subsets of 0..n-1, in order.
func combinations(n, k int) [][]int {
	var out [][]int
	cur := make([]int, 0, k)
	var rec func(from int)
	rec = func(from int) {
		if len(cur) == k {
			out = append(out, slices.Clone(cur))
			return
		}
		for i := from; i < n; i++ {
			cur = append(cur, i)
			rec(i + 1)
			cur = cur[:len(cur)-1]
		}
	}
	rec(0)
	return out
}

// Model is the step's model: its allocations matched across the steps,
// each with its size as a function of the value.
type Model struct {
	Steps []Step
	// Values are the steps' values; a step left out of the model (`_`)
	// has none (Known false).
	Values []int64
	Known  []bool
	// Ref is the step every other is matched to: the last one with a
	// value, after the first (which often differs: it creates the
	// optimizer's state).
	Ref int
	// match[s][r] is the allocation of step s (an index into its Allocs)
	// that matches the reference step's r-th, or -1.
	match [][]int
	sizes []sizeFn
	// Count is how many of the reference step's allocations are of each
	// kind.
	Count map[Kind]int
	// place is where the recording's events are, computed by the first
	// Write and kept for the others (FitIn writes a program per value).
	place *places
}

// NewModel matches the steps' allocations and fits their sizes. values has
// one entry per step; known says which are in the model.
func NewModel(rec *Recording, steps []Step, values []int64, known []bool) (*Model, error) {
	if len(values) != len(steps) || len(known) != len(steps) {
		return nil, fmt.Errorf("%d values for %d steps", len(values), len(steps))
	}
	m := &Model{Steps: steps, Values: values, Known: known, Ref: -1, Count: map[Kind]int{}}
	n := 0
	for s := range steps {
		if known[s] {
			n++
			if s > 0 || m.Ref < 0 {
				m.Ref = s
			}
		}
	}
	if n < 2 {
		return nil, fmt.Errorf("the model needs the values of at least 2 steps; %d given", n)
	}
	ref := steps[m.Ref].Allocs
	m.match = make([][]int, len(steps))
	for s := range steps {
		ratio := 0.0
		if known[s] && values[m.Ref] != 0 {
			ratio = float64(values[s]) / float64(values[m.Ref])
		}
		if s == m.Ref {
			m.match[s] = make([]int, len(ref))
			for i := range ref {
				m.match[s][i] = i
			}
			continue
		}
		m.match[s] = align(rec.Events, rec.Events, ref, steps[s].Allocs, ratio)
	}
	m.sizes = make([]sizeFn, len(ref))
	for r := range ref {
		var pts []point
		for s := range steps {
			if !known[s] {
				continue
			}
			if j := m.match[s][r]; j >= 0 {
				pts = append(pts, point{values[s], rec.Events[steps[s].Allocs[j]].Size})
			}
		}
		m.sizes[r] = fitSize(pts)
		m.Count[m.sizes[r].kind]++
	}
	return m, nil
}

// Predict is the size of the reference step's r-th allocation at value x;
// ok is false for one the model does not explain.
func (m *Model) Predict(r int, x int64) (uint64, bool) { return m.sizes[r].at(x) }

// refOf returns, for step s's allocations, the reference allocation each
// matches, or -1.
func (m *Model) refOf(s int) []int {
	out := make([]int, len(m.Steps[s].Allocs))
	for i := range out {
		out[i] = -1
	}
	for r, j := range m.match[s] {
		if j >= 0 {
			out[j] = r
		}
	}
	return out
}
