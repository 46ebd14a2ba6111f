#!/usr/bin/env bash
# One device call (nvidia-h200): the GPU tests, then slow_oracle at 1 s and 10 s a call with
# --jobs 1, --jobs 4 and --jobs 4 under clairvoyant speculation (bench/clairvoyant.py, fed
# the --jobs 1 run's journal: the floor any speculator can reach), then a program of large
# weights on CUDA (bench/big_weights.py). Timed by summary.json `seconds` (--no-verify, as
# gpu_jobs.sh). One log, $OUT/gpu_floor.txt, written as it goes.
#   TRTMIN_COMMIT=$(git rev-parse --short HEAD) bash bench/gpu_floor.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-/tmp/gpu-out}; mkdir -p $O; L=$O/gpu_floor.txt
T=/tmp/trtmin-gpu-floor; mkdir -p $T
{ nproc; nvidia-smi -L; python3 -c "import torch; print(torch.__version__)"; echo "commit ${TRTMIN_COMMIT:-unknown}"; } > $L 2>&1
timeout 360 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_faults.py tests/test_zygote.py \
  tests/test_structured_inputs.py tests/test_shapes.py -k "cuda or gpu or zygote or fork or crash or structure or batch or exported" >> $L 2>&1
summary() {  # folder: the timing line of its summary.json
  python3 -c "import json; s=json.load(open('$1/summary.json')); t=s['timing']; print(' ', {k: t.get(k) for k in ('seconds','load_seconds','oracle_seconds','evaluations','batches','first_batch_seconds','jobs')}, 'calls', s['oracle_calls'])" >> $L 2>&1
}
python3 bench/export_case.py slow_oracle $T > /dev/null 2>&1
S="$T/slow_oracle.pt2 --inputs $T/slow_oracle_inputs.pt --backend bench/cases/slow_oracle.py:backend --oracle mismatch --device cuda --no-verify"
python3 -m minimize.cli check $S > /dev/null 2>&1  # fills trtmin's bytecode cache (oracles/bytecode.py)
for secs in 1 10; do
  export TRTMIN_BENCH_COMPILE_SECONDS=$secs
  for run in j1 c4 j4; do
    case $run in
      j1) cmd="python3 -m minimize.cli reduce $S --jobs 1" ;;
      c4) cmd="python3 bench/clairvoyant.py $T/s${secs}_j1/journal.jsonl reduce $S --jobs 4" ;;
      j4) cmd="python3 -m minimize.cli reduce $S --jobs 4" ;;
    esac
    s0=$(date +%s.%N)
    TORCHINDUCTOR_CACHE_DIR=$T/cache_s${secs}_$run $cmd --out $T/s${secs}_$run > $T/s${secs}_$run.log 2>&1
    rc=$? s1=$(date +%s.%N)
    echo "== slow_oracle ${secs} s a call, $run rc=$rc $(grep '^done:' $T/s${secs}_$run.log) (process $(python3 -c "print(round($s1 - $s0, 1))") s)" >> $L
    summary $T/s${secs}_$run
  done
  for run in c4 j4; do
    cmp -s $T/s${secs}_j1/repro.py $T/s${secs}_$run/repro.py && echo "repro.py identical: j1, $run" >> $L || echo "repro.py DIFFERS: j1, $run" >> $L
  done
done
unset TRTMIN_BENCH_COMPILE_SECONDS
for jobs in 1 2; do
  echo "== big_weights --blocks 8 --device cuda --jobs $jobs" >> $L
  python3 bench/big_weights.py $T/bigw --blocks 8 --device cuda --jobs $jobs >> $L 2>&1
done
cat $L
