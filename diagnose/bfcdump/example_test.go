package bfcdump_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/bfcsim/bfcsim/diagnose/bfcdump"
)

func ExampleHumanBytes() {
	for _, n := range []int64{512, 24064, 802160640, 2319282432} {
		fmt.Println(bfcdump.HumanBytes(n))
	}
	// Output:
	// 512B
	// 23.5KiB
	// 765.00MiB
	// 2.16GiB
}

func ExampleParseLog() {
	const log = `2026-01-02 10:11:12.100485: W tensorflow/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of memory trying to allocate 3.00MiB (rounded to 3145728)requested by op dense/MatMul
2026-01-02 10:11:12.101075: I tensorflow/tsl/framework/bfc_allocator.cc:1075] Next region of size 8388608
2026-01-02 10:11:12.101095: I tensorflow/tsl/framework/bfc_allocator.cc:1095] InUse at 7f3a40000000 of size 3145728 next 1
2026-01-02 10:11:12.101095: I tensorflow/tsl/framework/bfc_allocator.cc:1095] Free  at 7f3a40300000 of size 2097152 next 2
2026-01-02 10:11:12.101095: I tensorflow/tsl/framework/bfc_allocator.cc:1095] InUse at 7f3a40500000 of size 1048576 next 3
2026-01-02 10:11:12.101095: I tensorflow/tsl/framework/bfc_allocator.cc:1095] Free  at 7f3a40600000 of size 2097152 next 18446744073709551615
2026-01-02 10:11:12.101109: I tensorflow/tsl/framework/bfc_allocator.cc:1109] Total bytes in pool: 8388608 memory_limit_: 8388608 available bytes: 0 curr_region_allocation_bytes_: 16777216
`
	s, err := bfcdump.ParseLog(strings.NewReader(log), "oom.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(s.RenderOccupancy())
	fmt.Println(bfcdump.Explain(s).Verdict)
	// Output:
	// **************************************________________________*************_________________________
	// fragmentation
}
