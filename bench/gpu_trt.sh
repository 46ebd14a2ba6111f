#!/usr/bin/env bash
# Real Torch-TensorRT-RTX and TensorRT-RTX on the GPU machine (after ../shared/gpu/trt-rtx's
# install.sh has run and /tmp/trtrtx/env.sh is sourced). Parts, each one device call:
#   bash bench/gpu_trt.sh tests    # trtmin env; the GPU tests of Torch-TensorRT and TensorRT
#   bash bench/gpu_trt.sh suite    # repros run --json over the saved suite, and under eager
#   bash bench/gpu_trt.sh reduce   # the real hosts (bench/hosts): check, reduce, repro.py alone
#   bash bench/gpu_trt.sh lowering # the video policy with attn_bias_is_causal true and false
#   bash bench/gpu_trt.sh probe    # what torch_executed_ops does to the video policy
#   bash bench/gpu_trt.sh examples # examples/emitted_linear_batchnorm: each script alone, and check
#   REPS=2 bash bench/gpu_trt.sh floor  # --jobs 1, clairvoyant --jobs 4 and --jobs 4 on the real hosts
#   CASES=video_policy JOBS="1 4" bash bench/gpu_trt.sh bench  # bench/run_bench.py beside fx_minifier
#   bash bench/gpu_trt.sh xl       # the 5,057-node host's reduction, started in the background
#     (XL_JOURNAL=bench/runs/.../video_policy_xl_journal.jsonl: resume an earlier machine's journal)
#   WAIT=500 bash bench/gpu_trt.sh xl-poll  # then, call after call: its state, its outputs when done
# Logs and JSON go to $OUT (the device tool brings them back).
set -u
PART=${1:-tests}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
O=${OUT:-/tmp/gpu-out}; mkdir -p $O; L=$O/gpu_trt_$PART.txt
T=/tmp/trtmin-trt; mkdir -p $T
trtmin() { python3 -m minimize.cli "$@"; }
xl_running() { local pid; pid=$(cat $T/xl.pid 2>/dev/null); [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }
{ nvidia-smi -L; python3 -c "import torch, torch_tensorrt, tensorrt_rtx; print('torch', torch.__version__, 'torch_tensorrt', torch_tensorrt.__version__, 'tensorrt_rtx', tensorrt_rtx.__version__)"; echo "commit ${TRTMIN_COMMIT:-?}"; } > $L 2>&1
case $PART in
tests)
  trtmin env >> $L 2>&1
  timeout 560 python3 -m pytest -q -p no:cacheprovider -x tests/test_torch_tensorrt_gpu.py tests/test_tensorrt_rtx.py >> $L 2>&1
  ;;
suite)
  s0=$(date +%s)
  G=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o 'H[0-9][0-9]*' | head -1 | tr A-Z a-z)  # h100, h200
  timeout 400 python3 -m minimize.cli repros run --jobs ${JOBS:-4} --json $O/suite_${G:-gpu}.json >> $L 2>&1
  echo "suite: $(( $(date +%s) - s0 )) s" >> $L
  TRTMIN_BACKEND=eager timeout 150 python3 -m minimize.cli repros run --jobs ${JOBS:-4} --json $O/suite_${G:-gpu}_eager.json >> $L 2>&1
  ;;
reduce)
  for h in ${HOSTS:-camera_policy video_policy}; do
    python3 -m bench.hosts $h $T >> $L 2>&1
    opts=$(python3 -c "import bench.hosts.$h as m; print(' '.join(m.RUN))")
    rm -rf $T/out_$h  # a fresh run each time: an earlier one in the folder is refused
    s0=$(date +%s.%N)
    trtmin reduce $T/$h.pt2 --inputs $T/${h}_inputs.pt $opts --jobs ${JOBS:-1} --out $T/out_$h > $T/$h.log 2>&1
    echo "== $h rc=$? $(python3 -c "print(round($(date +%s.%N) - $s0, 1))") s" >> $L
    tail -25 $T/$h.log >> $L
    (cd $T/out_$h && TRTMIN_BACKEND=eager python3 repro.py; echo "eager control exit $?") >> $L 2>&1
    mkdir -p $O/$h; cp $T/out_$h/{repro.py,report.md,summary.json} $O/$h/ 2>/dev/null
  done
  ;;
