package trace

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fastjson/fastfloat"
)

// trickyLines are lines that exercise the corners where a hand-written JSON
// decoder could part from fastjson.
var trickyLines = []string{
	// Escapes in keys, values and unknown keys.
	`{"\u006fp":"alloc","i\u0064":1,"size":2}`,
	`{"op":"\u0061lloc","id":1,"size":2,"tag":"a\"b\\c\/d\b\f\n\r\t"}`,
	`{"op":"mark","name":"\ud83d\ude00 \uD83D\uDE00"}`,
	`{"op":"mark","name":"\ud800"}`,
	`{"op":"mark","name":"\ud800x"}`,
	`{"op":"mark","name":"\ud800\u0041"}`,
	`{"op":"mark","name":"\udc00\ud800"}`,
	`{"op":"mark","name":"\ud800\\u0041"}`,
	`{"op":"mark","name":"\u0000\u001f"}`,
	`{"op":"mark","name":"\u12"}`,
	`{"op":"mark","name":"\u12g4"}`,
	`{"op":"mark","name":"\x"}`,
	`{"op":"mark","name":"abc`,
	`{"op":"mark","name":"a\`,
	`{"op":"mark\`,
	`{"op`,
	`{"o\p":1}`,
	`{"op":"step","x":"\"\\"}`,
	`{"op":"step","x":"\\\""}`,
	"{\"op\":\"mark\",\"name\":\"a\x01\\nb\"}",
	"{\"op\":\"mark\",\"name\":\"a\\nb\x01\"}",
	"{\"op\":\"step\",\"k\x01\":1}",
	"{\"op\":\"step\",\"k\x01\\n\":1}",
	"{\"op\":\"step\",\"x\":\"\xff\xfe\"}",
	"{\"op\":\"mark\",\"name\":\"\xff\xfe\\u00e9\"}",
	`{"op":"step","x\u0000":1}`,
	// Whitespace everywhere it may be, and where it may not.
	" \t{ \"op\" : \"alloc\" , \"id\" : 1 , \"size\" : 2 } \t\r",
	"{\"op\":\"step\"}\x0b",
	"\x0b{\"op\":\"step\"}",
	`{"op":"step"}}`,
	`{"op":"step"},`,
	`{"op":"step",}`,
	`{,"op":"step"}`,
	`{"op":"step" "x":1}`,
	`{"op" "step"}`,
	`{"op":}`,
	`{"op":"step"`,
	`{"op":"step",`,
	`{`,
	`}`,
	``,
	`{}`,
	`{ }`,
	`{"":1}`,
	// Numbers, first in the line too (found by the fuzzer: a fast path that
	// did not say the value was valid).
	`{"t":0}`,
	`{"t":12.5,"op":"step"}`,
	`{"id":1}`,
	`{"size":1,"op":"alloc","id":2}`,
	`{"op":"alloc","id":0,"size":0}`,
	`{"op":"alloc","id":-0,"size":-0.0}`,
	`{"op":"alloc","id":1,"size":01}`,
	`{"op":"alloc","id":1,"size":1.}`,
	`{"op":"alloc","id":1,"size":.5}`,
	`{"op":"alloc","id":1,"size":1e}`,
	`{"op":"alloc","id":1,"size":1e+}`,
	`{"op":"alloc","id":1,"size":-}`,
	`{"op":"alloc","id":1,"size":+1}`,
	`{"op":"alloc","id":1,"size":1E3}`,
	`{"op":"alloc","id":1,"size":4.096e3}`,
	`{"op":"alloc","id":1,"size":4.097e3}`,
	`{"op":"alloc","id":1,"size":1e300}`,
	`{"op":"alloc","id":1,"size":1e400}`,
	`{"op":"alloc","id":1,"size":-1e400}`,
	`{"op":"alloc","id":1,"size":1e-400}`,
	`{"op":"alloc","id":1,"size":-1e-400}`,
	`{"op":"alloc","id":1,"size":9007199254740992.0}`,
	`{"op":"alloc","id":1,"size":9007199254740993.0}`,
	`{"op":"alloc","id":1,"size":9223372036854775807}`,
	`{"op":"alloc","id":9223372036854775807,"size":1}`,
	`{"op":"alloc","id":18446744073709551615,"size":1}`,
	`{"op":"alloc","id":18446744073709551616,"size":1}`,
	`{"op":"alloc","id":1234567890123456789,"size":1}`,
	`{"op":"alloc","id":12345678901234567890,"size":1}`,
	`{"op":"alloc","id":1234567890123456789.0,"size":1}`,
	`{"op":"alloc","id":99999999999999999999999,"size":1}`,
	`{"op":"alloc","id":1,"size":1,"align":0}`,
	`{"op":"alloc","id":1,"size":1,"align":1}`,
	`{"op":"alloc","id":1,"size":1,"align":9223372036854775808}`,
	`{"op":"alloc","id":1,"size":1,"align":3}`,
	`{"op":"alloc","id":1,"size":1,"addr":18446744073709551615}`,
	`{"op":"alloc","id":1,"size":1,"addr":-1}`,
	`{"op":"alloc","id":1,"size":1,"block":18446744073709551615}`,
	`{"op":"alloc","id":1,"size":100,"block":512,"addr":4096}`,
	`{"op":"alloc","id":1,"size":100,"block":100}`,
	`{"op":"alloc","id":1,"size":100,"block":99}`,
	`{"op":"alloc","block":99,"id":1,"size":100}`,
	`{"op":"alloc","id":1,"block":0,"size":0}`,
	`{"op":"alloc","id":1,"size":1,"block":-1}`,
	`{"op":"alloc","id":1,"size":1,"block":1.5}`,
	`{"op":"alloc","id":1,"size":1,"block":5e2}`,
	`{"op":"alloc","id":1,"size":1,"block":"512"}`,
	`{"op":"alloc","id":1,"size":1,"block":null}`,
	`{"op":"alloc","id":1,"block":512}`,
	`{"op":"alloc","id":1,"size":1,"block":2}`,
	`{"op":"alloc","id":1,"size":1,"blocks":2,"bloc":0}`,
	`{"op":"free","id":1,"block":512}`,
	`{"op":"free","id":1,"block":"x"}`,
	`{"op":"step","block":3}`,
	`{"op":"alloc","id":1,"size":9,"block":8}`,
	`{"op":"alloc","id":1,"size":7,"block":8}`,
	`{"op":"step","t":1.5e-7}`,
	`{"op":"step","t":98081.727887e-13}`,
	`{"op":"step","t":-0}`,
	`{"op":"step","t":1e400}`,
	`{"op":"step","t":-1e400}`,
	`{"op":"step","t":1e-400}`,
	`{"op":"step","t":123456789012345678901234567890}`,
	`{"op":"step","t":0.12345678901234567890}`,
	`{"op":"step","t":1.7976931348623157e308}`,
	`{"op":"step","t":true}`,
	`{"op":"step","t":NaN}`,
	`{"op":"step","t":Infinity}`,
	`{"op":"step","t":-inf}`,
	`{"op":"step","stream":-9223372036854775808}`,
	`{"op":"step","stream":-9223372036854775809}`,
	`{"op":"step","stream":18446744073709551615}`,
	`{"op":"step","stream":18446744073709551616}`,
	`{"op":"step","stream":-1.5}`,
	`{"op":"step","stream":"7"}`,
	`{"op":"step","stream":"a\"b"}`,
	`{"op":"step","stream":"a\u0001"}`,
	`{"op":"step","stream":"a\u00e9"}`,
	`{"op":"step","stream":"\ud800"}`,
	`{"op":"step","stream":{ "a" : [ 1 , "x y" , {"\u0062":null} ] }}`,
	`{"op":"step","stream":[ ]}`,
	`{"op":"step","stream":null}`,
	`{"op":"step","stream":false}`,
	// Types and literals.
	`{"op":"step","x":tru}`,
	`{"op":"step","x":truex}`,
	`{"op":"step","x":nul}`,
	`{"op":"step","x":fals}`,
	`{"op":"step","x":[1,]}`,
	`{"op":"step","x":[,1]}`,
	`{"op":"step","x":[1 2]}`,
	`{"op":"step","x":{"a"}}`,
	`{"op":"step","x":{"a":}}`,
	`{"op":"step","x":{"a":1,}}`,
	`{"op":"step","x":{1:1}}`,
	`{"op":"step","x":[[[[]]]],"y":{"a":{"b":{}}}}`,
	`{"op":null}`,
	`{"op":true}`,
	`{"op":[]}`,
	`{"op":{}}`,
	`{"op":"step","tag":[],"name":{}}`,
	`{"op":"mark","name":1}`,
	`{"op":"mark","name":""}`,
	`{"op":"alloc","id":"1","size":2}`,
	`{"op":"alloc","id":[1],"size":2}`,
	`{"op":"alloc","id":{},"size":2}`,
	`{"op":"alloc","id":null,"size":2}`,
	`{"op":"ALLOC","id":1,"size":2}`,
	`{"op":"alloc\u0000","id":1,"size":2}`,
	`{"op":"\u00e9","id":1,"size":2}`,
	`{"op":"alloc","op":"free","id":1}`,
	`{"op":1,"op":"free","id":1}`,
	`{"op":"free","id":1,"id":"x"}`,
	`{"size":"x","op":"alloc","id":1` + "\x00",
	`{"bfcsim_trace":1}`,
	`{"bfcsim_trace":1,"op":"step"}`,
	`{"bfcsim_trace":"x","name":7}`,
	`{"bfcsim_trace":2,"name":7}`,
	`{"bfcsim_trace":1,"name":7,"bfcsim_trace":2}`,
	`{"bfcsim\u005ftrace":1,"nam\u0065":"x\n","time_unit":"s"}`,
	`{"bfcsim_trace":1,"time_unit":"h"}`,
	`{"bfcsim_trace":1,"time_unit":null}`,
	`{"bfcsim_trace":1,"capacity":1.5,"name":"x"}`,
	`{"bfcsim_trace":1,"capacity":4e9}`,
	`{"bfcsim_trace":1,"a":"\u00e9\"","b":[ 1, {"c" :"d e"} ],"c":-1.5e3,"d":true,"a":null}`,
	`{"bfcsim_trace":1} x`,
	`[1,2]`,
	`"x"`,
	`1`,
	`-1.5`,
	`true`,
	`null`,
	`[`,
	`[1`,
	`[1,`,
}

// deepLine returns a line with an unknown key whose value nests depth
// arrays (1 for "[]"), with inner as the innermost value.
func deepLine(depth int, inner string) string {
	return `{"op":"step","x":` + strings.Repeat("[", depth) + inner + strings.Repeat("]", depth) + `}`
}

func init() {
	for _, d := range []int{298, 299, 300} {
		trickyLines = append(trickyLines,
			deepLine(d, ""), deepLine(d, "1"), deepLine(d, "{}"), deepLine(d, `{"a":1}`),
			deepLine(d, "1,")+"x", deepLine(d, "x"),
			`{"op":"step","x":`+strings.Repeat(`{"a":`, d)+"1"+strings.Repeat("}", d)+`}`,
			`{"op":"step","x":`+strings.Repeat(`{"a":`, d)+"1"+strings.Repeat("}", d)+`,"y":x}`,
			`{"op":"step","x":`+strings.Repeat(`[{"a":`, d/2)+"1"+strings.Repeat("}]", d/2)+`}`)
	}
}

// testFileLines returns every line of every string literal in the package's
// test files: the lines the tests use, as fuzz seeds.
func testFileLines(t testing.TB) []string {
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	var lines []string
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					for _, l := range strings.Split(s, "\n") {
						if !isBlank([]byte(l)) {
							lines = append(lines, strings.TrimSuffix(l, "\r"))
						}
					}
				}
			}
			return true
		})
	}
	return lines
}

