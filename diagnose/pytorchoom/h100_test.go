package pytorchoom

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestH100Messages reads the messages PyTorch 2.11 raised on an H100 under
// set_per_process_memory_fraction (traces/h100, oom_error in each truth
// file), as the recording script kept them: cut at 300 characters. Each
// asked for 1.54 GiB or 20.00 MiB with tens of GiB free on the device, so
// the verdict is the limit; only resnet-default's paste reaches the
// printed limit.
func TestH100Messages(t *testing.T) {
	const gib, mib = 1 << 30, 1 << 20
	for _, tc := range []struct {
		file             string
		request, free    float64 // as printed, in GiB or MiB
		reqUnit          float64
		allowed          float64 // GiB; 0: not in the paste
		others           int
		truncatedAtLimit bool
	}{
		{file: "h100-train-default.txt", request: 1.54, reqUnit: gib, free: 55.77, others: 3},
		{file: "h100-train-expandable.txt", request: 1.54, reqUnit: gib, free: 63.99, others: 3},
		{file: "h100-resnet-default.txt", request: 20, reqUnit: mib, free: 70.84, allowed: 4.44, others: 2},
		{file: "h100-resnet-expandable.txt", request: 20, reqUnit: mib, free: 66.67, others: 3},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in := readFixture(t, tc.file)
			m := in.Last
			require.NotNil(t, m)
			assert.Equal(t, FormatCapacity, m.Format)
			assert.True(t, m.Truncated, "the recording kept 300 characters")
			assert.InDelta(t, tc.request*tc.reqUnit, float64(m.Request.Bytes), 0.006*tc.reqUnit)
			assert.InDelta(t, 79.18*gib, float64(m.TotalCapacity.Bytes), 0.006*gib)
			assert.InDelta(t, tc.free*gib, float64(m.Free.Bytes), 0.006*gib)
			if tc.allowed > 0 {
				require.NotNil(t, m.Allowed)
				assert.InDelta(t, tc.allowed*gib, float64(m.Allowed.Bytes), 0.006*gib)
			} else {
				assert.Nil(t, m.Allowed)
			}
			assert.Nil(t, m.Allocated, "cut off before the allocated figure")
			assert.GreaterOrEqual(t, len(m.Others), tc.others-1)
			e := Explain(m)
			assert.Equal(t, Limit, e.Verdict, "tens of GiB free: only a limit refuses a new segment")
		})
	}
}
