package trace

import (
	"context"
	"io"
)

// ContextReader returns a reader of r whose reads fail with ctx's error
// once ctx is done, so that reading a large input stops soon after an
// interrupt: a read of a buffer's worth is never long.
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx: ctx, r: r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
