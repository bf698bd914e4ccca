package trace

// Number parsing for decode.go: integers straight from their digits, and
// floats bit for bit as github.com/valyala/fastjson's fastfloat parses them.

import (
	"math"
	"math/bits"
	"strconv"
)

// parseUint parses a non-empty string of decimal digits that fits in a
// uint64, as fastjson's Value.Uint64 does.
func parseUint(s []byte) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range s {
		d := c - '0'
		if d > 9 {
			return 0, false
		}
		hi, lo := bits.Mul64(v, 10)
		lo, carry := bits.Add64(lo, uint64(d), 0)
		if hi != 0 || carry != 0 {
			return 0, false
		}
		v = lo
	}
	return v, true
}

// parseInt parses an optionally negative decimal integer that fits in an
// int64, as fastjson's Value.Int64 does.
func parseInt(s []byte) (int64, bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	u, ok := parseUint(s)
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return int64(-u), true // -(1<<63) wraps to itself: math.MinInt64
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

// float64pow10 are the powers of ten a float64 holds exactly.
var float64pow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
}

// parseNumber parses the valid JSON number s as a float64, with the
// algorithm of fastjson's fastfloat.Parse (MIT License, Copyright (c) 2018
// Aliaksandr Valialkin), so that every value is bit for bit what bfcsim
// read before: a mantissa of up to 16 digits and an exponent up to 300 are
// computed in float64 arithmetic, which for some exponents differs from the
// correctly rounded strconv.ParseFloat in the last bit; longer numbers go to
// strconv.ParseFloat. Numbers out of range are ±Inf, not errors.
func parseNumber(s []byte) (float64, bool) {
	n := uint(len(s))
	if n == 0 {
		return 0, false
	}
	i := uint(0)
	minus := s[0] == '-'
	if minus {
		i++
		if i >= n {
			return 0, false
		}
	}
	if s[i] == '.' && (i+1 >= n || s[i+1] < '0' || s[i+1] > '9') {
		return 0, false
	}
	d := uint64(0)
	j := i
	for i < n {
		if s[i] >= '0' && s[i] <= '9' {
			d = d*10 + uint64(s[i]-'0')
			i++
			if i > 18 {
				return parseFloatSlow(s) // the integer part may not fit
			}
			continue
		}
		break
	}
	if i <= j && s[i] != '.' {
		return 0, false // inf and nan, which fastfloat takes, are not JSON
	}
	f := float64(d)
	if i >= n {
		if minus {
			f = -f
		}
		return f, true
	}
	if s[i] == '.' {
		i++
		if i >= n {
			return f, true
		}
		k := i
		for i < n {
			if s[i] >= '0' && s[i] <= '9' {
				d = d*10 + uint64(s[i]-'0')
				i++
				if i-j >= uint(len(float64pow10)) {
					return parseFloatSlow(s) // the mantissa may not fit
				}
				continue
			}
			break
		}
		if i < k {
			return 0, false
		}
		f = float64(d) / float64pow10[i-k]
		if i >= n {
			if minus {
				f = -f
			}
			return f, true
		}
	}
	if s[i] == 'e' || s[i] == 'E' {
		i++
		if i >= n {
			return 0, false
		}
		expMinus := false
		if s[i] == '+' || s[i] == '-' {
			expMinus = s[i] == '-'
			i++
			if i >= n {
				return 0, false
			}
		}
		exp := int16(0)
		j := i
		for i < n {
			if s[i] >= '0' && s[i] <= '9' {
				exp = exp*10 + int16(s[i]-'0')
				i++
				if exp > 300 {
					return parseFloatSlow(s) // the exponent may be out of range
				}
				continue
			}
			break
		}
		if i <= j {
			return 0, false
		}
		if expMinus {
			exp = -exp
		}
		f *= math.Pow10(int(exp))
		if i >= n {
			if minus {
				f = -f
			}
			return f, true
		}
	}
	return 0, false
}

