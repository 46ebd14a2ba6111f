#!/usr/bin/env bash
# --reference float64 on the GPU (nvidia-h200, one device call, about 3 minutes): the GPU tests,
# then the tests' bf16 host reduced with --device cuda against eager alone and against the
# float64 run (plugin float32_inside_mul_exp: float32 inside, x1.5 on exp after mul), each
# repro.py run alone and as its control. Pass the commit: TRTMIN_COMMIT=$(git rev-parse --short HEAD).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-/tmp/gpu-out}; mkdir -p $O; L=$O/gpu_reference.txt
T=/tmp/trtmin-gpu-ref; rm -rf $T; mkdir -p $T
{ nvidia-smi -L; python3 -c "import torch; print(torch.__version__)"; echo "commit ${TRTMIN_COMMIT:-unknown}"; } > $L 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_faults.py tests/test_reference.py >> $L 2>&1
python3 -c "
import torch; from tests.conftest import Host, save_program; from pathlib import Path
torch.manual_seed(0); p = Path('$T'); save_program(Host().eval().to(torch.bfloat16), (torch.randn(4, 8, dtype=torch.bfloat16),), p)"
for ref in eager float64; do
  python3 -m minimize.cli reduce $T/model.pt2 --inputs $T/model_inputs.pt --oracle mismatch --device cuda \
    --backend tests/plugins/planted.py:float32_inside_mul_exp --reference $ref --out $T/$ref > $T/$ref.log 2>&1
  echo "== $ref rc=$? $(grep -E '^(done|bug|note):' $T/$ref.log | tr '\n' ' ')" >> $L
  grep -o "torch.ops.aten.[a-z_]*" $T/$ref/repro.py | sort | uniq | tr '\n' ' ' >> $L; echo >> $L
  (cd $T/$ref && python3 repro.py; echo "repro.py exit $?"; TRTMIN_BACKEND=eager python3 repro.py; echo "control exit $?") >> $L 2>&1
done
cat $L
