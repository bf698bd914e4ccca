package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
)

// Generator produces one synthetic trace.
type Generator interface {
	// Header returns the trace header: Version 1, Name the workload's name
	// and key parameters, Source "gen", TimeUnit "us", and Meta every
	// parameter as JSON text under its snake_case name (Meta["seed"] = "1")
	// plus Meta["workload"], the workload's name as a JSON string.
	Header() trace.Header
	// Generate calls emit for every event in order; it stops and returns
	// emit's first error. An invalid configuration is reported before
	// anything is emitted. The events form a valid trace: ids are unique
	// among live allocations, frees name live ids, t (in microseconds)
	// strictly increases, and aligns are powers of two.
	Generate(emit func(trace.Event) error) error
}

// workloads is the table of generators by name, sorted by name. Each entry
// returns a pointer to a fresh default config, so that callers can set its
// fields (the CLI binds one flag per field) before generating.
var workloads = []struct {
	name string
	def  func() Generator
}{
	{"cnn-infer", func() Generator { c := DefaultCNNInfer(); return &c }},
	{"fragmenter", func() Generator { c := DefaultFragmenter(); return &c }},
	{"ramp", func() Generator { c := DefaultRamp(); return &c }},
	{"random", func() Generator { c := DefaultRandom(); return &c }},
	{"tf-test", func() Generator { c := DefaultTFTest(); return &c }},
	{"transformer-infer", func() Generator { c := DefaultTransformerInfer(); return &c }},
	{"transformer-train", func() Generator { c := DefaultTransformerTrain(); return &c }},
}

// Names returns the workload names New accepts, sorted.
func Names() []string {
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.name
	}
	return names
}

// New returns the default config of the workload called name, as a pointer
// (*TransformerTrain, *Random, ...) so that its fields can be set before
// Generate is called. An unknown name is an error that lists the valid ones.
func New(name string) (Generator, error) {
	for _, w := range workloads {
		if w.name == name {
			return w.def(), nil
		}
	}
	return nil, fmt.Errorf("unknown workload %q (want one of %s)", name, strings.Join(Names(), ", "))
}

// pcgStream is the second word of every generator's PCG state. It is fixed
// (the ASCII of "bfcsim") so that a seed names the same trace in every
// version of bfcsim; changing it would silently change every generated trace.
const pcgStream = 0x62666373696d

// Validate checks g's configuration, for the generators that can.
func Validate(g Generator) error {
	if v, ok := g.(interface{ Validate() error }); ok {
		return v.Validate()
	}
	return nil
}

// Write writes g's trace to w: h, then every event g generates; ctx stops
// a long trace. Validate g first: Write does not.
func Write(ctx context.Context, g Generator, h trace.Header, w io.Writer) error {
	tw := trace.NewWriter(w)
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n := 0
	err := g.Generate(func(ev trace.Event) error {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		return tw.Write(ev)
	})
	if err != nil {
		return err
	}
	return tw.Flush()
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, pcgStream)) }

// Element sizes in bytes.
const (
	fp16Bytes  = 2
	fp32Bytes  = 4
	int64Bytes = 8
	maskBytes  = 1 // a dropout mask is a bool tensor, one byte per element
)

// eventUS is how far the clock moves before every event: the host-side cost
// of one framework operation (dispatch, allocator call), about a microsecond.
const eventUS = 1

// hbmBytesPerUS is the modelled memory bandwidth of the ML workloads, about
// 1 TB/s (2^20 bytes per microsecond, HBM-class): after an alloc the clock
// also moves by the time a kernel takes to write the whole tensor, so big
// tensors are spaced further apart in time, as in a recorded trace.
const hbmBytesPerUS = 1 << 20

// maxTensorBytes bounds a single tensor (2^48 bytes, 256 TiB). Configurations
// that would exceed it are rejected, so that no size computation overflows.
const maxTensorBytes = 1 << 48

// emitter is the generators' shared event sink: it hands out ids from a
// counter that starts at 1 (so 0 can mean "none"), keeps the clock in whole
// microseconds, and remembers emit's first error, after which it emits
// nothing. Generators check err in their outer loops to stop early.
type emitter struct {
	emit       func(trace.Event) error
	err        error
	nextID     uint64
	nowUS      int64
	bytesPerUS int64 // >0: an alloc also advances the clock by size/bytesPerUS
}

func newEmitter(emit func(trace.Event) error, bytesPerUS int64) *emitter {
	return &emitter{emit: emit, nextID: 1, bytesPerUS: bytesPerUS}
}

func (e *emitter) send(ev trace.Event) {
	if e.err != nil {
		return
	}
	e.nowUS += eventUS
	ev.T = float64(e.nowUS)
	ev.Flags |= trace.HasT
	e.err = e.emit(ev)
}

// alloc emits an alloc of size bytes with the default alignment and returns
// its id.
func (e *emitter) alloc(size int64, tag string) uint64 { return e.allocAligned(size, 0, tag) }

// allocAligned emits an alloc of size bytes aligned to align (0 or a power of
// two) and returns its id.
func (e *emitter) allocAligned(size int64, align uint64, tag string) uint64 {
	if size < 0 {
		panic(fmt.Sprintf("gen: negative size %d for %s", size, tag))
	}
	id := e.nextID
	e.nextID++
	e.send(trace.Event{Op: trace.OpAlloc, ID: id, Size: uint64(size), Align: align, Tag: tag})
	if e.bytesPerUS > 0 {
		e.nowUS += size / e.bytesPerUS
	}
	return id
}

