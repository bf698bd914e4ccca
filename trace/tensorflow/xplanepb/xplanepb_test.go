package xplanepb_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bfcsim/bfcsim/trace/tensorflow/xplanepb"
)

func sampleSpace() *xplanepb.XSpace {
	return &xplanepb.XSpace{
		Planes: []*xplanepb.XPlane{{
			Id:   7,
			Name: "/device:GPU:0",
			EventMetadata: map[int64]*xplanepb.XEventMetadata{
				1: {Id: 1, Name: "MatMul", DisplayName: "matmul", Metadata: []byte{0xde, 0xad}, ChildId: []int64{2}},
				2: {Id: 2, Name: "MemcpyH2D", Stats: []*xplanepb.XStat{
					{MetadataId: 10, Value: &xplanepb.XStat_Int64Value{Int64Value: 4096}},
				}},
			},
			StatMetadata: map[int64]*xplanepb.XStatMetadata{
				10: {Id: 10, Name: "bytes", Description: "bytes moved"},
				11: {Id: 11, Name: "flops"},
				12: {Id: 12, Name: "occupancy"},
				13: {Id: 13, Name: "kernel"},
				14: {Id: 14, Name: "blob"},
				15: {Id: 15, Name: "ref"},
			},
			Stats: []*xplanepb.XStat{
				{MetadataId: 13, Value: &xplanepb.XStat_StrValue{StrValue: "H100"}},
			},
			Lines: []*xplanepb.XLine{{
				Id:          3,
				DisplayId:   4,
				Name:        "Stream #1",
				DisplayName: "Stream #1 (compute)",
				TimestampNs: 1_700_000_000_000_000_000,
				DurationPs:  5_000_000,
				Events: []*xplanepb.XEvent{
					{
						MetadataId: 1,
						Data:       &xplanepb.XEvent_OffsetPs{OffsetPs: 1500},
						DurationPs: 2000,
						Stats: []*xplanepb.XStat{
							{MetadataId: 10, Value: &xplanepb.XStat_Int64Value{Int64Value: -3}},
							{MetadataId: 11, Value: &xplanepb.XStat_Uint64Value{Uint64Value: 1 << 63}},
							{MetadataId: 12, Value: &xplanepb.XStat_DoubleValue{DoubleValue: 0.75}},
							{MetadataId: 13, Value: &xplanepb.XStat_StrValue{StrValue: "sgemm_128x64"}},
							{MetadataId: 14, Value: &xplanepb.XStat_BytesValue{BytesValue: []byte{0, 1, 2}}},
							{MetadataId: 15, Value: &xplanepb.XStat_RefValue{RefValue: 13}},
						},
					},
					{
						MetadataId: 2,
						Data:       &xplanepb.XEvent_NumOccurrences{NumOccurrences: 42},
						DurationPs: 9000,
					},
				},
			}},
		}},
		Errors:    []string{"e1"},
		Warnings:  []string{"w1", "w2"},
		Hostnames: []string{"host-a"},
	}
}

