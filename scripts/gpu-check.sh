#!/usr/bin/env bash
# gpu-check: the device check of --space cuda. Builds bfcsim without cgo
# (CGO_ENABLED=0: no CUDA toolkit, no C compiler; it links only the C library,
# whose loader brings in the CUDA driver at run time, so it is as static as a
# binary that loads libcuda.so.1 can be) and, on a machine with an NVIDIA GPU,
# measures the GPU's calls (bfcsim calibrate) and replays the bundled traces
# and two of the H100 recordings on it, one allocator at a time, printing the
# device time the calls took against the cost model's figure for them.
#
#   scripts/gpu-check.sh [OUTDIR]      (default: gpu-check-out)
#
# Without a GPU it builds the binary, says so and exits 0. Nothing needs Go on
# the GPU machine: build there with Go, or copy bin/bfcsim beside this script.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-check-out}
bin=${BFCSIM:-bin/bfcsim}
mkdir -p "$out" "$(dirname "$bin")"

if command -v go >/dev/null 2>&1; then
  CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/bfcsim
  echo "built $bin (CGO_ENABLED=0)"
fi
[ -x "$bin" ] || { echo "gpu-check: no $bin, and no Go to build it" >&2; exit 1; }

# The GPU's own calls, and the cost model fitted to them.
if ! "$bin" calibrate --space cuda -o "$out/costs.json" | tee "$out/calibrate.txt"; then
  echo "gpu-check: no usable GPU here (above); built $bin only"
  exit 0
fi

# Each replay: the measured device time beside the model's (defaults: an
# H100's), then the same with the costs just measured.
traces=(traces/transformer-train.jsonl traces/transformer-infer.jsonl traces/cnn-infer.jsonl
        traces/random.jsonl traces/fragmenter.jsonl traces/pytorch-train.jsonl)
recordings=(traces/h100/train-default.pickle.gz traces/h100/resnet-expandable.pickle.gz)
summary="$out/summary.txt"
: > "$summary"
run() { # trace allocator [flags...]
  local t=$1 a=$2; shift 2
  local name; name=$(basename "$t"); name=${name%%.*}
  local line
  if ! line=$("$bin" replay "$t" --space cuda -a "$a" -q "$@" | tee "$out/$name-$a.txt" | grep "device calls took"); then
    line="$a: (no device calls)"
  fi
  printf '%-22s %s\n' "$name" "$line" | tee -a "$summary"
}
for t in "${traces[@]}"; do
  for a in bfc pytorch naive arena aligned; do
    run "$t" "$a"
  done
done
for t in "${recordings[@]}"; do
  run "$t" pytorch
  run "$t" bfc
done
echo
echo "with the costs measured here (--costs $out/costs.json):" | tee -a "$summary"
for t in "${traces[@]:0:2}"; do
  run "$t" pytorch --costs "$out/costs.json"
done
echo "gpu-check: done; $summary"
