package pytorchoom

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// printed is each printed figure of the fixtures in bytes, worked out
// apart from the parser (decimal arithmetic, rounded half up).
var printed = map[string]uint64{
	"0 bytes":    0,
	"64.00 MiB":  67108864,
	"10.92 GiB":  11725260718,
	"10.21 GiB":  10962904023,
	"17.38 MiB":  18224251,
	"93.44 MiB":  97978941,
	"2.00 GiB":   2147483648,
	"15.90 GiB":  17072495002,
	"14.62 GiB":  15698105467,
	"358.00 MiB": 375390208,
	"15.05 GiB":  16159814451,
	"512.00 MiB": 536870912,
	"23.70 GiB":  25447681229,
	"11.62 GiB":  12476879995,
	"11.41 GiB":  12251394212,
	"11.85 GiB":  12723840614,
	"11.80 GiB":  12670153523,
	"1.46 GiB":   1567663063,
	"11.99 GiB":  12874164470,
	"8.71 GiB":   9352291287,
	"10.94 GiB":  11746735555,
	"298.00 MiB": 312475648,
	"44.35 GiB":  47620449894,
	"12.06 MiB":  12645827,
	"8.06 GiB":   8654359101,
	"36.27 GiB":  38944615956,
	"35.41 GiB":  38021197988,
	"212.35 MiB": 222665114,
	"1.54 GiB":   1653562409,
	"79.18 GiB":  85018877624,
	"1.02 GiB":   1095216660,
	"78.15 GiB":  83912923546,
	"77.22 GiB":  82914343649,
	"93.93 MiB":  98492744,
	"79.15 GiB":  84986665370,
	"1.35 GiB":   1449551462,
	"20.00 GiB":  21474836480,
	"6.50 GiB":   6979321856,
	"51.28 GiB":  55061480735,
	"50.52 GiB":  54245436948,
	"150.00 MiB": 157286400,
	"996.00 MiB": 1044381696,
	"44.43 GiB":  47706349240,
	"26.06 GiB":  27981711933,
	"18.35 GiB":  19703162470,
	"17.69 GiB":  18994492867,
	"17.24 GiB":  18511309046,
	"259.88 MiB": 272503931,
	"978.00 MiB": 1025507328,
	"15.98 GiB":  17158394348,
	"630.00 MiB": 660602880,
	"14.87 GiB":  15966540923,
	"312.41 MiB": 327585628,
	"3.15 GiB":   3382286746,
	"39.56 GiB":  42477226557,
	"2.80 GiB":   3006477107,
	"36.61 GiB":  39309688177,
	"31.66 GiB":  33994666148,
	"4.11 GiB":   4413078897,
	"1.50 GiB":   1610612736,
	"93.10 GiB":  99965363814,
	"1.21 GiB":   1299227607,
	"91.86 GiB":  98633923953,
	"90.40 GiB":  97066260890,
	"118.25 MiB": 123994112,
	"76.00 MiB":  79691776,
	"79.19 GiB":  85029615043,
	"12.44 GiB":  13357348291,
	"1.20 GiB":   1288490189,
	"1.14 GiB":   1224065679,
	"17.00 MiB":  17825792,
	"18.63 MiB":  19534971,
	"1.16 GiB":   1245540516,
	"31.36 GiB":  33672543601,
	"471.69 MiB": 494602813,
	"4.83 GiB":   5186173010,
	"514.00 MiB": 538968064,
	"7.25 GiB":   7784628224,
	"1.18 GiB":   1267015352,
	"9.07 GiB":   9738838344,
	"768.00 MiB": 805306368,
	"6.12 GiB":   6571299963,
	"11.47 GiB":  12315818721,
	"18.13 GiB":  19466939269,
	"45.23 GiB":  48565342700,
	"2.10 GiB":   2254857830,
	"4.00 GiB":   4294967296,
	"15.11 GiB":  16224238961,
	"10.62 GiB":  11403138171,
	"3.80 GiB":   4080218931,
	"1.25 GiB":   1342177280,
	"2.50 GiB":   2684354560,
	"11.78 GiB":  12648678687,
	"12.06 GiB":  12949326397,
	"3.82 GiB":   4101693768,
	"2.71 GiB":   2909840343,
	"11.17 GiB":  11993696174,
	"7.79 GiB":   8364448809,
	"6.88 GiB":   7387343749,
	"6.94 GiB":   7451768259,
	"23.65 GiB":  25393994138,
	"23.62 GiB":  25361781883,
	"22.91 GiB":  24599425188,
	"3.40 GB":    3650722202,
	"14.75 GB":   15837691904,
	"18.13 GB":   19466939269,
	"17.95 GB":   19273665741,
	"24.00 MiB":  25165824,
	"12.44 MiB":  13044285,
	"95.31 MiB":  99939779,
	"7.06 MiB":   7402947,
	"104.00 MiB": 109051904,
	"50.00 MiB":  52428800,
	"31.44 MiB":  32967229,
	"18.44 MiB":  19335741,
	"254.73 MiB": 267103764,
	"256.00 KB":  262144,
	"256.00 MB":  268435456,
}

