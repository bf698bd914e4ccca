package bfcdump

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0B"}, {512, "512B"}, {1023, "1023B"},
		{1024, "1.0KiB"}, {1280, "1.2KiB"}, // 1.25 rounds half to even, as printf does
		{24064, "23.5KiB"}, {1<<20 - 1, "1024.0KiB"},
		{1 << 20, "1.00MiB"}, {802160640, "765.00MiB"}, {491520000, "468.75MiB"},
		{2319282432, "2.16GiB"}, {3 << 30, "3.00GiB"},
		// Whole steps truncate: 1 GiB − 1 is 1023 MiB + 1023.99 KiB → 1023 MiB + 1023 KiB.
		{1<<30 - 1, "1024.00MiB"},
		{5 << 40, "5.00TiB"}, {math.MaxInt64, "8.00EiB"},
		{-512, "-512B"}, {-802160640, "-765.00MiB"}, {math.MinInt64, "-8E"},
	} {
		assert.Equal(t, tc.want, HumanBytes(tc.n), "HumanBytes(%d)", tc.n)
	}
}

func TestParseHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  uint64
		exact bool
		ok    bool
	}{
		{"802160640", 802160640, true, true},
		{"512B", 512, true, true},
		{"23.5KiB", 24064, false, true},
		{"765.00MiB", 802160640, false, true},
		{"2.16GiB", 2319282340, false, true},
		{"1.5 GiB", 0, false, false},
		{"-1KiB", 0, false, false},
		{"99999999999EiB", 0, false, false},
		{"", 0, false, false},
	} {
		n, exact, ok := parseHumanBytes(tc.in)
		assert.Equal(t, tc.ok, ok, "parseHumanBytes(%q) ok", tc.in)
		assert.Equal(t, tc.want, n, "parseHumanBytes(%q)", tc.in)
		assert.Equal(t, tc.exact, exact, "parseHumanBytes(%q) exact", tc.in)
	}
	for _, tc := range []struct {
		n   int64
		eps float64
	}{{1100, 0.05}, {3000, 0.05}, {123456789, 0.006}, {5<<30 + 12345, 0.006}} {
		back, _, ok := parseHumanBytes(HumanBytes(tc.n))
		assert.True(t, ok)
		assert.InEpsilon(t, float64(tc.n), float64(back), tc.eps, "reading back HumanBytes(%d)", tc.n)
	}
}
