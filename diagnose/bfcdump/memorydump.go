package bfcdump

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/bfcsim/bfcsim/diagnose/bfcdump/memorypb"
)

// Marshal encodes s as TensorFlow's MemoryDump protobuf, filled as
// BFCAllocator::RecordMemoryMap fills it, so that TF's own tools and Unmarshal
// read it:
//
//   - allocator_name;
//   - 21 bin_summary entries, bins 0..20, counted over every chunk as Bins
//     does;
//   - every chunk in address order, bin -1 for an in-use chunk and
//     BinNumForSize(size) for a free one (TF's invariant, whatever c.Bin
//     says), with the debug fields (op name, step, action and freed-at
//     counts) as s carries them;
//   - stats: the four counters, and fragmentation_metric from
//     s.Stats.Fragmentation, or TF's metric over the chunks when that is 0.
//
// Names that are not valid UTF-8, which proto3 strings must be, get U+FFFD
// for each invalid byte sequence.
//
// Regions, the memory limit, the pool size and the failed request have no
// place in a MemoryDump and are lost. The encoding is deterministic. Marshal
// fails on a snapshot that does not Validate or whose sizes do not fit the
// proto's int64 fields.
//
// The chunks are encoded one at a time into the output, field by field
// (appendChunk): a pool of a million chunks does not become a million
// messages first. The bytes are those proto.Marshal gives for the whole
// message (a repeated field's encoding is its elements' in turn, and the
// fields go in number order), which a test checks.
func Marshal(s *Snapshot) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("encoding a MemoryDump: %w", err)
	}
	opts := proto.MarshalOptions{Deterministic: true}
	// About 16 bytes a chunk on real pools.
	b, err := opts.MarshalAppend(make([]byte, 0, 1024+24*len(s.Chunks)), dumpHead(s))
	if err != nil {
		return nil, fmt.Errorf("encoding a MemoryDump: %w", err)
	}
	var body []byte
	for _, c := range s.Chunks {
		if body, err = appendChunk(body[:0], c); err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, chunkField, protowire.BytesType)
		b = protowire.AppendBytes(b, body)
	}
	if b, err = opts.MarshalAppend(b, &memorypb.MemoryDump{Stats: dumpStats(s)}); err != nil {
		return nil, fmt.Errorf("encoding a MemoryDump: %w", err)
	}
	return b, nil
}

// chunkField is MemoryDump's field number for its chunks.
const chunkField protowire.Number = 3

// dumpHead is the MemoryDump's fields before its chunks: the allocator's
// name and the bin summaries.
func dumpHead(s *Snapshot) *memorypb.MemoryDump {
	md := &memorypb.MemoryDump{AllocatorName: validUTF8(s.AllocatorName)}
	for _, b := range s.Bins() {
		md.BinSummary = append(md.BinSummary, &memorypb.BinSummary{
			Bin:              int32(b.Bin),
			TotalBytesInUse:  int64(min(b.BytesInUse, math.MaxInt64)),
			TotalBytesInBin:  int64(min(b.BytesInBin, math.MaxInt64)),
			TotalChunksInUse: b.ChunksInUse,
			TotalChunksInBin: b.TotalChunks,
		})
	}
	return md
}

// appendChunk appends c's MemChunk fields to b, as proto.Marshal encodes
// the message chunkMsg fills from c: the fields in number order, those at
// their zero value left out (proto3), an int32 or int64 as the varint of
// its 64-bit two's complement. Writing the fields directly rather than
// through the message's reflection takes a pool's whole dump from about
// 225 ns a chunk to about 70 (BenchmarkMarshal).
func appendChunk(b []byte, c Chunk) ([]byte, error) {
	if c.Size > math.MaxInt64 || c.Requested > math.MaxInt64 {
		return b, fmt.Errorf("encoding a MemoryDump: chunk at %#x: size %d or requested size %d does not fit an int64", c.Addr, c.Size, c.Requested)
	}
	varint := func(n protowire.Number, v uint64) {
		if v != 0 {
			b = protowire.AppendTag(b, n, protowire.VarintType)
			b = protowire.AppendVarint(b, v)
		}
	}
	bin := int64(-1)
	if !c.InUse {
		bin = int64(BinNumForSize(c.Size))
	}
	varint(1, c.Addr)
	varint(2, c.Size)
	varint(3, c.Requested)
	varint(4, uint64(bin))
	if c.OpName != "" {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendString(b, validUTF8(c.OpName))
	}
	varint(6, c.FreedAtCount)
	varint(7, c.ActionCount)
	varint(8, protowire.EncodeBool(c.InUse))
	varint(9, c.StepID)
	return b, nil
}

