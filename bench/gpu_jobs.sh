#!/usr/bin/env bash
# --jobs on a GPU machine (run on nvidia-h200-x2): the slow-compile case at --jobs 1 and 4
# with a 1 s and a 10 s "engine build" (TRTMIN_BENCH_COMPILE_SECONDS), the Inductor
# example on CUDA at --jobs 1 and 4, each run with its own cold Inductor cache, then the
# GPU tests. One log, $OUT/gpu_jobs.txt. (The earlier sessions' gpu_session4-7.sh and
# this script's first version, which also ran --no-localize, were variants of it; git
# history has them as they ran.)
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-/tmp/gpu-out}; mkdir -p $O; L=$O/gpu_jobs.txt
T=/tmp/trtmin-gpu-jobs; mkdir -p $T
{ nproc; nvidia-smi -L; python3 -c "import torch; print(torch.__version__)"; } > $L 2>&1
run() {  # name args...
  local name=$1; shift
  local s0=$(date +%s.%N)
  TORCHINDUCTOR_CACHE_DIR=$T/cache_$name python3 -m minimize.cli reduce "$@" --out $T/$name > $T/$name.log 2>&1
  local rc=$? s1=$(date +%s.%N)
  echo "== $name rc=$rc $(grep '^done:' $T/$name.log) (process $(python3 -c "print(round($s1 - $s0, 1))") s)" >> $L
  python3 -c "import json; s=json.load(open('$T/$name/summary.json')); t=s['timing']; print(' ', {k: t.get(k) for k in ('seconds','load_seconds','oracle_seconds','evaluations','batches','first_batch_seconds','jobs')}, {p: v['calls'] for p, v in s['passes'].items() if v['calls']}, s['diagnosis'].get('first_off_value'))" >> $L 2>&1
}
python3 bench/export_case.py slow_oracle $T > /dev/null 2>&1
S="$T/slow_oracle.pt2 --inputs $T/slow_oracle_inputs.pt --backend bench/cases/slow_oracle.py:backend --oracle mismatch --device cuda"
# This machine's Python keeps no bytecode (PYTHONDONTWRITEBYTECODE=1, a uv install):
# the first trtmin command fills trtmin's own cache (oracles/bytecode.py), the second uses it.
for i in cold warm; do
  s0=$(date +%s.%N); python3 -m minimize.cli check $S > /dev/null 2>&1
  python3 -c "print('== check ($i bytecode cache): %.1f s' % ($(date +%s.%N) - $s0))" >> $L
done
run slow_j1 $S --jobs 1
run slow_j4 $S --jobs 4
export TRTMIN_BENCH_COMPILE_SECONDS=10
run slow10_j1 $S --jobs 1
run slow10_j4 $S --jobs 4
unset TRTMIN_BENCH_COMPILE_SECONDS

E="examples/forecaster.pt2 --inputs examples/forecaster_inputs.pt --backend inductor --oracle mismatch --device cuda"
run fore_j1 $E --jobs 1
run fore_j4 $E --jobs 4
cmp -s $T/slow_j1/repro.py $T/slow_j4/repro.py && echo "repro.py identical: slow_j1, slow_j4" >> $L
cmp -s $T/slow10_j1/repro.py $T/slow10_j4/repro.py && echo "repro.py identical: slow10_j1, slow10_j4" >> $L
cmp -s $T/fore_j1/repro.py $T/fore_j4/repro.py && echo "repro.py identical: fore_j1, fore_j4" >> $L

timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_faults.py tests/test_example.py -k "cuda or gpu" >> $L 2>&1
tail -3 $L