// free emits the free of id, which must be live.
func (e *emitter) free(id uint64) {
	if id == 0 {
		panic("gen: free of id 0 (an allocation that was never made)")
	}
	e.send(trace.Event{Op: trace.OpFree, ID: id})
}

// loadStep names the step the ML workloads emit once their weights are
// loaded: it ends the loading phase, so that an arena can keep what was
// loaded apart from what each iteration allocates (arena.split=first-step).
const loadStep = "load"

// step emits a step event named name.
func (e *emitter) step(name string) { e.send(trace.Event{Op: trace.OpStep, Name: name}) }

// jittered returns n shrunk by a random fraction of at most frac: uniform in
// [ceil((1−frac)·n), n], then rounded down to a multiple of quantum but never
// below min(quantum, n). With frac 0 it returns n without drawing, so a
// config without jitter does not depend on its seed.
func jittered(rng *rand.Rand, n int, frac float64, quantum int) int {
	if frac <= 0 || n <= 1 {
		return n
	}
	lo := max(int(math.Ceil((1-frac)*float64(n))), 1)
	v := lo + rng.IntN(n-lo+1)
	if quantum > 1 {
		v = max(v-v%quantum, min(quantum, n))
	}
	return v
}

// header builds a generator's header; cfg is its config struct.
func header(workload, name string, cfg any) trace.Header {
	return trace.Header{
		Version:  trace.FormatVersion,
		Name:     name,
		Source:   "gen",
		TimeUnit: "us",
		Meta:     params(workload, cfg),
	}
}

// params returns the exported fields of the config struct cfg as JSON text
// keyed by their snake_case names, plus "workload". Reflection keeps the
// header in step with the fields: a new field cannot be forgotten.
func params(workload string, cfg any) map[string]string {
	m := map[string]string{"workload": strconv.Quote(workload)}
	v := reflect.ValueOf(cfg)
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, fv := snakeCase(f.Name), v.Field(i)
		switch fv.Kind() {
		case reflect.Int, reflect.Int64:
			m[key] = strconv.FormatInt(fv.Int(), 10)
		case reflect.Uint64:
			m[key] = strconv.FormatUint(fv.Uint(), 10)
		case reflect.Float64:
			x := fv.Float()
			if math.IsNaN(x) || math.IsInf(x, 0) {
				m[key] = strconv.Quote(strconv.FormatFloat(x, 'g', -1, 64)) // JSON has no NaN
			} else {
				m[key] = strconv.FormatFloat(x, 'g', -1, 64)
			}
		case reflect.Bool:
			m[key] = strconv.FormatBool(fv.Bool())
		case reflect.String:
			text, _ := json.Marshal(fv.String()) // a string always marshals
			m[key] = string(text)
		default:
			panic(fmt.Sprintf("gen: config field %s.%s has unsupported type %s", t.Name(), f.Name, f.Type))
		}
	}
	return m
}

// snakeCase turns a Go field name into a snake_case key: SeqLen → seq_len,
// MaxWorkspaceBytes → max_workspace_bytes.
func snakeCase(s string) string { return wordCase(s, '_') }

// FlagName turns a config field's Go name into its flag spelling, the one
// error messages use too: SeqLen → seq-len.
func FlagName(field string) string { return wordCase(field, '-') }

func wordCase(s string, sep byte) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			if i > 0 && !('A' <= s[i-1] && s[i-1] <= 'Z') {
				b.WriteByte(sep)
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// checker collects the first problem found while validating a config.
type checker struct {
	workload string
	err      error
}

func (c *checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%s: %s", c.workload, fmt.Sprintf(format, args...))
	}
}

// atLeast checks that the field called name (its Go name) is at least lo.
func (c *checker) atLeast(name string, v, lo int64) {
	if v < lo {
		c.fail("%s must be at least %d, got %d", FlagName(name), lo, v)
	}
}

// atMost checks that the field called name is at most hi.
func (c *checker) atMost(name string, v, hi int64) {
	if c.err == nil && v > hi {
		c.fail("%s must be at most %d, got %d", FlagName(name), hi, v)
	}
}

// maxHeld bounds the counts a generator keeps in memory (layers, blocks,
// live allocations, sizes to shuffle): 2^24, far beyond any real model or
// workload, and small enough that the generator's own state stays within a
// few hundred megabytes. Counts that are only streamed (events, steps,
// runs) are not bounded.
const maxHeld = 1 << 24

// fraction checks that the field called name lies in [0, 1].
func (c *checker) fraction(name string, v float64) {
	if !(v >= 0 && v <= 1) {
		c.fail("%s must be between 0 and 1, got %g", FlagName(name), v)
	}
}

// bytes checks that the product of factors, the size of the tensor what, is
// at most maxTensorBytes. Call it after the factors are known to be positive.
func (c *checker) bytes(what string, factors ...int64) {
	if c.err != nil {
		return
	}
	p := uint64(1)
	for _, f := range factors {
		hi, lo := bits.Mul64(p, uint64(f))
		if hi != 0 || lo > maxTensorBytes {
			c.fail("%s would be larger than %d TiB; use smaller parameters", what, maxTensorBytes>>40)
			return
		}
		p = lo
	}
}
