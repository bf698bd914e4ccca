package tensorflow

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/bfcsim/bfcsim/trace"
)

// MemoryProfileKeys are the keys TensorBoard's memory profile JSON (the
// proto3 JSON of MemoryProfile) may start with.
var MemoryProfileKeys = map[string]bool{
	"memoryProfilePerAllocator": true, "numHosts": true, "memoryIds": true, "version": true,
}

// maxSnapshots is TensorBoard's max_num_snapshots: a memory profile keeps at
// most this many snapshots of an allocator.
const maxSnapshots = 1000

// ConvertAny converts a capture in either form: an XSpace (Convert) or the
// JSON of TensorBoard's memory profile (ConvertMemoryProfile), told apart by
// their first bytes.
func ConvertAny(ctx context.Context, r io.Reader, file string, w *trace.Writer, opt Options) (Stats, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(4 << 10)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return Stats{}, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(head) == 0 {
		return Stats{}, fmt.Errorf("%s: %w", file, errEmpty)
	}
	if LooksLikeXSpace(head) {
		return Convert(ctx, br, file, w, opt)
	}
	return ConvertMemoryProfile(ctx, br, file, w, opt)
}

// jsonInt is an int64 as proto3 JSON writes it: a string, or a number.
type jsonInt int64

func (n *jsonInt) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, `"`)
	if len(b) == 0 || string(b) == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		u, uerr := strconv.ParseUint(string(b), 10, 64)
		if uerr != nil {
			return fmt.Errorf("not an integer: %s", b)
		}
		v = int64(u)
	}
	*n = jsonInt(v)
	return nil
}

type mpSnapshot struct {
	TimeOffsetPs     jsonInt `json:"timeOffsetPs"`
	AggregationStats struct {
		StackReservedBytes jsonInt  `json:"stackReservedBytes"`
		HeapAllocatedBytes *jsonInt `json:"heapAllocatedBytes"`
		FreeMemoryBytes    *jsonInt `json:"freeMemoryBytes"`
	} `json:"aggregationStats"`
	ActivityMetadata struct {
		MemoryActivity  string  `json:"memoryActivity"`
		RequestedBytes  jsonInt `json:"requestedBytes"`
		AllocationBytes jsonInt `json:"allocationBytes"`
		Address         jsonInt `json:"address"`
		TfOpName        string  `json:"tfOpName"`
		StepID          jsonInt `json:"stepId"`
	} `json:"activityMetadata"`
}

type mpAllocator struct {
	Snapshots        []mpSnapshot `json:"memoryProfileSnapshots"`
	SampledSnapshots []mpSnapshot `json:"sampledTimelineSnapshots"`
}

type memoryProfile struct {
	PerAllocator map[string]mpAllocator `json:"memoryProfilePerAllocator"`
	Version      int                    `json:"version"`
}

// ConvertMemoryProfile reads TensorBoard's memory profile (the JSON in
// *.memory_profile.json.gz) and writes the trace of one of its allocators.
// TensorBoard keeps at most 1,000 snapshots of an allocator: older releases
// (no "version") the 1,000 with the least free memory, out of time order;
// version 1 a time-ordered sample of the run in sampledTimelineSnapshots.
// Either way a longer run arrives incomplete, and Stats says so (Sampled,
// Truncated).
func ConvertMemoryProfile(ctx context.Context, r io.Reader, file string, w *trace.Writer, opt Options) (Stats, error) {
	var mp memoryProfile
	dec := json.NewDecoder(trace.ContextReader(ctx, r))
	if err := dec.Decode(&mp); err != nil {
		return Stats{}, fmt.Errorf("%s: not a TensorBoard memory profile: %w", file, err)
	}
	st := Stats{Format: "memory_profile"}
	var evs []memEvent
	names := make([]string, 0, len(mp.PerAllocator))
	for name := range mp.PerAllocator {
		names = append(names, name)
	}
	slices.Sort(names)
	counts := map[string]int{}
	seq := 0
	for _, name := range names {
		a := mp.PerAllocator[name]
		snaps := a.Snapshots
		if mp.Version >= 1 && len(a.SampledSnapshots) > 0 {
			snaps = a.SampledSnapshots
		}
		counts[name] = len(snaps)
		for _, s := range snaps {
			am := s.ActivityMetadata
			var alloc bool
			switch am.MemoryActivity {
			case "ALLOCATION":
				alloc = true
			case "DEALLOCATION":
			default:
				continue
			}
			ev := memEvent{
				ps: int64(s.TimeOffsetPs), seq: seq, alloc: alloc, allocator: name, addr: uint64(am.Address),
				requested: int64(am.RequestedBytes), chunk: int64(am.AllocationBytes), op: am.TfOpName,
				reserved: int64(s.AggregationStats.StackReservedBytes), step: int64(am.StepID), hasStep: true,
			}
			if v := s.AggregationStats.HeapAllocatedBytes; v != nil {
				ev.inUse, ev.hasInUse = int64(*v), true
			}
			if v := s.AggregationStats.FreeMemoryBytes; v != nil {
				ev.available, ev.hasAvailable = int64(*v), true
			}
			seq++
			evs = append(evs, ev)
		}
	}
	chosen := opt.Allocator
	if chosen == "" && len(counts) == 1 {
		chosen = names[0]
	}
	st.Snapshots = counts[chosen]
	if st.Snapshots >= maxSnapshots {
		if mp.Version >= 1 {
			st.Sampled = true
		} else {
			st.Truncated = true
		}
	}
	return st, writeEvents(evs, file, w, opt, &st)
}
