package mtrace

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRecordEnv(t *testing.T) {
	env := recordEnv([]string{"HOME=/root", "LD_PRELOAD=/opt/mine.so", "MALLOC_TRACE=/old", "BFCSIM_RECORD_PARENT=1"},
		"/tmp/s.so", "/tmp/log")
	assert.Equal(t, []string{
		"HOME=/root",
		"LD_PRELOAD=/tmp/s.so /opt/mine.so",
		"MALLOC_TRACE=/tmp/log",
		fmt.Sprintf("BFCSIM_RECORD_PARENT=%d", os.Getpid()),
	}, env)
}
