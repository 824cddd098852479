#!/usr/bin/env bash
# Runs every staged test executable (GPU tests required), the GPU benchmarks and the
# demo on a GPU machine, from a folder staged by ../shared/tools/stage-gpu (.gpu/).
# Logs and JSON lines go to $OUT (or /tmp/out). Usage: scripts/gpu-check.sh [quick]
set -u
cd "$(dirname "$0")/../.gpu"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export KESTREL_REQUIRE_GPU=1 KESTREL_CACHE_DIR=/tmp/kestrel-cache
# cudarc looks for libnvrtc.so; link the versioned library if that is all there is.
if ! ldconfig -p | grep -q 'libnvrtc.so '; then
  lib=$(ls /usr/local/cuda*/lib64/libnvrtc.so* /usr/local/cuda*/targets/*/lib/libnvrtc.so* 2>/dev/null | head -1)
  [ -z "$lib" ] && lib=$(python3 -c 'import nvidia.cuda_nvrtc,os,glob;print(glob.glob(os.path.join(list(nvidia.cuda_nvrtc.__path__)[0],"lib","libnvrtc.so*"))[0])' 2>/dev/null)
  if [ -n "$lib" ]; then mkdir -p /tmp/nvlib; ln -sf "$lib" /tmp/nvlib/libnvrtc.so; export LD_LIBRARY_PATH=/tmp/nvlib:$(dirname "$lib"):${LD_LIBRARY_PATH:-}; fi
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
for t in tests/*; do
  # The CLI tests need this machine's binary path, and the cpu executable needs no GPU:
  # CI runs both.
  case "$(basename "$t")" in suite*|cli*|cpu*) continue;; esac
  echo "== $t" >> "$OUT/tests.log"
  # With a cold kernel cache the gpu executable compiles for minutes (NVRTC, on the host's
  # cores): on a 16-core H200 host 4 threads took over 420 s, 12 threads 242 s.
  timeout 540 "$t" --test-threads=12 >> "$OUT/tests.log" 2>&1; rc=$?
  printf '%-40s exit %s  %s\n' "$(basename "$t")" "$rc" "$(grep -E '^test result' "$OUT/tests.log" | tail -1)"
done
grep -E -A3 "panicked|FAILED" "$OUT/tests.log" | head -30
q=""; [ "${1:-}" = quick ] && q="--quick"
timeout 200 ./kestrel bench --only cuda $q > "$OUT/bench-cuda.log" 2>&1; echo "bench cuda exit $?"
KESTREL_BENCH_GPU_ONLY=1 timeout 150 ./kestrel bench --only parallel --quick > "$OUT/bench-parallel.log" 2>&1; echo "bench parallel exit $?"
KESTREL_BENCH_PAR_MULTI=1 timeout 300 ./kestrel bench --only parallel > "$OUT/bench-parallel-multi.log" 2>&1; echo "bench parallel multi-GPU exit $?"; grep -v '^{' "$OUT/bench-parallel-multi.log" | tail -8
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then for t in tests/parallel_multi_gpu-*; do KESTREL_REQUIRE_GPU=2 timeout 300 "$t" > "$OUT/tests-2gpu.log" 2>&1; echo "$(basename "$t") (KESTREL_REQUIRE_GPU=2) exit $?  $(grep -E '^test result' "$OUT/tests-2gpu.log" | tail -1)"; done; fi
timeout 400 ./kestrel bench --only tbd $q > "$OUT/bench-tbd.log" 2>&1; echo "bench tbd exit $?"
KESTREL_BENCH_GPU_ONLY=1 timeout 300 ./kestrel bench --only likelihood $q > "$OUT/bench-likelihood.log" 2>&1; echo "bench likelihood exit $?"
(cd /tmp && timeout 60 "$OLDPWD/kestrel" demo --plot "$OUT/demo.svg") > "$OUT/demo.log" 2>&1; echo "demo exit $?"
KESTREL_BENCH_GPU_ONLY=1 timeout 300 ./kestrel bench --only particle $q > "$OUT/bench-particle.log" 2>&1; echo "bench particle exit $?"
(cd /tmp && timeout 120 "$OLDPWD/kestrel" demo --pf --steps 1000 --particles 1000000 --device cuda --plot "$OUT/demo-pf.svg") > "$OUT/demo-pf.log" 2>&1; echo "demo --pf exit $?"
grep -h '^{' "$OUT"/bench-*.log > "$OUT/bench.jsonl"
grep -v '^{' "$OUT/bench-cuda.log" | tail -25; grep -v '^{' "$OUT/bench-parallel.log" | tail -25; grep -v '^{' "$OUT/bench-tbd.log" | tail -40; cat "$OUT/demo.log"; grep -v '^{' "$OUT/bench-particle.log" | tail -30; cat "$OUT/demo-pf.log"; grep -v '^{' "$OUT/bench-likelihood.log" | tail -40
