//go:build !unix

package allocators

import "errors"

// NewHostSpace is not available on this platform: it needs mmap.
func NewHostSpace(capacity uint64, cost CostModel) (Space, error) {
	return nil, errors.New("--space host needs a Unix system (mmap)")
}