lowering)  # the video policy's mismatch with Torch-TensorRT's attention lowering on and off
  python3 -m bench.hosts video_policy $T >> $L 2>&1
  for setting in attn_bias_is_causal=true attn_bias_is_causal=false; do
    echo "== check --set $setting" >> $L
    trtmin check $T/video_policy.pt2 --inputs $T/video_policy_inputs.pt --oracle mismatch --backend torch_tensorrt \
      --device cuda --atol 1e-2 --set $setting 2>&1 | grep -v -i "warn\|modelopt\|TRT-LLM" >> $L
  done
  ;;
bench)  # successive calls on one warm machine add to one JSON (--resume)
  timeout ${LIMIT:-560} python3 bench/run_bench.py --cases ${CASES:-video_policy} --jobs ${JOBS:-1 4} \
    --json $T/bench.json --resume ${FX_ARGS:-} >> $L 2>&1
  cp $T/bench.json $O/bench_h200.json
  ;;
xl)  # the 5,057-node host's reduction, in the background: it outlives this call (setsid)
  # and runs on while the machine is held; `xl-poll` calls watch it. The original's compile
  # alone takes 6.5 min on the H200 (2026-12-03). A saved journal resumes an export of the
  # same code from any folder (trtmin compares Program.digest, not the .pt2's bytes); one of
  # another program is refused in one line, which xl-poll shows.
  if xl_running; then
    echo "a background run is going already (pid $(cat $T/xl.pid)): watch it with xl-poll" >> $L; exit 0
  fi
  [ -f $T/video_policy_xl.pt2 ] || python3 -m bench.hosts video_policy_xl $T >> $L 2>&1
  opts=$(python3 -c "import bench.hosts.video_policy_xl as m; print(' '.join(m.RUN))")
  if [ -n "${XL_JOURNAL:-}" ] && [ ! -f $T/out_xl/journal.jsonl ]; then  # an earlier machine's calls
    if [ -f "$XL_JOURNAL" ]; then
      mkdir -p $T/out_xl && cp $XL_JOURNAL $T/out_xl/journal.jsonl
    else
      echo "$XL_JOURNAL is missing: a fresh run" >> $L
    fi
  fi
  again=$([ -f $T/out_xl/journal.jsonl ] && echo --resume)
  rm -f $T/xl.rc
  setsid nohup bash -c "s0=\$(date +%s); timeout -s INT -k 30 ${LIMIT:-1700} python3 -m minimize.cli reduce $T/video_policy_xl.pt2 \
    --inputs $T/video_policy_xl_inputs.pt $opts --jobs ${JOBS:-1} --no-verify --timeout 1800 --out $T/out_xl $again \
    >> $T/xl.log 2>&1; echo \"== video_policy_xl ${again:-fresh} rc=\$? \$(( \$(date +%s) - s0 )) s\" > $T/xl.rc.tmp; \
    mv $T/xl.rc.tmp $T/xl.rc" < /dev/null > /dev/null 2>&1 &
  echo $! > $T/xl.pid
  echo "started in the background (${again:-fresh}); watch it with: WAIT=500 bash bench/gpu_trt.sh xl-poll" >> $L
  ;;
xl-poll)  # wait up to WAIT s (keep it under the call's limit) for the background run; bring back what it has
  for _ in $(seq ${WAIT:-500}); do [ -f $T/xl.rc ] && break; sleep 1; done
  if [ -f $T/xl.rc ]; then cat $T/xl.rc >> $L
  elif xl_running; then echo "still running" >> $L
  else echo "no background run is going, and none left a status (never started, or killed)" >> $L
  fi
  grep -v -i "warn\|modelopt\|TRT-LLM" $T/xl.log | tail -30 >> $L
  mkdir -p $O/xl; cp $T/xl.log $T/out_xl/{repro.py,report.md,summary.json,journal.jsonl} $O/xl/ 2>/dev/null
  ;;