// derivedSum and derivedDiff mark an expected figure as computed from two
// printed ones.
func derivedSum(a, b string) string  { return "=" + a + "+" + b }
func derivedDiff(a, b string) string { return "=" + a + "-" + b }

// wantBytes is the bytes of an expected figure: printed, or derived.
func wantBytes(t *testing.T, want string) uint64 {
	t.Helper()
	if rest, ok := strings.CutPrefix(want, "="); ok {
		if a, b, ok := strings.Cut(rest, "+"); ok {
			return wantBytes(t, a) + wantBytes(t, b)
		}
		a, b, _ := strings.Cut(rest, "-")
		return wantBytes(t, a) - wantBytes(t, b)
	}
	n, ok := printed[want]
	require.True(t, ok, "no bytes for %q in the table", want)
	return n
}

type wantProc struct {
	pid   int64
	bytes string
}

type fixture struct {
	file      string
	format    Format
	versions  string
	exception string
	device    string
	gpu       int
	line      int
	endLine   int
	messages  int
	request   uint64 // bytes, literally
	reqText   string
	// figures by JSON name: the printed figure, "=a+b" or "=a-b" for a
	// derived one, "" for none.
	figures    map[string]string
	others     []wantProc // nil: no process list
	selfListed bool
	advice     string
	confVar    string
	truncated  bool
	pool       string // MPS
	startsAt   string // a partial paste
	verdict    Verdict
	confident  bool
}

