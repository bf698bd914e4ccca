package diagnose

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/search"
)

// The context reserve fit assumes is what the H100 that recorded
// traces/h100 showed: in each of its four out-of-memory messages, what
// "this process has ... in use" counts beyond the bytes the run's snapshot
// held reserved at the failure, within the message's rounding.
func TestContextReserveIsTheH100s(t *testing.T) {
	// The pastes are cut at 200 characters, one just after the figure: it
	// is read from the text, as printed.
	inUse := regexp.MustCompile(`this process has ([0-9.]+) GiB`)
	for _, name := range []string{"train-default", "train-expandable", "resnet-default", "resnet-expandable"} {
		raw, err := os.ReadFile("pytorchoom/testdata/h100-" + name + ".txt")
		require.NoError(t, err)
		m := inUse.FindSubmatch(bytes.ReplaceAll(raw, []byte("\n"), nil))
		require.NotNil(t, m, name)
		gib, err := strconv.ParseFloat(string(m[1]), 64)
		require.NoError(t, err)
		// Two decimals of GiB: within half a hundredth either way.
		process, tolerance := uint64(gib*(1<<30)), uint64(1<<30)/200
		held, ok, err := reservedAtRecordedOOM(context.Background(), "../traces/h100/"+name+"-oom.pickle.gz", nil)
		require.NoError(t, err)
		require.True(t, ok, "%s: the snapshot has the failure", name)
		lo, hi := process-tolerance-held, process+tolerance-held
		t.Logf("%s: this process %s, reserved %d: %d to %d bytes beside PyTorch's", name, m[1], held, lo, hi)
		assert.LessOrEqual(t, lo, search.DefaultContextReserveBytes, name)
		assert.GreaterOrEqual(t, hi+16<<20, search.DefaultContextReserveBytes, "%s: the default is no more than 16 MiB above it", name)
	}
}