// plainFloat decodes the number at line[i:] if it is a plain non-negative
// decimal (12, 12.5) of at most 19 digits followed by a delimiter, as
// parseNumber would, returning the index after it. fast is false for any
// other number, or anything else.
func plainFloat(line []byte, i int) (f float64, end int, fast bool) {
	n := len(line)
	j := i
	d := uint64(0)
	if j < n && line[j] == '0' {
		j++
	} else {
		for j < n && j-i < 19 {
			c := line[j] - '0'
			if c > 9 {
				break
			}
			d = d*10 + uint64(c)
			j++
		}
		if j == i {
			return 0, i, false
		}
	}
	intDigits := j - i
	fracDigits := 0
	if j < n && line[j] == '.' {
		j++
		k := j
		for j < n && intDigits+j-k < 19 {
			c := line[j] - '0'
			if c > 9 {
				break
			}
			d = d*10 + uint64(c)
			j++
		}
		if fracDigits = j - k; fracDigits == 0 {
			return 0, i, false
		}
	}
	if j < n && !numberEnds[line[j]] {
		return 0, i, false // more digits, an exponent, or not JSON
	}
	switch {
	case fracDigits == 0 && intDigits <= 18:
		return float64(d), j, true // parseNumber's integer path
	case fracDigits > 0 && j-i <= 16:
		return float64(d) / float64pow10[fracDigits], j, true // its decimal path
	}
	// parseNumber would take strconv.ParseFloat's correctly rounded value.
	f, ok := exactDecimal(d, -fracDigits)
	return f, j, ok
}

// parseFloatSlow is parseNumber's fallback for long numbers: what
// strconv.ParseFloat returns, with values out of range taken as ±Inf.
func parseFloatSlow(s []byte) (float64, bool) {
	if f, ok := exactFloat(s); ok {
		return f, true
	}
	f, err := strconv.ParseFloat(b2s(s), 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// pow5 are the powers of five below 2^63.
var pow5 = func() (t [28]uint64) {
	t[0] = 1
	for k := 1; k < len(t); k++ {
		t[k] = t[k-1] * 5
	}
	return t
}()

// exactFloat returns the valid JSON number s as a float64 in the cases where
// one correctly rounded operation on exact operands gives it, which is
// therefore what strconv.ParseFloat returns. It saves strconv's slow path on
// the timestamps of PyTorch traces, microseconds since 1970 with a fraction
// (1700000000177982.5): strconv's fast algorithms give up on such exactly
// representable values with more than 16 digits and it falls back to
// multiple-precision decimal arithmetic.
func exactFloat(s []byte) (float64, bool) {
	i, neg := 0, s[0] == '-'
	if neg {
		i++
	}
	var d uint64 // the digits, without the point
	e10 := 0     // the value is d·10^e10
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if d > (math.MaxUint64-9)/10 {
			return 0, false
		}
		d = d*10 + uint64(s[i]-'0')
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if d > (math.MaxUint64-9)/10 {
				return 0, false
			}
			d = d*10 + uint64(s[i]-'0')
			e10--
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := i < len(s) && s[i] == '-'
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		exp := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if exp > 10000 {
				return 0, false
			}
			exp = exp*10 + int(s[i]-'0')
		}
		if expNeg {
			exp = -exp
		}
		e10 += exp
	}
	if i != len(s) {
		return 0, false
	}
	f, ok := exactDecimal(d, e10)
	if neg {
		f = -f
	}
	return f, ok
}

// exactDecimal returns d·10^e10 correctly rounded, if one correctly rounded
// operation on exact operands gives it.
func exactDecimal(d uint64, e10 int) (float64, bool) {
	switch {
	case d == 0:
		return 0, true
	case e10 == 0:
		return float64(d), true // rounded once, to nearest even
	case d < 1<<53 && e10 > 0 && e10 <= 22:
		return float64(d) * exactPow10[e10], true
	case d < 1<<53 && e10 < 0 && e10 >= -22:
		return float64(d) / exactPow10[-e10], true
	case e10 < 0 && e10 >= -(len(pow5)-1) && d%pow5[-e10] == 0:
		// d·10^e10 = (d/5^k)·2^-k: rounding d/5^k is the only inexact
		// step, and scaling by a power of two keeps it correctly rounded.
		return float64(d/pow5[-e10]) / float64(uint64(1)<<-e10), true
	}
	return 0, false
}

// exactPow10 are the powers of ten a float64 holds exactly.
var exactPow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}