func TestRoundTrip(t *testing.T) {
	in := sampleSpace()
	b, err := proto.Marshal(in)
	require.NoError(t, err)

	var out xplanepb.XSpace
	require.NoError(t, proto.Unmarshal(b, &out))
	assert.True(t, proto.Equal(in, &out), "round trip differs")

	assert.Equal(t, []string{"e1"}, out.GetErrors())
	assert.Equal(t, []string{"w1", "w2"}, out.GetWarnings())
	assert.Equal(t, []string{"host-a"}, out.GetHostnames())

	require.Len(t, out.GetPlanes(), 1)
	p := out.GetPlanes()[0]
	assert.Equal(t, int64(7), p.GetId())
	assert.Equal(t, "/device:GPU:0", p.GetName())
	require.Len(t, p.GetStats(), 1)
	assert.Equal(t, "H100", p.GetStats()[0].GetStrValue())

	require.Len(t, p.GetEventMetadata(), 2)
	em := p.GetEventMetadata()[1]
	assert.Equal(t, "MatMul", em.GetName())
	assert.Equal(t, "matmul", em.GetDisplayName())
	assert.Equal(t, []byte{0xde, 0xad}, em.GetMetadata())
	assert.Equal(t, []int64{2}, em.GetChildId())
	require.Len(t, p.GetEventMetadata()[2].GetStats(), 1)
	assert.Equal(t, int64(4096), p.GetEventMetadata()[2].GetStats()[0].GetInt64Value())

	require.Len(t, p.GetStatMetadata(), 6)
	assert.Equal(t, "bytes", p.GetStatMetadata()[10].GetName())
	assert.Equal(t, "bytes moved", p.GetStatMetadata()[10].GetDescription())

	require.Len(t, p.GetLines(), 1)
	l := p.GetLines()[0]
	assert.Equal(t, int64(3), l.GetId())
	assert.Equal(t, int64(4), l.GetDisplayId())
	assert.Equal(t, "Stream #1", l.GetName())
	assert.Equal(t, "Stream #1 (compute)", l.GetDisplayName())
	assert.Equal(t, int64(1_700_000_000_000_000_000), l.GetTimestampNs())
	assert.Equal(t, int64(5_000_000), l.GetDurationPs())

	require.Len(t, l.GetEvents(), 2)
	e0, e1 := l.GetEvents()[0], l.GetEvents()[1]
	assert.Equal(t, int64(1), e0.GetMetadataId())
	assert.IsType(t, &xplanepb.XEvent_OffsetPs{}, e0.GetData())
	assert.Equal(t, int64(1500), e0.GetOffsetPs())
	assert.Equal(t, int64(2000), e0.GetDurationPs())
	assert.Equal(t, int64(2), e1.GetMetadataId())
	assert.IsType(t, &xplanepb.XEvent_NumOccurrences{}, e1.GetData())
	assert.Equal(t, int64(42), e1.GetNumOccurrences())
	assert.Zero(t, e1.GetOffsetPs())
	assert.Equal(t, int64(9000), e1.GetDurationPs())

	s := e0.GetStats()
	require.Len(t, s, 6)
	assert.Equal(t, int64(-3), s[0].GetInt64Value())
	assert.Equal(t, uint64(1<<63), s[1].GetUint64Value())
	assert.Equal(t, 0.75, s[2].GetDoubleValue())
	assert.Equal(t, "sgemm_128x64", s[3].GetStrValue())
	assert.Equal(t, []byte{0, 1, 2}, s[4].GetBytesValue())
	assert.Equal(t, uint64(13), s[5].GetRefValue())
	for i, want := range []int64{10, 11, 12, 13, 14, 15} {
		assert.Equal(t, want, s[i].GetMetadataId())
	}
}

// TestFieldNumbers pins the wire field numbers to upstream's xplane.proto, so
// that a regeneration from a different copy cannot silently change them.
func TestFieldNumbers(t *testing.T) {
	want := map[string]map[string]protowire.Number{
		"XSpace":         {"planes": 1, "errors": 2, "warnings": 3, "hostnames": 4},
		"XPlane":         {"id": 1, "name": 2, "lines": 3, "event_metadata": 4, "stat_metadata": 5, "stats": 6},
		"XLine":          {"id": 1, "display_id": 10, "name": 2, "display_name": 11, "timestamp_ns": 3, "duration_ps": 9, "events": 4},
		"XEvent":         {"metadata_id": 1, "offset_ps": 2, "num_occurrences": 5, "duration_ps": 3, "stats": 4},
		"XStat":          {"metadata_id": 1, "double_value": 2, "uint64_value": 3, "int64_value": 4, "str_value": 5, "bytes_value": 6, "ref_value": 7},
		"XEventMetadata": {"id": 1, "name": 2, "display_name": 4, "metadata": 3, "stats": 5, "child_id": 6},
		"XStatMetadata":  {"id": 1, "name": 2, "description": 3},
	}
	msgs := xplanepb.File_xplane_proto.Messages()
	assert.Equal(t, len(want), msgs.Len())
	for name, fields := range want {
		md := msgs.ByName(protoreflect.Name(name))
		require.NotNil(t, md, name)
		assert.Equal(t, "tensorflow.profiler."+name, string(md.FullName()))
		assert.Equal(t, len(fields), md.Fields().Len(), name)
		for f, num := range fields {
			fd := md.Fields().ByName(protoreflect.Name(f))
			if assert.NotNil(t, fd, "%s.%s", name, f) {
				assert.Equal(t, num, fd.Number(), "%s.%s", name, f)
			}
		}
	}
}
