#!/usr/bin/env bash
# Fourth GPU session (nvidia-h200-x2, 32 cores): --jobs 1 / 2 (default: one worker per GPU,
# pinned) / 4 on the 1 s-per-call case, the Inductor example on CUDA, and the 5,112-node
# case at --jobs 1 and 4. Logs and summaries go to $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-/tmp/gpu-out}; mkdir -p $O
T=/tmp/trtmin-gpu; mkdir -p $T
nproc > $O/machine.txt; nvidia-smi -L >> $O/machine.txt 2>&1; python3 -c "import torch; print(torch.__version__)" >> $O/machine.txt
summ() {  # name dir
  python3 -c "import json; s=json.load(open('$2/summary.json')); t=s['timing']; print('$1: final', s['final_nodes'], 'calls', s['oracle_calls'], 'evaluations', t['evaluations'], 'rounds', t.get('batches'), 'wall', t['seconds'], 'trtmin', t['trtmin_seconds'])" >> $O/summary.txt 2>&1
}
run() {  # name dir args...
  local name=$1 dir=$2; shift 2
  python3 -m minimize.cli reduce "$@" --out $dir > $O/$name.txt 2>&1; echo "rc=$?" >> $O/$name.txt
  summ $name $dir
}
python3 bench/export_case.py slow_oracle $T > /dev/null 2>&1
S="$T/slow_oracle.pt2 --inputs $T/slow_oracle_inputs.pt --backend bench/cases/slow_oracle.py:backend --oracle mismatch --device cuda"
run slow_j1 $T/s1 $S --jobs 1
run slow_jdefault $T/s2 $S
run slow_j4 $T/s4 $S --jobs 4
for d in s2 s4; do cmp $T/s1/repro.py $T/$d/repro.py && echo "slow: repro.py identical j1 vs $d" >> $O/summary.txt; done
E="examples/forecaster.pt2 --inputs examples/forecaster_inputs.pt --backend inductor --oracle mismatch --device cuda"
run fore_j1 $T/f1 $E --jobs 1
run fore_j4 $T/f4 $E --jobs 4
cmp $T/f1/repro.py $T/f4/repro.py && echo "forecaster: repro.py identical j1 vs j4" >> $O/summary.txt
python3 bench/export_case.py big_mlp_stack $T > /dev/null 2>&1
B="$T/big_mlp_stack.pt2 --inputs $T/big_mlp_stack_inputs.pt --backend bench/cases/big_mlp_stack.py:backend --oracle nan"
timeout 200 python3 -m minimize.cli reduce $B --jobs 1 --out $T/b1 > $O/big_j1.txt 2>&1; summ big_j1 $T/b1
timeout 150 python3 -m minimize.cli reduce $B --jobs 4 --out $T/b4 > $O/big_j4.txt 2>&1; summ big_j4 $T/b4
cmp $T/b1/repro.py $T/b4/repro.py && echo "big: repro.py identical j1 vs j4" >> $O/summary.txt
cat $O/summary.txt
