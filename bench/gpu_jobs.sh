#!/usr/bin/env bash
# --jobs and worker starts on a GPU machine (run on nvidia-h200-x2), in two parts that each
# fit one device call:
#   bash bench/gpu_jobs.sh short  # GPU tests; a segfaulting and a CUDA-breaking compiler with
#                                 # forked and with spawned workers; slow_oracle at 1 s a call,
#                                 # --jobs 1 and 4, twice, and once with spawned workers; the
#                                 # Inductor example on CUDA at --jobs 1 and 4
#   bash bench/gpu_jobs.sh long   # slow_oracle at 10 s and 30 s a call (LONG_SECONDS="30": one), --jobs 1 and 4
#   bash bench/gpu_jobs.sh check  # the GPU tests, and one of each short pair (4 minutes)
# "slow_oracle N s" sets TRTMIN_BENCH_COMPILE_SECONDS, an engine build of that long. Each run
# has its own cold Inductor cache and is timed as a whole process and by summary.json's
# `seconds` (--no-verify: the reduction, as in earlier sessions' figures). One log, $OUT/gpu_jobs_<part>.txt. (Earlier versions, and gpu_session*.sh, are
# in git history as they ran.) The device's copy of .git is not refreshed between calls, so
# pass the commit: TRTMIN_COMMIT=$(git rev-parse --short HEAD) in the device command.
set -u
PART=${1:-short}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-/tmp/gpu-out}; mkdir -p $O; L=$O/gpu_jobs_$PART.txt
T=/tmp/trtmin-gpu-jobs; mkdir -p $T
{ nproc; nvidia-smi -L; python3 -c "import torch; print(torch.__version__)"; echo "commit ${TRTMIN_COMMIT:-$(git log -1 --format=%h 2>/dev/null) (from the device copy of .git, maybe stale: set TRTMIN_COMMIT)}"; } > $L 2>&1
run() {  # name [VAR=value ...] args...: the variables are set for this run only
  local name=$1; shift
  local envs=(); while [[ ${1:-} == *=* ]]; do envs+=("$1"); shift; done
  local s0=$(date +%s.%N)
  env "${envs[@]}" TORCHINDUCTOR_CACHE_DIR=$T/cache_$name python3 -m minimize.cli reduce "$@" --no-verify --out $T/$name > $T/$name.log 2>&1
  local rc=$? s1=$(date +%s.%N)
  echo "== $name ${envs[*]} rc=$rc $(grep '^done:' $T/$name.log) (process $(python3 -c "print(round($s1 - $s0, 1))") s)" >> $L
  python3 -c "import json; s=json.load(open('$T/$name/summary.json')); t=s['timing']; print(' ', {k: t.get(k) for k in ('seconds','load_seconds','oracle_seconds','evaluations','batches','first_batch_seconds','jobs','worker_restarts','forked_workers')}, {p: v['calls'] for p, v in s['passes'].items() if v['calls']}, t.get('load'), t.get('worker_start'))" >> $L 2>&1
}
same() {
  for p in "$@"; do set -- $p
    cmp -s $T/$1/repro.py $T/$2/repro.py && echo "repro.py identical: $1, $2" >> $L || echo "repro.py DIFFERS: $1, $2" >> $L
  done
}
python3 bench/export_case.py slow_oracle $T > /dev/null 2>&1
S="$T/slow_oracle.pt2 --inputs $T/slow_oracle_inputs.pt --backend bench/cases/slow_oracle.py:backend --oracle mismatch --device cuda"
python3 -m minimize.cli check $S > /dev/null 2>&1  # fills trtmin's bytecode cache (oracles/bytecode.py)

crash_pair() {  # GPU tests, then the tests' host model with a segfaulting compiler, forked and spawned
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_faults.py tests/test_zygote.py tests/test_example.py -k "cuda or gpu or zygote or fork or crash" >> $L 2>&1
  python3 -c "
import torch; from tests.conftest import Host, save_program; from pathlib import Path
torch.manual_seed(0); p = Path('$T/host'); p.mkdir(exist_ok=True); save_program(Host().eval(), (torch.randn(4, 8),), p)"
  H="$T/host/model.pt2 --inputs $T/host/model_inputs.pt --oracle crash --device cuda"
  run segv_fork $H --backend tests/plugins/planted.py:segfault_on_tanh
  run segv_spawn TRTMIN_NO_ZYGOTE=1 $H --backend tests/plugins/planted.py:segfault_on_tanh
}

if [ "$PART" = check ]; then
  crash_pair
  run slow_j1 $S --jobs 1
  run slow_j4 $S --jobs 4
  run slow_j1_kept $S --jobs 1 --no-generate-values  # the reduction alone, as in the figures before the tenth session
  run slow_j4_kept $S --jobs 4 --no-generate-values
  E="examples/forecaster.pt2 --inputs examples/forecaster_inputs.pt --backend inductor --oracle mismatch --device cuda"
  run fore_j4 $E --jobs 4
  same "segv_fork segv_spawn" "slow_j1 slow_j4" "slow_j1_kept slow_j4_kept"
elif [ "$PART" = short ]; then
  crash_pair
  run cudaerr_fork $H --backend tests/plugins/planted.py:cuda_bad_index_on_tanh
  run cudaerr_spawn TRTMIN_NO_ZYGOTE=1 $H --backend tests/plugins/planted.py:cuda_bad_index_on_tanh
  for i in 1 2; do run slow_j1_$i $S --jobs 1; run slow_j4_$i $S --jobs 4; done
  run slow_j1_spawn TRTMIN_NO_ZYGOTE=1 $S --jobs 1
  run slow_j4_spawn TRTMIN_NO_ZYGOTE=1 $S --jobs 4
  E="examples/forecaster.pt2 --inputs examples/forecaster_inputs.pt --backend inductor --oracle mismatch --device cuda"
  run fore_j1 $E --jobs 1
  run fore_j4 $E --jobs 4
  same "segv_fork segv_spawn" "cudaerr_fork cudaerr_spawn" "slow_j1_1 slow_j4_1" "slow_j1_1 slow_j4_spawn" "fore_j1 fore_j4"
else
  for secs in ${LONG_SECONDS:-10 30}; do
    run slow${secs}_j1 TRTMIN_BENCH_COMPILE_SECONDS=$secs $S --jobs 1
    run slow${secs}_j4 TRTMIN_BENCH_COMPILE_SECONDS=$secs $S --jobs 4
    same "slow${secs}_j1 slow${secs}_j4"
  done
fi
cat $L