// bundledTraces are the traces bfcsim ships.
func bundledTraces(t testing.TB) []string {
	paths, err := filepath.Glob("../traces/*.jsonl")
	require.NoError(t, err)
	tf, err := filepath.Glob("../traces/tf/*.jsonl")
	require.NoError(t, err)
	paths = append(paths, tf...)
	require.NotEmpty(t, paths)
	return paths
}

// traceLines returns the non-blank lines of the trace file at path.
func traceLines(t testing.TB, path string) [][]byte {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, MaxLineBytes)
	for sc.Scan() {
		if !isBlank(sc.Bytes()) {
			lines = append(lines, bytes.Clone(sc.Bytes()))
		}
	}
	require.NoError(t, sc.Err())
	return lines
}

// sameDecode checks that the decoder and the reference agree on line, both
// as an event line and as a first line that may be the header.
func sameDecode(t *testing.T, r *decoder, ref *refDecoder, line []byte) {
	t.Helper()
	ref.lineNo = 42
	want, wantMsg := ref.decode(line)
	var got Event
	gotMsg := r.decodeEvent(&got, line, 42)
	require.Equal(t, wantMsg, gotMsg, "line %q", line)
	if wantMsg == "" {
		require.Equal(t, want, got, "line %q", line)
		require.Equal(t, math.Float64bits(want.T), math.Float64bits(got.T), "t of line %q", line)
	}

	wantHdr, wantH, wantHMsg := ref.header(line)
	fields, gotHdr := headerFields(line)
	require.Equal(t, wantHdr, gotHdr, "is line %q a header", line)
	if gotHdr {
		gotH, gotHMsg := decodeHeader(fields)
		require.Equal(t, wantHMsg, gotHMsg, "header %q", line)
		if wantHMsg == "" {
			require.Equal(t, wantH, gotH, "header %q", line)
		}
	}
}

