#!/usr/bin/env bash
# A/B on the GPU machine: this tree against an older one (a `git archive` copy in $1), alternating,
# slow_oracle (a plugin, 1 s a call) at --jobs 1 and 4, and the Inductor example at --jobs 4.
# ROUNDS (2) rounds. Prints summary.json's seconds, first batch and worker start-up steps. Used for 65630ee
# (reset_dynamo) against 9af50bc. Run after bench/gpu_jobs.sh (it exports the case to $T).
set -u
OLD=$(cd $1 && pwd); NEW=$PWD; T=/tmp/trtmin-gpu-jobs; O=${OUT:-/tmp/gpu-out}; L=$O/ab_reset.txt
python3 bench/export_case.py slow_oracle $T > /dev/null 2>&1
S="$T/slow_oracle.pt2 --inputs $T/slow_oracle_inputs.pt --backend $NEW/bench/cases/slow_oracle.py:backend --oracle mismatch --device cuda"
E="$NEW/examples/forecaster.pt2 --inputs $NEW/examples/forecaster_inputs.pt --backend inductor --oracle mismatch --device cuda"
one() {  # tree name args...
  local tree=$1 name=$2; shift 2
  (cd $tree && TORCHINDUCTOR_CACHE_DIR=$T/abcache_$name PYTHONPATH=$tree python3 -m minimize.cli reduce "$@" --no-verify --out $T/ab_$name > $T/ab_$name.log 2>&1)
  python3 -c "import json; s=json.load(open('$T/ab_$name/summary.json')); t=s['timing']; print('$name', s['oracle_calls'], t['seconds'], 'first', t.get('first_batch_seconds'), t.get('load_seconds'), t.get('worker_start'))" >> $L 2>&1 || echo "$name failed: $(tail -2 $T/ab_$name.log)" >> $L
}
: > $L
for i in $(seq ${ROUNDS:-2}); do
  for j in 1 4; do one $NEW new_j${j}_$i $S --jobs $j; one $OLD old_j${j}_$i $S --jobs $j; done
  one $NEW new_fore_$i $E --jobs 4; one $OLD old_fore_$i $E --jobs 4
done
cat $L
