package gen_test

import (
	"bytes"
	"fmt"
	"os"

	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/gen"
)

// A generator's events go straight into a trace.Writer: its Write method is
// an emit function.
func ExampleRandom() {
	g := gen.DefaultRandom()
	g.Events, g.MaxSize, g.TargetLive = 6, 4096, 2
	w := trace.NewWriter(os.Stdout)
	if err := w.WriteHeader(g.Header()); err != nil {
		panic(err)
	}
	if err := g.Generate(w.Write); err != nil {
		panic(err)
	}
	if err := w.Flush(); err != nil {
		panic(err)
	}
	// Output:
	// {"bfcsim_trace":1,"name":"random events=6 min-size=16 max-size=4096 target-live=2 seed=1","source":"gen","time_unit":"us","align_prob":0,"events":6,"free_at_end":true,"max_size":4096,"min_size":16,"seed":1,"step_every":0,"target_live":2,"workload":"random"}
	// {"op":"alloc","id":1,"size":259,"t":1}
	// {"op":"alloc","id":2,"size":1672,"t":2}
	// {"op":"free","id":1,"t":3}
	// {"op":"alloc","id":3,"size":23,"t":4}
	// {"op":"free","id":3,"t":5}
	// {"op":"free","id":2,"t":6}
}

// New looks a workload up by name; its fields can be set before generating.
func ExampleNew() {
	g, err := gen.New("cnn-infer")
	if err != nil {
		panic(err)
	}
	cnn := g.(*gen.CNNInfer)
	cnn.Runs, cnn.Batch, cnn.BatchJitter = 3, 1, 0

	var buf bytes.Buffer
	w := trace.NewWriter(&buf)
	_ = w.WriteHeader(g.Header())
	if err := g.Generate(w.Write); err != nil {
		panic(err)
	}
	_ = w.Flush()

	r, err := trace.NewReader(&buf, "cnn.jsonl")
	if err != nil {
		panic(err)
	}
	for r.Next() {
	}
	if err := r.Err(); err != nil {
		panic(err)
	}
	s := r.Summary()
	fmt.Println(r.Header().Name)
	fmt.Printf("%d events: %d allocs, %d frees, %d steps; peak live %d bytes, %d live at the end\n",
		s.Events, s.Allocs, s.Frees, s.Steps, s.PeakLiveBytes, s.LiveBytes)
	// Output:
	// cnn-infer runs=3 batch=1 image-size=224 base-channels=64 stages=4 blocks-per-stage=2 seed=1
	// 316 events: 177 allocs, 135 frees, 4 steps; peak live 28964048 bytes, 23369424 live at the end
}
