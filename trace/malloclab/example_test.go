package malloclab_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/malloclab"
)

// A .rep file keeps its ids; a realloc is a free and an alloc of the same id.
func ExampleConvert() {
	rep := `4096
2
4
1
a 0 100
a 1 50
r 0 200
f 1
`
	w := trace.NewWriter(os.Stdout)
	st, err := malloclab.Convert(strings.NewReader(rep), "tiny.rep", w, malloclab.Options{Name: "tiny"})
	if err != nil {
		panic(err)
	}
	fmt.Printf("ops %d, reallocs %d, live at the end %d, warnings %q\n", st.Ops, st.Reallocs, st.LiveAtEnd, st.Warnings)
	// Output:
	// {"bfcsim_trace":1,"name":"tiny","source":"malloclab","num_ids":2,"num_ops":4,"suggested_heap_size":4096,"weight":1}
	// {"op":"alloc","id":0,"size":100}
	// {"op":"alloc","id":1,"size":50}
	// {"op":"free","id":0}
	// {"op":"alloc","id":0,"size":200}
	// {"op":"free","id":1}
	// ops 4, reallocs 1, live at the end 1, warnings []
}
