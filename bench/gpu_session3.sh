#!/usr/bin/env bash
# Third GPU session: --jobs 1 vs 4 on the 1 s-per-call case (2 GPUs, workers pinned), and
# the fault/resume/partition tests under torch 2.11 + CUDA. Logs go to $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-/tmp/gpu-out}; mkdir -p $O
T=/tmp/trtmin-gpu; mkdir -p $T
python3 bench/export_case.py slow_oracle $T > $O/jobs.txt 2>&1
for j in 1 4; do
  python3 -m minimize.cli reduce $T/slow_oracle.pt2 --inputs $T/slow_oracle_inputs.pt --backend bench/cases/slow_oracle.py:backend \
    --oracle mismatch --device cuda --jobs $j --out $T/jobs$j > $O/jobs$j.txt 2>&1; echo "rc=$?" >> $O/jobs$j.txt
  python3 -c "import json; s=json.load(open('$T/jobs$j/summary.json')); t=s['timing']; print('jobs $j: final', s['final_nodes'], 'calls', s['oracle_calls'], 'evaluations', t['evaluations'], 'wall', t['seconds'], 'trtmin', t['trtmin_seconds'])" >> $O/jobs.txt 2>&1
done
cmp $T/jobs1/repro.py $T/jobs4/repro.py && echo "repro.py identical for --jobs 1 and 4" >> $O/jobs.txt
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_faults.py tests/test_survival.py tests/test_partitions.py > $O/pytest.txt 2>&1
