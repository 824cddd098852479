#!/usr/bin/env bash
# Nsight Compute profile of TBD kernels on a GPU machine, from binaries staged in a
# folder (the kestrel binary; default .gpu/): one launch of each named kernel inside
# `kestrel bench --only tbd`, the full section set, then the details page and the
# per-SASS-instruction warp-stall samples as CSV (what docs/tbd-gpu.md's fifth round
# read). Usage: scripts/tbd-ncu.sh NAME FILTER [NAME FILTER ...], e.g.
#   STAGED=.gpu/tbd scripts/tbd-ncu.sh late late2/plain/unroll/f32/32x16/
# FILTER is a part of a kernel name (KESTREL_BENCH_TBD). Results go to $OUT (or /tmp/out).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top/${STAGED:-.gpu}"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export KESTREL_CACHE_DIR=/tmp/kestrel-cache
if ! ldconfig -p | grep -q 'libnvrtc.so '; then
  lib=$(ls /usr/local/cuda*/lib64/libnvrtc.so* /usr/local/cuda*/targets/*/lib/libnvrtc.so* 2>/dev/null | head -1)
  if [ -n "$lib" ]; then mkdir -p /tmp/nvlib; ln -sf "$lib" /tmp/nvlib/libnvrtc.so; export LD_LIBRARY_PATH=/tmp/nvlib:$(dirname "$lib"):${LD_LIBRARY_PATH:-}; fi
fi
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
while [ $# -ge 2 ]; do
  name=$1; filt=$2; shift 2
  # --clock-control none: the clocks are left as they are (the machine's rules).
  KESTREL_BENCH_GPU_ONLY=1 KESTREL_BENCH_TBD="$filt" timeout 240 "$NCU" --clock-control none \
    -k regex:'tbd_' --launch-skip 3 --launch-count 1 --set full --import-source no \
    -o "$OUT/$name" -f ./kestrel bench --only tbd > "$OUT/$name.run.log" 2>&1
  echo "$name: exit $?"
  "$NCU" -i "$OUT/$name.ncu-rep" --page details > "$OUT/$name.details.txt" 2>&1
  "$NCU" -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/$name.sass.csv" 2>&1
  rm -f "$OUT/$name.ncu-rep" "$OUT/$name.run.log"
done