floor)  # --jobs 1, then --jobs 4 fed the --jobs 1 journal (bench/clairvoyant.py: the floor of
  # any speculation), then --jobs 4; REPS times each host, summary.json `seconds` (--no-verify)
  for rep in $(seq ${REPS:-2}); do
    for h in ${HOSTS:-video_policy camera_policy}; do
      [ -f $T/$h.pt2 ] || python3 -m bench.hosts $h $T >> $L 2>&1
      opts=$(python3 -c "import bench.hosts.$h as m; print(' '.join(m.RUN))")
      M="$T/$h.pt2 --inputs $T/${h}_inputs.pt $opts --no-verify"
      for run in j1 c4 j4; do
        case $run in
          j1) cmd="python3 -m minimize.cli reduce $M --jobs 1" ;;
          c4) cmd="python3 bench/clairvoyant.py $T/floor_${h}_j1/journal.jsonl reduce $M --jobs 4" ;;
          j4) cmd="python3 -m minimize.cli reduce $M --jobs 4" ;;
        esac
        rm -rf $T/floor_${h}_$run
        timeout 300 $cmd --out $T/floor_${h}_$run > $T/floor_${h}_$run.log 2>&1
        echo "== $h rep $rep $run rc=$? $(python3 -c "import json; s=json.load(open('$T/floor_${h}_$run/summary.json')); t=s['timing']; print('seconds', round(t['seconds'], 1), 'calls', s['oracle_calls'], 'rounds', t.get('batches'), 'evaluations', t.get('evaluations'), 'first round', t.get('first_batch_seconds'), 'load', t.get('load_seconds'), 'final', s['final_nodes'])" 2>&1 | tail -1)" >> $L
      done
      for run in c4 j4; do
        cmp -s $T/floor_${h}_j1/repro.py $T/floor_${h}_$run/repro.py && echo "repro.py identical: j1, $run" >> $L || echo "repro.py DIFFERS: j1, $run" >> $L
      done
      mkdir -p $O/floor; cp $T/floor_${h}_j1/journal.jsonl $O/floor/${h}_rep${rep}_j1_journal.jsonl 2>/dev/null
    done
  done
  ;;
examples)  # the emitted-scripts example's H200 column: each script alone, then check on reduced.pt2
  rm -rf $T/emitted && cp -r examples/emitted_linear_batchnorm $T/emitted
  for s in repro.py repro_executorch_portable.py repro_torch_tensorrt.py repro_tensorrt.py; do
    (cd $T/emitted && timeout 200 python3 $s 2>&1 | grep -E "^(REPRODUCED|FIXED|SKIPPED|CHANGED)"; echo "== $s exit ${PIPESTATUS[0]}") >> $L
  done
  for b in torch_tensorrt tensorrt; do
    echo "== check reduced.pt2 --backend $b" >> $L
    timeout 200 python3 -m minimize.cli check $T/emitted/reduced.pt2 --oracle mismatch --backend $b --device cuda \
      2>&1 | grep -v -i "warn\|modelopt\|TRT-LLM" | tail -3 >> $L
  done
  ;;
probe)
  timeout 200 python3 bench/hosts/probe_fallback.py >> $L 2>&1
  for r in ${WHY:-uint8_permute_before_cast view_above_8_dims}; do  # a suite script's failure, whole
    (cd repros/suite/$r && timeout 120 python3 -c "
import traceback, repro
try:
    repro.run_backend(repro.make_inputs())
except Exception:
    traceback.print_exc()" 2>&1 | grep -v Warning | tail -25) >> $L
  done
  ;;
esac
echo "end of $PART" >> $L