var fixtures = []fixture{
	{
		file: "pytorch-1.0-cached.txt", format: FormatCached, versions: "1.0–1.3", exception: "RuntimeError", device: "CUDA",
		gpu: 0, line: 11, endLine: 11, messages: 1, request: 67108864, reqText: "Tried to allocate 64.00 MiB",
		figures: map[string]string{"total_capacity": "10.92 GiB", "free": "17.38 MiB", "allocated": "10.21 GiB",
			"reserved": derivedSum("10.21 GiB", "93.44 MiB"), "reserved_unallocated": "93.44 MiB"},
		verdict: Fragmentation, confident: true,
	},
	{
		file: "pytorch-1.4-reserved.txt", format: FormatReserved, versions: "1.4–1.12", exception: "RuntimeError", device: "CUDA",
		gpu: 1, line: 6, endLine: 6, messages: 1, request: 2147483648, reqText: "Tried to allocate 2.00 GiB",
		figures: map[string]string{"total_capacity": "15.90 GiB", "free": "358.00 MiB", "allocated": "14.62 GiB",
			"reserved": "15.05 GiB", "reserved_unallocated": derivedDiff("15.05 GiB", "14.62 GiB")},
		verdict: NoRoom, confident: true,
	},
	{
		file: "pytorch-1.8-allowed.txt", format: FormatReserved, versions: "1.8–1.12", exception: "RuntimeError", device: "CUDA",
		gpu: 0, line: 1, endLine: 1, messages: 1, request: 536870912, reqText: "Tried to allocate 512.00 MiB",
		figures: map[string]string{"total_capacity": "23.70 GiB", "free": "11.41 GiB", "allocated": "11.62 GiB",
			"reserved": "11.80 GiB", "reserved_unallocated": derivedDiff("11.80 GiB", "11.62 GiB"), "allowed": "11.85 GiB"},
		verdict: Limit, confident: true,
	},
	{
		file: "pytorch-1.13-quoted.txt", format: FormatReserved, versions: "1.13–2.0", exception: "torch.cuda.OutOfMemoryError", device: "CUDA",
		gpu: 0, line: 4, endLine: 9, messages: 1, request: 1567663063, reqText: "Tried to allocate 1.46 GiB",
		figures: map[string]string{"total_capacity": "11.99 GiB", "free": "0 bytes", "allocated": "8.71 GiB",
			"reserved": "10.94 GiB", "reserved_unallocated": derivedDiff("10.94 GiB", "8.71 GiB")},
		advice: "max_split_size_mb", confVar: "PYTORCH_CUDA_ALLOC_CONF",
		verdict: Fragmentation, confident: true,
	},
	{
		file: "pytorch-2.1-capacty.txt", format: FormatCapacty, versions: "2.1", exception: "torch.cuda.OutOfMemoryError", device: "CUDA",
		gpu: 0, line: 4, endLine: 4, messages: 1, request: 312475648, reqText: "Tried to allocate 298.00 MiB",
		figures: map[string]string{"total_capacity": "44.35 GiB", "free": "12.06 MiB", "allocated": "35.41 GiB",
			"reserved": derivedSum("35.41 GiB", "212.35 MiB"), "reserved_unallocated": "212.35 MiB", "process_in_use": "36.27 GiB"},
		others: []wantProc{{6324, "8.06 GiB"}}, selfListed: true,
		advice: "max_split_size_mb", confVar: "PYTORCH_CUDA_ALLOC_CONF",
		verdict: OtherProcess, confident: true,
	},
	{
		file: "pytorch-2.2-traceback.txt", format: FormatCapacity, versions: "2.2 and later", exception: "torch.OutOfMemoryError", device: "CUDA",
		gpu: 0, line: 8, endLine: 8, messages: 1, request: 1653562409, reqText: "Tried to allocate 1.54 GiB",
		figures: map[string]string{"total_capacity": "79.18 GiB", "free": "1.02 GiB", "allocated": "77.22 GiB",
			"reserved": derivedSum("77.22 GiB", "93.93 MiB"), "reserved_unallocated": "93.93 MiB", "process_in_use": "78.15 GiB"},
		others: []wantProc{}, selfListed: true,
		advice: "expandable_segments", confVar: "PYTORCH_CUDA_ALLOC_CONF",
		verdict: NoRoom, confident: true,
	},
	{
		file: "pytorch-2.2-torchrun.txt", format: FormatCapacity, versions: "2.2 and later", exception: "torch.OutOfMemoryError", device: "CUDA",
		gpu: 1, line: 9, endLine: 18, messages: 2, request: 2147483648, reqText: "Tried to allocate 2.00 GiB",
		figures: map[string]string{"total_capacity": "79.15 GiB", "free": "1.35 GiB", "allocated": "50.52 GiB",
			"reserved": derivedSum("50.52 GiB", "150.00 MiB"), "reserved_unallocated": "150.00 MiB", "process_in_use": "51.28 GiB"},
		others: []wantProc{{41001, "20.00 GiB"}, {41002, "6.50 GiB"}}, selfListed: true,
		advice: "expandable_segments", confVar: "PYTORCH_CUDA_ALLOC_CONF",
		verdict: OtherProcess, confident: true,
	},
	{
		file: "pytorch-2.2-limit-crlf.txt", format: FormatCapacity, versions: "2.2 and later", exception: "torch.OutOfMemoryError", device: "CUDA",
		gpu: 0, line: 2, endLine: 2, messages: 1, request: 1044381696, reqText: "Tried to allocate 996.00 MiB",
		figures: map[string]string{"total_capacity": "44.43 GiB", "free": "26.06 GiB", "allocated": "17.24 GiB",
			"reserved": derivedSum("17.24 GiB", "259.88 MiB"), "reserved_unallocated": "259.88 MiB", "process_in_use": "18.35 GiB",
			"allowed": "17.69 GiB"},
		others: []wantProc{}, selfListed: true,
		advice: "expandable_segments", confVar: "PYTORCH_CUDA_ALLOC_CONF",
		verdict: Limit, confident: true,
	},
	{
		file: "pytorch-2.2-hip.txt", format: FormatCapacity, versions: "2.2 and later", exception: "torch.OutOfMemoryError", device: "HIP",
		gpu: 0, line: 4, endLine: 4, messages: 1, request: 1025507328, reqText: "Tried to allocate 978.00 MiB",
		figures: map[string]string{"total_capacity": "15.98 GiB", "free": "630.00 MiB", "allocated": "14.87 GiB",
			"reserved": derivedSum("14.87 GiB", "312.41 MiB"), "reserved_unallocated": "312.41 MiB"},
		advice: "expandable_segments", confVar: "PYTORCH_HIP_ALLOC_CONF",
		verdict: NoRoom, confident: true,
	},
	{
		file: "pytorch-2.2-terminal-wrap.txt", format: FormatCapacity, versions: "2.2 and later", exception: "torch.OutOfMemoryError", device: "CUDA",
		gpu: 0, line: 2, endLine: 9, messages: 1, request: 3382286746, reqText: "Tried to allocate 3.15 GiB",
		figures: map[string]string{"total_capacity": "39.56 GiB", "free": "2.80 GiB", "allocated": "31.66 GiB",
			"reserved": derivedSum("31.66 GiB", "4.11 GiB"), "reserved_unallocated": "4.11 GiB", "process_in_use": "36.61 GiB"},
		others: []wantProc{}, selfListed: true,
		advice: "expandable_segments", confVar: "PYTORCH_CUDA_ALLOC_CONF",
		verdict: Fragmentation, confident: true,
	},
	{
		file: "pytorch-2.2-container.txt", format: FormatCapacity, versions: "2.2 and later", exception: "torch.OutOfMemoryError", device: "CUDA",
		gpu: 1, line: 2, endLine: 2, messages: 1, request: 1610612736, reqText: "Tried to allocate 1.50 GiB",
		figures: map[string]string{"total_capacity": "93.10 GiB", "free": "1.21 GiB", "allocated": "90.40 GiB",
			"reserved": derivedSum("90.40 GiB", "118.25 MiB"), "reserved_unallocated": "118.25 MiB"},
		others: []wantProc{{2751893, "91.86 GiB"}},
		advice: "expandable_segments", confVar: "PYTORCH_CUDA_ALLOC_CONF",
		verdict: NoRoom, confident: true,
	},
	{
		file: "pytorch-2.x-private-pools.txt", format: FormatCapacity, versions: "2.2 and later", exception: "torch.OutOfMemoryError", device: "CUDA",
		gpu: 0, line: 1, endLine: 1, messages: 1, request: 79691776, reqText: "Tried to allocate 76.00 MiB",
		figures: map[string]string{"total_capacity": "79.19 GiB", "free": "12.44 GiB", "allocated": "1.14 GiB",
			"reserved": derivedSum("1.14 GiB", "18.63 MiB"), "reserved_unallocated": "18.63 MiB", "allowed": "1.20 GiB",
			"private_pools": "17.00 MiB"},
		advice: "expandable_segments", confVar: "PYTORCH_ALLOC_CONF",
		verdict: Limit, confident: true,
	},
	{
		file: "pytorch-2.2-truncated.txt", format: FormatCapacity, versions: "2.2 and later", exception: "torch.OutOfMemoryError", device: "CUDA",
		gpu: 0, line: 2, endLine: 3, messages: 1, request: 1245540516, reqText: "Tried to allocate 1.16 GiB",
		figures:   map[string]string{"total_capacity": "31.36 GiB", "free": "471.69 MiB"},
		truncated: true,
		verdict:   Fragmentation, confident: false,
	},
	{
		file: "pytorch-mps-limit.txt", format: FormatMPS, versions: "1.12.1 and later", exception: "RuntimeError", device: "MPS",
		gpu: -1, line: 4, endLine: 4, messages: 1, request: 1095216660, reqText: "Tried to allocate 1.02 GiB on private pool.",
		figures: map[string]string{"reserved": "6.12 GiB", "other_allocations": "11.47 GiB", "allowed": "18.13 GiB",
			"driver_allocated": derivedSum("6.12 GiB", "11.47 GiB")},
		advice: "high_watermark_ratio", confVar: "PYTORCH_MPS_HIGH_WATERMARK_RATIO", pool: "private",
		verdict: Limit, confident: true,
	},
	{
		file: "pytorch-mps-gb-quoted.txt", format: FormatMPS, versions: "1.12.1 and later", exception: "RuntimeError", device: "MPS",
		gpu: -1, line: 3, endLine: 6, messages: 1, request: 262144, reqText: "Tried to allocate 256.00 KB on shared pool.",
		figures: map[string]string{"reserved": "3.40 GB", "other_allocations": "14.75 GB", "allowed": "18.13 GB",
			"driver_allocated": derivedSum("3.40 GB", "14.75 GB")},
		advice: "high_watermark_ratio", confVar: "PYTORCH_MPS_HIGH_WATERMARK_RATIO", pool: "shared",
		verdict: Limit, confident: true,
	},
	{
		file: "pytorch-mps-no-limit.txt", format: FormatMPS, versions: "1.12.1 and later", exception: "RuntimeError", device: "MPS",
		gpu: -1, line: 3, endLine: 3, messages: 1, request: 4294967296, reqText: "Tried to allocate 4.00 GiB on private pool.",
		figures: map[string]string{"reserved": "45.23 GiB", "other_allocations": "2.10 GiB",
			"driver_allocated": derivedSum("45.23 GiB", "2.10 GiB")},
		pool:    "private",
		verdict: NoRoom, confident: true,
	},
	{
		file: "pytorch-mps-1.12.txt", format: FormatMPSEarly, versions: "1.12", exception: "RuntimeError", device: "MPS",
		gpu: -1, line: 4, endLine: 4, messages: 1, request: 268435456, reqText: "Tried to allocate 256.00 MB on private pool.",
		figures: map[string]string{"driver_allocated": "17.95 GB", "allowed": "18.13 GB"},
		advice:  "high_watermark_ratio", confVar: "PYTORCH_MPS_HIGH_WATERMARK_RATIO", pool: "private",
		verdict: Limit, confident: true,
	},
	{
		file: "pytorch-xpu-2.5.txt", format: FormatXPU, versions: "2.5–2.8", exception: "torch.OutOfMemoryError", device: "XPU",
		gpu: 0, line: 4, endLine: 4, messages: 1, request: 1342177280, reqText: "Tried to allocate 1.25 GiB",
		figures: map[string]string{"total_capacity": "15.11 GiB", "allocated": "10.62 GiB",
			"reserved": derivedSum("10.62 GiB", "3.80 GiB"), "reserved_unallocated": "3.80 GiB"},
		advice:  "empty_cache",
		verdict: Fragmentation, confident: true,
	},
	{
		file: "ipex-xpu.txt", format: FormatIPEX, versions: "intel-extension-for-pytorch", exception: "RuntimeError", device: "XPU",
		gpu: 0, line: 2, endLine: 2, messages: 1, request: 2684354560, reqText: "Tried to allocate 2.50 GiB",
		figures: map[string]string{"total_capacity": "15.11 GiB", "allocated": "11.78 GiB",
			"reserved": "12.06 GiB", "reserved_unallocated": derivedDiff("12.06 GiB", "11.78 GiB")},
		verdict: OtherProcess, confident: false,
	},
	{
		file: "ipex-block-limit.txt", format: FormatIPEX, versions: "intel-extension-for-pytorch", exception: "RuntimeError", device: "XPU",
		gpu: 0, line: 4, endLine: 4, messages: 1, request: 5186173010, reqText: "Tried to allocate 4.83 GiB",
		figures: map[string]string{"total_capacity": "15.11 GiB", "allocated": "512.00 MiB",
			"reserved": "514.00 MiB", "reserved_unallocated": derivedDiff("514.00 MiB", "512.00 MiB")},
		verdict: Limit, confident: true,
	},
	{
		file: "pytorch-mps-source-literals.txt", format: FormatMPS, versions: "1.12.1 and later", device: "MPS",
		gpu: -1, line: 3, endLine: 6, messages: 1, request: 805306368, reqText: `Tried to allocate 768.00 MiB on " private pool.`,
		figures: map[string]string{"reserved": "7.25 GiB", "other_allocations": "1.18 GiB", "allowed": "9.07 GiB",
			"driver_allocated": derivedSum("7.25 GiB", "1.18 GiB")},
		advice: "high_watermark_ratio", confVar: "PYTORCH_MPS_HIGH_WATERMARK_RATIO", pool: "private",
		verdict: Limit, confident: true,
	},
	{
		file: "pytorch-1.x-request-start.txt", format: FormatReserved, versions: "1.4–2.0",
		gpu: 0, line: 1, endLine: 1, messages: 1, request: 25165824, reqText: "Tried to allocate 24.00 MiB",
		figures: map[string]string{"total_capacity": "3.82 GiB", "free": "12.44 MiB", "allocated": "2.71 GiB",
			"reserved": "2.80 GiB", "reserved_unallocated": derivedDiff("2.80 GiB", "2.71 GiB")},
		startsAt: "the request",
		verdict:  Fragmentation, confident: true,
	},
	{
		file: "pytorch-1.x-parenthesis.txt", format: FormatReserved, versions: "1.4–2.0",
		gpu: 0, line: 1, endLine: 1, messages: 1,
		figures: map[string]string{"total_capacity": "11.17 GiB", "free": "7.06 MiB", "allocated": "95.31 MiB",
			"reserved": "104.00 MiB", "reserved_unallocated": derivedDiff("104.00 MiB", "95.31 MiB")},
		startsAt: `the parenthesis "(GPU N;"`,
		verdict:  OtherProcess, confident: false,
	},
	{
		file: "pytorch-1.x-unclosed.txt", format: FormatReserved, versions: "1.4–1.12", exception: "RuntimeError", device: "CUDA",
		gpu: 0, line: 1, endLine: 1, messages: 1, request: 52428800, reqText: "Tried to allocate 50.00 MiB",
		figures: map[string]string{"total_capacity": "7.79 GiB", "free": "31.44 MiB", "allocated": "6.88 GiB",
			"reserved": "6.94 GiB", "reserved_unallocated": derivedDiff("6.94 GiB", "6.88 GiB")},
		verdict: Fragmentation, confident: true,
	},
	{
		file: "pytorch-2.2-capacity-start.txt", format: FormatCapacity, versions: "2.2 and later",
		gpu: 0, line: 1, endLine: 1, messages: 1,
		figures: map[string]string{"total_capacity": "23.65 GiB", "free": "18.44 MiB", "allocated": "22.91 GiB",
			"reserved": derivedSum("22.91 GiB", "254.73 MiB"), "reserved_unallocated": "254.73 MiB", "process_in_use": "23.62 GiB"},
		others: []wantProc{}, selfListed: true,
		startsAt: `"GPU N has a total capacity"`,
		verdict:  NoRoom, confident: false,
	},
}