// keyPattern finds the keys of a line, roughly, to tell lines of different
// shapes apart.
var keyPattern = regexp.MustCompile(`"[a-z_]+":`)

// decode is decodeEvent with the signature of the reference's decode.
func (d *decoder) decode(line []byte) (Event, string) {
	var ev Event
	msg := d.decodeEvent(&ev, line, 0)
	return ev, msg
}

func newDecodeReader() *decoder { return &decoder{tags: map[string]string{}} }

func TestDecodeMatchesReference(t *testing.T) {
	r, ref := newDecodeReader(), newRefDecoder()
	for _, l := range trickyLines {
		sameDecode(t, r, ref, []byte(l))
	}
	for _, l := range testFileLines(t) {
		sameDecode(t, r, ref, []byte(l))
	}
}

// Every line of every bundled trace decodes as the reference decodes it.
func TestDecodeMatchesReferenceOnTraces(t *testing.T) {
	for _, path := range bundledTraces(t) {
		r, ref := newDecodeReader(), newRefDecoder()
		for _, l := range traceLines(t, path) {
			sameDecode(t, r, ref, l)
		}
	}
}

// refMaxDepth bounds how deeply the lines FuzzDecodeMatchesReference
// compares with the reference may nest. fastjson wraps an error once per open
// level, copying the message so far each time, so the reference takes time
// quadratic in the depth: about 0.25 ms for an error 72 levels deep, 3 ms at
// maxJSONDepth, 50 ms at 1,000 levels, 10 s at 9,000, where the decoder
// takes microseconds (27 µs at maxJSONDepth). The fuzzer's minimiser then
// runs such a line a number of times quadratic in its length, so lines a few
// hundred levels deep stalled the fuzzer for tens of seconds at a time.
// 72 levels cross the scanner's first 64-bit word of open containers and keep
// a comparison under a millisecond; the lines about maxJSONDepth deep are
// compared by TestDecodeMatchesReference.
const refMaxDepth = 72

