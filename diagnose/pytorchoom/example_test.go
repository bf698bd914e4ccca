package pytorchoom_test

import (
	"fmt"
	"strings"

	"github.com/bfcsim/bfcsim/diagnose/pytorchoom"
)

// A message pasted from an e-mail, quoted and wrapped.
func ExampleRead() {
	paste := `> torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
> GPU 1 has a total capacity of 79.15 GiB of which 1.35 GiB is free. Process
> 41001 has 26.50 GiB memory in use. Including non-PyTorch memory, this
> process has 51.28 GiB memory in use. Of the allocated memory 50.52 GiB is
> allocated by PyTorch, and 150.00 MiB is reserved by PyTorch but
> unallocated.`
	in, err := pytorchoom.Read(strings.NewReader(paste), "paste")
	if err != nil {
		fmt.Println(err)
		return
	}
	m := in.Last
	fmt.Println(m.Format, m.Format.Versions(), m.Request.Bytes, m.Free.Printed)
	e := pytorchoom.Explain(m)
	fmt.Println(e.Verdict, e.Confident)
	// Output:
	// pytorch-2.2 2.2 and later 2147483648 1.35 GiB
	// other-process true
}