// dumpStats is the MemoryDump's stats, after its chunks.
func dumpStats(s *Snapshot) *memorypb.MemAllocatorStats {
	frag := s.Stats.Fragmentation
	if frag == 0 {
		frag = s.Summarize().TFFragmentation
	}
	return &memorypb.MemAllocatorStats{
		NumAllocs:           s.Stats.NumAllocs,
		BytesInUse:          s.Stats.BytesInUse,
		PeakBytesInUse:      s.Stats.PeakBytesInUse,
		LargestAllocSize:    s.Stats.LargestAllocSize,
		FragmentationMetric: float32(frag),
	}
}

// errEmptyDump is Unmarshal's error for bytes that decode to a MemoryDump
// with nothing in it: TF never writes one, and most short non-protobuf input
// decodes to it.
var errEmptyDump = errors.New("empty MemoryDump: no allocator name, bins or chunks")

// Unmarshal decodes a MemoryDump protobuf, as TF writes it when
// TF_BFC_MEMORY_DUMP is set or as Marshal encodes it. Chunks come out sorted
// by address; Regions, the memory limit and the pool size stay zero, since the
// dump does not record them (PoolRegions infers regions from gaps between
// chunks). Stats.Fragmentation is the recorded fragmentation_metric. The bin
// summaries are not kept: Bins recomputes them from the chunks. The size
// history (snap_shot, TENSORFLOW_MEM_DEBUG builds only) is dropped.
//
// Unmarshal fails on bytes that are not a protobuf, on a dump with nothing in
// it, on negative sizes, and on chunks that overlap.
func Unmarshal(b []byte) (*Snapshot, error) {
	var md memorypb.MemoryDump
	if err := proto.Unmarshal(b, &md); err != nil {
		return nil, fmt.Errorf("decoding a MemoryDump: %w", err)
	}
	if md.GetAllocatorName() == "" && len(md.GetBinSummary()) == 0 && len(md.GetChunk()) == 0 {
		return nil, fmt.Errorf("decoding a MemoryDump: %w", errEmptyDump)
	}
	s := &Snapshot{AllocatorName: md.GetAllocatorName()}
	for i, c := range md.GetChunk() {
		if c.GetSize() < 0 || c.GetRequestedSize() < 0 {
			return nil, fmt.Errorf("decoding a MemoryDump: chunk %d at %#x: negative size %d or requested size %d",
				i, c.GetAddress(), c.GetSize(), c.GetRequestedSize())
		}
		s.Chunks = append(s.Chunks, Chunk{
			Addr:         c.GetAddress(),
			Size:         uint64(c.GetSize()),
			Requested:    uint64(c.GetRequestedSize()),
			InUse:        c.GetInUse(),
			Bin:          int(c.GetBin()),
			OpName:       c.GetOpName(),
			StepID:       c.GetStepId(),
			ActionCount:  c.GetActionCount(),
			FreedAtCount: c.GetFreedAtCount(),
		})
	}
	slices.SortStableFunc(s.Chunks, byAddr)
	st := md.GetStats()
	s.Stats = Stats{
		NumAllocs:        st.GetNumAllocs(),
		BytesInUse:       st.GetBytesInUse(),
		PeakBytesInUse:   st.GetPeakBytesInUse(),
		LargestAllocSize: st.GetLargestAllocSize(),
		Fragmentation:    float64(st.GetFragmentationMetric()),
	}
	if math.IsNaN(s.Stats.Fragmentation) || math.IsInf(s.Stats.Fragmentation, 0) {
		s.Stats.Fragmentation = 0 // TF's 0/0 on a full pool
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("decoding a MemoryDump: %w", err)
	}
	return s, nil
}

// validUTF8 replaces s's invalid UTF-8 sequences with U+FFFD.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
