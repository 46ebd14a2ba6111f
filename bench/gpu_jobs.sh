#!/usr/bin/env bash
# --jobs on a GPU machine (run on nvidia-h200-x2): the slow-compile case at --jobs 1 and 4
# with a 1 s (twice, alternating), a 10 s and a 30 s "engine build"
# (TRTMIN_BENCH_COMPILE_SECONDS), the Inductor example on CUDA at --jobs 1 and 4, each run
# with its own cold Inductor cache, then the GPU tests. Each run is timed as a whole
# process and by summary.json's `seconds`. One log, $OUT/gpu_jobs.txt. (Earlier sessions'
# versions, and gpu_session*.sh, are in git history as they ran.)
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
  python3 -c "import json; s=json.load(open('$T/$name/summary.json')); t=s['timing']; print(' ', {k: t.get(k) for k in ('seconds','load_seconds','oracle_seconds','evaluations','batches','first_batch_seconds','jobs')}, {p: v['calls'] for p, v in s['passes'].items() if v['calls']}, t.get('load'), t.get('worker_start'))" >> $L 2>&1
}
python3 bench/export_case.py slow_oracle $T > /dev/null 2>&1
S="$T/slow_oracle.pt2 --inputs $T/slow_oracle_inputs.pt --backend bench/cases/slow_oracle.py:backend --oracle mismatch --device cuda"
python3 -m minimize.cli check $S > /dev/null 2>&1  # fills trtmin's bytecode cache (oracles/bytecode.py)
for i in 1 2; do run slow_j1_$i $S --jobs 1; run slow_j4_$i $S --jobs 4; done
for secs in 10 30; do
  export TRTMIN_BENCH_COMPILE_SECONDS=$secs
  run slow${secs}_j1 $S --jobs 1
  run slow${secs}_j4 $S --jobs 4
done
unset TRTMIN_BENCH_COMPILE_SECONDS

E="examples/forecaster.pt2 --inputs examples/forecaster_inputs.pt --backend inductor --oracle mismatch --device cuda"
run fore_j1 $E --jobs 1
run fore_j4 $E --jobs 4
for p in "slow_j1_1 slow_j4_1" "slow10_j1 slow10_j4" "slow30_j1 slow30_j4" "fore_j1 fore_j4"; do set -- $p
  cmp -s $T/$1/repro.py $T/$2/repro.py && echo "repro.py identical: $1, $2" >> $L || echo "repro.py DIFFERS: $1, $2" >> $L
done

timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_faults.py tests/test_example.py -k "cuda or gpu" >> $L 2>&1
cat $L