// nesting returns the most containers a line holds open at once, strings
// skipped as fastjson skips them (a quote after an even number of
// backslashes ends one). Up to fastjson's first error the line is a valid
// JSON prefix, read the same way, so no error of fastjson's is wrapped in
// more levels than this; and a valid line nests exactly this deep.
func nesting(line []byte) int {
	depth, most, inString := 0, 0, false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			most = max(most, depth)
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
		}
	}
	return most
}

// FuzzDecodeMatchesReference: for any line nested at most refMaxDepth deep,
// the decoder and the fastjson reference give the same Event or the same
// error message, and agree on whether it is a header and what the header
// says. A line nested deeper is decoded alone: if it is deeper than
// maxJSONDepth it is malformed and not a header, and its reason stays short.
func FuzzDecodeMatchesReference(f *testing.F) {
	// The tricky lines about maxJSONDepth deep are not seeds: they would only
	// be decoded alone, and minimising what the fuzzer makes of them is slow.
	seed := func(l []byte) {
		if nesting(l) <= refMaxDepth {
			f.Add(l)
		}
	}
	for _, l := range trickyLines {
		seed([]byte(l))
	}
	for _, l := range testFileLines(f) {
		seed([]byte(l))
	}
	// Each bundled trace's first lines and one line of each distinct set
	// of keys; TestDecodeMatchesReferenceOnTraces checks every line.
	for _, path := range bundledTraces(f) {
		seen := map[string]bool{}
		for k, l := range traceLines(f, path) {
			var shape []byte
			for _, m := range keyPattern.FindAll(l, -1) {
				shape = append(shape, m...)
			}
			if k < 5 || !seen[string(shape)] {
				seen[string(shape)] = true
				seed(l)
			}
		}
	}
	r, ref := newDecodeReader(), newRefDecoder()
	f.Fuzz(func(t *testing.T, line []byte) {
		depth := nesting(line)
		if depth <= refMaxDepth {
			sameDecode(t, r, ref, line)
			return
		}
		_, msg := r.decode(line)
		_, isHeader := headerFields(line)
		if depth > maxJSONDepth {
			require.True(t, strings.HasPrefix(msg, "malformed JSON: "), "a line %d deep is malformed: %.200q gives %.200q", depth, line, msg)
			require.False(t, isHeader, "a line %d deep is not a header: %.200q", depth, line)
		}
		// At most maxReasonLevels levels spelled out, and the line quoted.
		assert.LessOrEqual(t, len(msg), maxReasonLevels*len("cannot parse object: cannot parse object value: ")+4*len(line)+1024)
	})
}

