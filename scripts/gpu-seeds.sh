#!/usr/bin/env bash
# On a GPU machine, from a folder staged by ../shared/tools/stage-gpu (.gpu/): the GPU
# tests named as arguments (test-name filters of the gpu executable), then every seed
# benchmark (`kestrel bench --seed NAME --plot $OUT`), each under its own time limit so
# that one slow seed leaves the others' records. Logs, JSON lines and charts go to $OUT.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.gpu"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
. "$here/gpu-env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
nproc >> "$OUT/device.txt"
if [ $# -gt 0 ]; then
  for t in tests/gpu-*; do
    timeout "${TEST_LIMIT:-90}" "$t" --test-threads=8 "$@" >> "$OUT/tests.log" 2>&1
    echo "$(basename "$t") $* exit $?  $(grep -E '^test result' "$OUT/tests.log" | tail -1)"
  done
fi
grep -E -A3 "panicked|FAILED" "$OUT/tests.log" | head -20
for s in ${SEEDS:-tager:60 lin:40 hendeby:70 sarkka:90 mazurek:100}; do
  name=${s%%:*}; lim=${s##*:}
  /usr/bin/time -f "%e s" timeout "$lim" ./kestrel bench --seed "$name" --plot "$OUT" > "$OUT/seed-$name.log" 2> "$OUT/seed-$name.err"
  echo "seed $name exit $? $(tail -1 "$OUT/seed-$name.err")"
done
