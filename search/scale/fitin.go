package scale

import (
	"bytes"
	"context"
	"maps"

	"github.com/bfcsim/bfcsim/search"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// FitInOptions say what FitIn searches.
type FitInOptions struct {
	// Capacity is the device (or memory limit) the program must fit.
	Capacity uint64
	// Spec is the allocator and its settings.
	Spec sim.AllocatorSpec
	// Search says how each replay runs.
	Search search.Options
	// Max bounds the values tried; 0 is 64 times the largest recorded.
	Max int64
	// Checked, if set, is told of each value tried.
	Checked func(value int64, fits bool)
}

// Largest is FitIn's answer.
type Largest struct {
	// Value is the largest value whose program fits; Fits is false when
	// not even the smallest value, 1, does (Value is then 0).
	Value int64
	Fits  bool
	// AtMax says the search stopped at FitInOptions.Max, which fits.
	AtMax bool
	// MinCapacityBytes is the smallest capacity the program at Value runs
	// on (fit's search).
	MinCapacityBytes uint64
	Settings         map[string]string
	// Checks counts the programs replayed.
	Checks int
}

// Load loads the program onto a search tape, read from its trace as a
// recording would be: a search of it is a search of any trace.
func (p *Program) Load(ctx context.Context, specs []sim.AllocatorSpec, opt search.Options) (*search.Trace, error) {
	var buf bytes.Buffer
	if err := p.WriteTo(trace.NewWriter(&buf)); err != nil {
		return nil, err
	}
	r, err := trace.NewReader(&buf, p.Header.Name)
	if err != nil {
		return nil, err
	}
	setup, err := sim.SetupOf(r.Header())
	if err != nil {
		return nil, err
	}
	return search.Load(ctx, r, setup, specs, opt)
}

// At is the program with every step at value x, as many steps as were
// recorded.
func (m *Model) At(rec *Recording, x int64) (*Program, error) {
	targets := make([]int64, len(m.Steps))
	for i := range targets {
		targets[i] = x
	}
	return m.Write(rec, targets)
}

// FitIn finds the largest value whose program (every step at it) fits
// opt.Capacity: from the largest recorded value it doubles until a program
// does not fit (or halves until one does), then bisects between the two.
// Each value tried costs one replay of its program without a limit and one
// under the capacity; the answer's smallest capacity, one fit more.
func (m *Model) FitIn(ctx context.Context, rec *Recording, opt FitInOptions) (Largest, error) {
	// The settings the programs run with: the recording's, and the spec's
	// over them.
	res := Largest{Settings: map[string]string{}}
	if rs, ok, err := rec.Header.Settings(); err == nil && ok && rs.Allocator == opt.Spec.Name {
		maps.Copy(res.Settings, rs.Options)
	}
	maps.Copy(res.Settings, opt.Spec.Options)
	hi := int64(0)
	for s, v := range m.Values {
		if m.Known[s] {
			hi = max(hi, v)
		}
	}
	limit := opt.Max
	if limit <= 0 {
		limit = 64 * hi
	}
	load := func(x int64) (*search.Trace, error) {
		p, err := m.At(rec, x)
		if err != nil {
			return nil, err
		}
		return p.Load(ctx, []sim.AllocatorSpec{opt.Spec}, opt.Search)
	}
	fits := func(x int64) (bool, error) {
		tr, err := load(x)
		if err != nil {
			return false, err
		}
		defer tr.Close()
		res.Checks++
		ok, err := tr.Fits(ctx, opt.Spec, opt.Capacity)
		if err == nil && opt.Checked != nil {
			opt.Checked(x, ok)
		}
		return ok, err
	}
	// good fits, bad does not (0: not known): the answer is in [good, bad).
	good, bad := int64(0), int64(0)
	try := func(x int64) error {
		ok, err := fits(x)
		switch {
		case err != nil:
		case ok:
			good = x
		default:
			bad = x
		}
		return err
	}
	if err := try(hi); err != nil {
		return res, err
	}
	for good > 0 && bad == 0 { // double until one does not fit
		next := min(good*2, limit)
		if next == good {
			res.AtMax = true
			break
		}
		if err := try(next); err != nil {
			return res, err
		}
	}
	for good == 0 && bad > 1 { // halve until one fits
		if err := try(bad / 2); err != nil {
			return res, err
		}
	}
	for good > 0 && bad-good > 1 { // bisect
		if err := try(good + (bad-good)/2); err != nil {
			return res, err
		}
	}
	if good == 0 {
		return res, nil
	}
	res.Value, res.Fits = good, true
	tr, err := load(good)
	if err != nil {
		return res, err
	}
	defer tr.Close()
	f, err := tr.FitOne(ctx, opt.Spec)
	if err != nil {
		return res, err
	}
	res.MinCapacityBytes = f.MinCapacityBytes
	return res, nil
}