// A line nested a million levels deep is an error, not a stack overflow,
// and its reason stays short.
func TestDecodeDeepNesting(t *testing.T) {
	r := newDecodeReader()
	for _, tc := range []struct{ line, msg string }{
		{strings.Repeat("[", 1<<20), "more levels]"},
		{`{"op":"step","x":` + strings.Repeat(`[{"a":`, 1<<19), "more levels]"},
		{deepLine(1<<20, ""), "too big depth for the nested JSON; it exceeds 300"},
		{deepLine(300, ""), "too big depth for the nested JSON; it exceeds 300"},
	} {
		_, msg := r.decode([]byte(tc.line))
		require.True(t, strings.HasPrefix(msg, "malformed JSON: cannot parse JSON: "), msg[:min(len(msg), 100)])
		require.True(t, strings.Contains(msg, tc.msg), msg[len(msg)-min(len(msg), 200):])
		assert.Less(t, len(msg), 1<<20)
		_, ok := headerFields([]byte(tc.line))
		assert.False(t, ok)
	}
	_, msg := r.decode([]byte(deepLine(299, "")))
	assert.Empty(t, msg, "depth 300 is allowed")
}

// Decoding the lines of the bundled traces allocates nothing once their tags
// are interned.
func TestDecodeAllocs(t *testing.T) {
	lines := benchLines(t)
	r := newDecodeReader()
	for _, l := range lines {
		_, msg := r.decode(l)
		require.Empty(t, msg)
	}
	allocs := testing.AllocsPerRun(10, func() {
		for _, l := range lines {
			r.decode(l)
		}
	})
	assert.Zero(t, allocs)
}

// randomNumber returns a random JSON number of the shapes traces have and
// of ones they do not: long mantissas, fractions, exponents.
func randomNumber(rng *rand.Rand) string {
	var b strings.Builder
	if rng.IntN(4) == 0 {
		b.WriteByte('-')
	}
	digits := func(n int) {
		for range n {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
	}
	if rng.IntN(5) == 0 {
		b.WriteByte('0')
	} else {
		b.WriteByte(byte('1' + rng.IntN(9)))
		digits(rng.IntN(22))
	}
	if rng.IntN(2) == 0 {
		b.WriteByte('.')
		switch rng.IntN(3) {
		case 0:
			b.WriteByte("05"[rng.IntN(2)])
		case 1:
			b.WriteString([]string{"25", "75", "125", "375", "0625", "5", "50", "500"}[rng.IntN(8)])
		default:
			digits(1 + rng.IntN(20))
		}
	}
	if rng.IntN(3) == 0 {
		b.WriteString([]string{"e", "E", "e+", "e-", "E-"}[rng.IntN(5)])
		digits(1 + rng.IntN(3))
	}
	return b.String()
}

// parseNumber gives fastfloat.Parse's value bit for bit, and exactFloat,
// where it answers, strconv.ParseFloat's.
func TestParseNumberMatchesFastfloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 300_000
	if testing.Short() {
		n = 30_000
	}
	exact := 0
	for range n {
		s := randomNumber(rng)
		want, err := fastfloat.Parse(s)
		require.NoError(t, err, s)
		got, ok := parseNumber([]byte(s))
		require.True(t, ok, s)
		require.Equal(t, math.Float64bits(want), math.Float64bits(got), "%s: fastfloat %v, parseNumber %v", s, want, got)

		if f, end, fast := plainFloat([]byte(s+","), 0); fast {
			require.Equal(t, len(s), end, s)
			require.Equal(t, math.Float64bits(want), math.Float64bits(f), "%s: fastfloat %v, plainFloat %v", s, want, f)
		}
		if f, ok := exactFloat([]byte(s)); ok {
			exact++
			want, _ := strconv.ParseFloat(s, 64)
			require.Equal(t, math.Float64bits(want), math.Float64bits(f), "%s: strconv %v, exactFloat %v", s, want, f)
		}
	}
	assert.Greater(t, exact, n/10, "exactFloat answers for a good part of the numbers")
}

// Once warm, the Reader allocates nothing per event: not for lines, tags,
// slots or the live set.
func TestReaderAllocsPerEvent(t *testing.T) {
	data := syntheticTrace(400_000)
	r, err := NewReader(bytes.NewReader(data), "t.jsonl")
	require.NoError(t, err)
	defer r.Close()
	for range 200_000 { // past the first use of every chunk of the pipeline
		require.True(t, r.Next())
	}
	allocs := testing.AllocsPerRun(100, func() {
		for range 1000 {
			if !r.Next() {
				t.Fatal(r.Err())
			}
		}
	})
	assert.Zero(t, allocs)
}
