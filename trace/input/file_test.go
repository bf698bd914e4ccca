package input

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTraceNameOf(t *testing.T) {
	for path, want := range map[string]string{
		"runs/sort.mtrace.gz": "sort",
		"short1-bal.rep":      "short1-bal",
		"log":                 "log",
		"x/.gz":               "mtrace",
		"-":                   "mtrace",
		"snapshot.pickle.zst": "snapshot",
	} {
		assert.Equal(t, want, NameOf(path, "mtrace"), path)
	}
}
