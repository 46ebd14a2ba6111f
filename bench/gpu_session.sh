#!/usr/bin/env bash
# One batched GPU session (device machine, torch 2.11+cu130): the CUDA checks of the
# walking skeleton, the CUDA fault tests, and --jobs on 2 GPUs. Logs go to $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-/tmp/gpu-out}; mkdir -p $O
T=/tmp/trtmin-gpu; mkdir -p $T
{ nvidia-smi -L; python3 -c "import torch, typer, rich; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())"; } > $O/env.txt 2>&1
EX="examples/forecaster.pt2 --inputs examples/forecaster_inputs.pt --backend inductor --oracle mismatch"
python3 -m minimize.cli check $EX --device cuda > $O/check_cuda.txt 2>&1; echo "rc=$?" >> $O/check_cuda.txt
python3 -m minimize.cli check $EX --device cpu > $O/check_cpu_211.txt 2>&1; echo "rc=$?" >> $O/check_cpu_211.txt
python3 -m minimize.cli reduce $EX --device cpu --out $T/cpu > $O/reduce_cpu_211.txt 2>&1; echo "rc=$?" >> $O/reduce_cpu_211.txt
(cd $T/cpu && python3 repro.py; echo "rc=$?"; TRTMIN_BACKEND=eager python3 repro.py; echo "rc=$?") >> $O/reduce_cpu_211.txt 2>&1
python3 -m pytest -q -p no:cacheprovider tests/test_gpu_faults.py tests/test_example.py::test_example_on_cuda_says_plainly_whether_it_fails tests/test_program.py tests/test_verdict_checks.py > $O/pytest_gpu.txt 2>&1
python3 bench/export_case.py slow_oracle $T >> $O/jobs.txt 2>&1
for j in 1 2; do
  python3 -m minimize.cli reduce $T/slow_oracle.pt2 --inputs $T/slow_oracle_inputs.pt --backend bench/cases/slow_oracle.py:backend \
    --oracle mismatch --device cuda --jobs $j --out $T/jobs$j > $O/jobs$j.txt 2>&1; echo "rc=$?" >> $O/jobs$j.txt
  cp $T/jobs$j/summary.json $O/summary_jobs$j.json 2>/dev/null
done
cmp <(sed 1,20d $T/jobs1/repro.py) <(sed 1,20d $T/jobs2/repro.py) && echo "repro.py bodies identical" >> $O/jobs.txt
