package mtrace_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/mtrace"
)

// A log converts to a trace: a realloc becomes a free and an alloc, and the
// free of a block allocated before tracing began is dropped and counted.
func ExampleConvert() {
	log := `= Start
@ /lib/x86_64-linux-gnu/libc.so.6:(__strdup+1a)[0x9e9aa] + 0x55d0a2f4b2a0 0x7
@ ./prog:[0x1139] - 0x55d0a2f4a010
@ ./prog:[0x1150] < 0x55d0a2f4b2a0
@ ./prog:[0x1150] > 0x55d0a2f4b2c0 0x40
@ ./prog:[0x1170] - 0x55d0a2f4b2c0
`
	w := trace.NewWriter(os.Stdout)
	st, err := mtrace.Convert(strings.NewReader(log), "prog.mtrace", w, mtrace.Options{Name: "prog"})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d allocs, %d frees, %d dropped free, peak live %d bytes\n",
		st.Allocs, st.Frees, st.DroppedFrees, st.PeakLiveBytes)
	// Output:
	// {"bfcsim_trace":1,"name":"prog","source":"mtrace"}
	// {"op":"alloc","id":1,"size":7,"tag":"__strdup","addr":94354575504032}
	// {"op":"free","id":1}
	// {"op":"alloc","id":2,"size":64,"tag":"prog+0x1150","addr":94354575504064}
	// {"op":"free","id":2}
	// 2 allocs, 2 frees, 1 dropped free, peak live 64 bytes
}