func readFixture(t *testing.T, file string) *Input {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", file))
	require.NoError(t, err)
	defer f.Close()
	in, err := Read(f, file)
	require.NoError(t, err)
	return in
}

// Every fixture gives its exact figures, where each came from, and its
// verdict.
func TestPyTorchOOMFixtures(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			in := readFixture(t, fx.file)
			m := in.Last
			assert.Equal(t, fx.messages, in.Count)
			assert.Equal(t, fx.format, m.Format)
			assert.Equal(t, fx.versions, m.versions())
			assert.Equal(t, fx.exception, m.Exception)
			assert.Equal(t, fx.device, m.Device)
			assert.Equal(t, fx.gpu, m.GPU)
			assert.Equal(t, fx.line, m.Line)
			assert.Equal(t, fx.endLine, m.EndLine)
			assert.Equal(t, fx.truncated, m.Truncated, m.Cut)

			assert.Equal(t, fx.pool, m.Pool)
			assert.Equal(t, fx.startsAt, m.StartsAt)
			if fx.reqText == "" {
				assert.Nil(t, m.Request, "the paste does not have the request")
			} else {
				require.NotNil(t, m.Request)
				assert.Equal(t, fx.request, m.Request.Bytes)
				assert.Equal(t, fx.reqText, m.Request.From)
				assert.GreaterOrEqual(t, m.Request.Line, fx.line)
				assert.LessOrEqual(t, m.Request.Line, fx.endLine)
			}

			for _, nf := range m.figures() {
				if nf.key == "request" {
					continue
				}
				want := fx.figures[nf.key]
				if want == "" {
					assert.Nil(t, nf.f, "%s: the message does not print it", nf.key)
					continue
				}
				if !assert.NotNil(t, nf.f, nf.key) {
					continue
				}
				assert.Equal(t, wantBytes(t, want), nf.f.Bytes, nf.key)
				if strings.HasPrefix(want, "=") {
					assert.NotEmpty(t, nf.f.Derived, "%s is derived", nf.key)
					assert.Zero(t, nf.f.Line, nf.key)
				} else {
					assert.Equal(t, want, nf.f.Printed, nf.key)
					assert.Empty(t, nf.f.Derived, nf.key)
					assert.Contains(t, nf.f.From, want, "%s: the clause holds the figure", nf.key)
					assert.GreaterOrEqual(t, nf.f.Line, fx.line, nf.key)
					assert.LessOrEqual(t, nf.f.Line, fx.endLine, nf.key)
				}
			}

			if fx.others == nil {
				assert.Nil(t, m.Others)
			} else {
				require.Len(t, m.Others, len(fx.others))
				for i, w := range fx.others {
					assert.Equal(t, w.pid, m.Others[i].PID)
					require.NotNil(t, m.Others[i].InUse)
					assert.Equal(t, wantBytes(t, w.bytes), m.Others[i].InUse.Bytes)
				}
			}
			assert.Equal(t, fx.selfListed, m.SelfListed)
			assert.Equal(t, fx.advice, m.Advice)
			assert.Equal(t, fx.confVar, m.ConfVar)

			e := Explain(m)
			assert.Equal(t, fx.verdict, e.Verdict, e.Reason)
			assert.Equal(t, fx.confident, e.Confident, "%s %v", e.Reason, e.CannotKnow)
			assert.NotEmpty(t, e.Advice)
			// The reason cites the request and the device's free memory,
			// or, for MPS, the limit; it never blames fragmentation with
			// nothing reserved but unallocated.
			if m.Request != nil {
				assert.Contains(t, e.Reason, m.Request.Printed)
			} else {
				assert.Contains(t, e.Reason, "does not have the request")
			}
			if m.Free != nil {
				assert.Contains(t, e.Reason, m.Free.Printed)
			}
			if m.Format.IsMPS() {
				assert.NotEqual(t, Fragmentation, e.Verdict)
				assert.Contains(t, e.Reason, "Metal")
				if m.Allowed != nil {
					assert.Contains(t, e.Reason, m.Allowed.Printed)
				}
			}
			if e.Verdict == Fragmentation && m.ReservedUnallocated != nil {
				assert.Positive(t, m.ReservedUnallocated.Max())
			}
			if !fx.confident {
				assert.NotEmpty(t, e.CannotKnow, "a verdict that is not confident says why")
			}
		})
	}
}

