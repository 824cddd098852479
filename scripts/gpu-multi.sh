#!/usr/bin/env bash
# On a GPU host with several GPUs, from the repository root, with .gpu/ staged by
# ../shared/tools/stage-gpu
# (the CLI, parallel_gpu, parallel_multi_gpu and gpu tests) and the wheels in .whl/
# (kestrel's abi3 wheel, and dask-cuda with its dependencies in .whl/dask/): the parts
# named as arguments, each under its own time limit, logs and records into $OUT.
#   tests    the GPU block split (parallel_gpu) and python/tests/test_dask_gpu.py
#   cuda     kestrel bench --only cuda, one GPU against 1, 2, 4... (KESTREL_BENCH_CUDA=multi),
#            B = $TRACKS (default 10^7) x 100 steps
#   parallel kestrel bench --only parallel, the time split and the split by direction
#            (KESTREL_BENCH_PAR_MULTI=1), T = 10^3 .. 10^7
#   dask     python -m kestrel.dask_bench --cuda-cluster (dask-cuda's LocalCUDACluster)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
nproc >> "$OUT/device.txt"
if [ ! -d /tmp/py/kestrel ]; then
  pip install -q --no-deps --no-index --target /tmp/py .whl/*.whl .whl/dask/*.whl > "$OUT/pip.log" 2>&1
fi
export PYTHONPATH=/tmp/py KESTREL_CLI=$PWD/.gpu/kestrel
for part in "$@"; do
  case $part in
    tests)
      for t in .gpu/tests/parallel_gpu-*; do
        timeout 300 "$t" --test-threads=4 > "$OUT/tests.log" 2>&1
        echo "parallel_gpu exit $? $(grep -E '^test result' "$OUT/tests.log" | tail -1)"
      done
      # The two-GPU tests: KESTREL_REQUIRE_GPU=2 makes a missing second GPU a failure.
      for t in .gpu/tests/parallel_multi_gpu-*; do
        KESTREL_REQUIRE_GPU=2 timeout 300 "$t" --test-threads=2 > "$OUT/tests-multi.log" 2>&1
        echo "parallel_multi_gpu exit $? $(grep -E '^test result' "$OUT/tests-multi.log" | tail -1)"
      done
      for t in .gpu/tests/gpu-*; do
        KESTREL_REQUIRE_GPU=2 timeout 300 "$t" --test-threads=2 multi > "$OUT/tests-gpu-multi.log" 2>&1
        echo "gpu multi exit $? $(grep -E '^test result' "$OUT/tests-gpu-multi.log" | tail -1)"
      done
      timeout 400 python3 -m pytest -q -p no:cacheprovider python/tests/test_dask_gpu.py > "$OUT/pytest.log" 2>&1
      echo "test_dask_gpu exit $? $(tail -1 "$OUT/pytest.log")" ;;
    cuda)
      KESTREL_BENCH_CUDA=multi KESTREL_BENCH_MULTI_TRACKS=${TRACKS:-10000000} timeout 560 \
        .gpu/kestrel bench --only cuda > "$OUT/cuda-multi.log" 2>&1
      echo "cuda multi exit $?" ;;
    parallel)
      KESTREL_BENCH_PAR_MULTI=1 timeout 300 .gpu/kestrel bench --only parallel > "$OUT/parallel-multi.log" 2>&1
      echo "parallel multi exit $?" ;;
    dask)
      timeout 560 python3 -m kestrel.dask_bench --cuda-cluster --repeats "${REPEATS:-3}" \
        --json "$OUT/dask-cuda.json" > "$OUT/dask-cuda.log" 2>&1
      echo "dask cuda-cluster exit $?" ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
