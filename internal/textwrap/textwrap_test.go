package textwrap

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLines(t *testing.T) {
	assert.Equal(t, []string{"the pool holds", "128 MiB, of", "which 3 B are", "free"},
		Lines("the pool holds 128 MiB, of which 3 B are free", 14), "a size's unit stays with its number")
	assert.Equal(t, []string{"a", "wordlongerthanwidth", "b"}, Lines("a wordlongerthanwidth b", 5))
	assert.Empty(t, Lines("  ", 10))
	assert.Equal(t, []string{"B is a letter"}, Lines("B is a letter", 80), "a unit with no number before it is a word")
	assert.Equal(t, []string{"a B c"}, Lines("a B c", 10), "a lone letter is not a unit")
	assert.Equal(t, []string{"under", "128 MiB."}, Lines("under 128 MiB.", 10))
}
