package allocators

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// Options are settings given as text, keyed without the allocator's prefix:
// --set bfc.allow_growth=false becomes Options{"allow_growth": "false"} for bfc.
type Options map[string]string

// Option documents one setting an allocator or space accepts.
type Option struct {
	Key     string // e.g. "allow_growth"
	Default string // the value used when the option is not set, as text
	Help    string // one line
}

// settings parses Options against a list of declared Options. Getters return
// the typed value (the default when unset) and remember the first error,
// reported by Err, so constructors can read every field and check once.
type settings struct {
	owner     string
	decl      []Option
	values    Options
	defaults  map[string]string // presets' defaults, over the declared ones
	effective map[string]any
	err       error
}

// newSettings checks that every key in given is declared.
func newSettings(owner string, decl []Option, given Options) (*settings, error) {
	for k := range given {
		if !slices.ContainsFunc(decl, func(o Option) bool { return o.Key == k }) {
			return nil, fmt.Errorf("%w: %s has no option %q (it has %s)", ErrBadOption, owner, k, optionKeys(decl))
		}
	}
	return &settings{owner: owner, decl: decl, values: given, effective: map[string]any{}}, nil
}

func optionKeys(decl []Option) string {
	if len(decl) == 0 {
		return "none"
	}
	keys := make([]string, len(decl))
	for i, o := range decl {
		keys[i] = o.Key
	}
	return strings.Join(keys, ", ")
}

// preset makes v the default of key, in place of the declared default; a
// value given for key still wins.
func (s *settings) preset(key, v string) {
	if s.defaults == nil {
		s.defaults = map[string]string{}
	}
	s.defaults[key] = v
}

// raw returns the text of key: the given value, else a preset's default,
// else the declared default.
func (s *settings) raw(key string) string {
	if v, ok := s.values[key]; ok {
		return v
	}
	if v, ok := s.defaults[key]; ok {
		return v
	}
	for _, o := range s.decl {
		if o.Key == key {
			return o.Default
		}
	}
	panic(fmt.Sprintf("allocators: %s reads undeclared option %q", s.owner, key))
}

func (s *settings) fail(key, v, want string) {
	if s.err == nil {
		s.err = fmt.Errorf("%w: %s.%s=%q: want %s", ErrBadOption, s.owner, key, v, want)
	}
}

// Bool reads true/false (also 1/0, t/f).
func (s *settings) Bool(key string) bool {
	v := s.raw(key)
	b, err := strconv.ParseBool(v)
	if err != nil {
		s.fail(key, v, "true or false")
	}
	s.effective[key] = b
	return b
}

// Float reads a number.
func (s *settings) Float(key string) float64 {
	v := s.raw(key)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		s.fail(key, v, "a finite number")
	}
	s.effective[key] = f
	return f
}

// Size reads a byte count: 4096, 4KiB, 512MiB, 80GiB, 1GB.
func (s *settings) Size(key string) uint64 {
	v := s.raw(key)
	n, err := ParseSize(v)
	if err != nil {
		s.fail(key, v, "a size such as 4096, 64KiB or 2GiB")
	}
	s.effective[key] = n
	return n
}

// PowerOfTwo reads a size that must be a power of two.
func (s *settings) PowerOfTwo(key string) uint64 {
	n := s.Size(key)
	if n == 0 || n&(n-1) != 0 {
		s.fail(key, s.raw(key), "a power of two")
	}
	return n
}

// Duration reads a time such as 10us or 1.5ms.
func (s *settings) Duration(key string) time.Duration {
	v := s.raw(key)
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		s.fail(key, v, "a non-negative duration such as 10us or 2ms")
	}
	s.effective[key] = d.String()
	return d
}

// Choice reads one of a fixed set of words.
func (s *settings) Choice(key string, choices ...string) string {
	v := s.raw(key)
	if !slices.Contains(choices, v) {
		s.fail(key, v, "one of "+strings.Join(choices, ", "))
	}
	s.effective[key] = v
	return v
}

// Err returns the first bad value met by a getter.
func (s *settings) Err() error { return s.err }

// Effective returns the values read, typed, for reports.
func (s *settings) Effective() map[string]any { return s.effective }

// ParseSize parses a byte count: plain bytes, or a number with a binary
// (KiB, MiB, GiB, TiB) or decimal (KB, MB, GB, TB) unit.
func ParseSize(text string) (uint64, error) {
	bad := fmt.Errorf("bad size %q: want e.g. 4096, 512MiB, 80GiB or 1GB", text)
	t := strings.TrimSpace(text)
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		// No unit: a count of bytes, which must be whole.
		n, err := strconv.ParseUint(t, 10, 64)
		if err != nil {
			return 0, bad
		}
		return n, nil
	}
	n, err := humanize.ParseBytes(t)
	if err != nil {
		return 0, bad
	}
	return n, nil
}