// The report's JSON has the spec's keys, null where the message does not
// say.
func TestPyTorchOOMReportJSONKeys(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			data, err := json.Marshal(NewReport(readFixture(t, fx.file)))
			require.NoError(t, err)
			var rep map[string]any
			require.NoError(t, json.Unmarshal(data, &rep))

			for _, k := range []string{"bfcsim_pytorch_oom", "format", "source", "request", "gpu", "pytorch", "figures", "explanation"} {
				assert.Contains(t, rep, k)
			}
			assert.Equal(t, fx.format.String(), rep["format"])
			if fx.reqText == "" {
				assert.Nil(t, rep["request"], "the request is null where the paste lacks it")
			} else {
				assert.Equal(t, float64(fx.request), rep["request"].(map[string]any)["bytes"])
			}

			py := rep["pytorch"].(map[string]any)
			for _, k := range []string{"total_capacity", "free", "allocated", "reserved", "reserved_unallocated", "allowed", "other_processes", "other_allocations"} {
				require.Contains(t, py, k)
				if k == "other_processes" {
					continue
				}
				if fx.figures[k] == "" {
					assert.Nil(t, py[k], "%s is null", k)
				} else {
					assert.Equal(t, float64(wantBytes(t, fx.figures[k])), py[k], k)
				}
			}
			if fx.others == nil {
				assert.Nil(t, py["other_processes"])
			} else {
				list := py["other_processes"].([]any)
				require.Len(t, list, len(fx.others))
				for i, w := range fx.others {
					p := list[i].(map[string]any)
					assert.Equal(t, float64(w.pid), p["pid"])
					assert.Equal(t, float64(wantBytes(t, w.bytes)), p["bytes"])
				}
			}

			figs := rep["figures"].(map[string]any)
			for _, k := range []string{"request", "total_capacity", "free", "allocated", "reserved", "reserved_unallocated", "allowed", "process_in_use", "private_pools"} {
				require.Contains(t, figs, k)
			}
			if fx.reqText != "" {
				assert.Equal(t, fx.reqText, figs["request"].(map[string]any)["from"])
			}

			ex := rep["explanation"].(map[string]any)
			assert.Equal(t, string(fx.verdict), ex["verdict"])
			assert.Contains(t, []any{"no-room", "other-process", "limit", "fragmentation"}, ex["verdict"])
			assert.Equal(t, fx.confident, ex["confident"])
			assert.NotEmpty(t, ex["reason"])
			for _, k := range []string{"rests_on", "cannot_know", "also", "advice"} {
				assert.IsType(t, []any{}, ex[k], k)
			}
			src := rep["source"].(map[string]any)
			assert.Equal(t, fx.versions, src["pytorch_versions"])
			assert.Equal(t, float64(fx.messages), src["messages"])
		})
	}
}

