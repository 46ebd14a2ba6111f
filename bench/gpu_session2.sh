#!/usr/bin/env bash
# Second batched GPU session: --jobs on 2 GPUs (pinned workers), the example reduced with
# Inductor on CUDA, and (if .devstub/ is carried) a plumbing check of the TensorRT runner
# against a STUB tensorrt module (onnxruntime underneath; not TensorRT). Logs go to $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-/tmp/gpu-out}; mkdir -p $O
T=/tmp/trtmin-gpu; mkdir -p $T
EX="examples/forecaster.pt2 --inputs examples/forecaster_inputs.pt --backend inductor --oracle mismatch"
python3 bench/export_case.py slow_oracle $T > $O/jobs.txt 2>&1
for j in 2 1; do
  python3 -m minimize.cli reduce $T/slow_oracle.pt2 --inputs $T/slow_oracle_inputs.pt --backend bench/cases/slow_oracle.py:backend \
    --oracle mismatch --device cuda --jobs $j --out $T/jobs$j > $O/jobs$j.txt 2>&1; echo "rc=$?" >> $O/jobs$j.txt
  python3 -c "import json,sys; s=json.load(open('$T/jobs$j/summary.json')); print('jobs $j', s['final_nodes'], s['oracle_calls'], s['timing'])" >> $O/jobs.txt 2>&1
done
cmp $T/jobs1/repro.py $T/jobs2/repro.py && echo "repro.py identical for --jobs 1 and 2" >> $O/jobs.txt
python3 -m minimize.cli reduce $EX --device cuda --out $T/cuda > $O/reduce_cuda.txt 2>&1; echo "rc=$?" >> $O/reduce_cuda.txt
(cd $T/cuda && python3 repro.py; echo "rc=$?"; TRTMIN_BACKEND=eager python3 repro.py; echo "rc=$?"; sed -n '/class Repro/,/def make_inputs/p' repro.py) >> $O/reduce_cuda.txt 2>&1
[ -d .devstub ] && (cd .devstub && PYTHONPATH=$PWD/..:$PWD timeout 120 python3 devcheck.py) > $O/devstub.txt 2>&1
