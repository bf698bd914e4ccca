package trace

import "fmt"

// SyntaxError reports an invalid line of a trace: malformed JSON, a missing or
// ill-typed field, or an event that contradicts the ones before it.
type SyntaxError struct {
	File string // the name the Reader was given, e.g. "trace.jsonl"
	Line int64  // 1-based
	Msg  string // the reason, e.g. "free of id 77 that is not live"
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}