// Input without the allocator's message is an error that says what came
// closest.
func TestPyTorchOOMNoMessage(t *testing.T) {
	f, err := os.Open("testdata/not-allocator.txt")
	require.NoError(t, err)
	defer f.Close()
	_, err = Read(f, "x.txt")
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNoMessage))
	assert.Contains(t, err.Error(), "x.txt: no PyTorch out-of-memory message in 5 lines")
	assert.Contains(t, err.Error(), `line 4, "RuntimeError: CUDA error: out of memory"`)

	for _, text := range []string{
		"",
		"hello\n",
		"\x00\x01\x02",
		// Documentation that quotes the format, not a message.
		"PyTorch says CUDA out of memory. Tried to allocate X (GPU 0; ...)\n",
	} {
		_, err := Read(strings.NewReader(text), "t")
		assert.True(t, errors.Is(err, ErrNoMessage), "%q: %v", text, err)
	}
}

// A read error, such as a cancelled context, comes back wrapped.
func TestPyTorchOOMReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := Read(&failingReader{after: "torch.OutOfMemoryError: CUDA out of memory. Tried", err: boom}, "r")
	require.Error(t, err)
	assert.True(t, errors.Is(err, boom))
}

type failingReader struct {
	after string
	err   error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.after == "" {
		return 0, r.err
	}
	n := copy(p, r.after)
	r.after = r.after[n:]
	return n, nil
}
