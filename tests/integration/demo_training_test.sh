#!/usr/bin/env bash
# The README's demo (deploy/demo.sh): `loom launch` of examples/demo.yaml on 4 ranks of this
# machine, layout chosen by the planner. The training loss on the shipped corpus must fall below
# 2.5 nats/byte, evaluation must run, a sample must be printed, and the checkpoints (every 50
# steps, keep 2) must be saved and verify. The job is copied so its checkpoints land in WORK_DIR.
# The demo plans with this machine's own measurements: the first launch runs loom calibrate and
# caches the file (in WORK_DIR/cache here); a second launch reads it back.
set -euo pipefail
loom=$1 job=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
sed "s#text: \(.*\)#text: $jobdir/\1#; s#dir: .*\##dir: $dir/checkpoints \##" "$job" > "$dir/demo.yaml"
unset LOOM_CALIBRATION  # temp_dir.sh's "none": this test measures
out=$("$loom" launch "$dir/demo.yaml" 2>&1 | tee /dev/stderr)
cal=$(ls "$dir"/cache/localhost-*.calibration.json 2>/dev/null || true)
[[ -n $cal ]] && grep -q -- "calibration $cal (measured now)" <<<"$out" \
  || { echo "FAIL: the first launch did not measure and cache a calibration ($cal)"; exit 1; }
[[ $(ls "$dir/cache") == $(basename "$cal") ]] || { echo "FAIL: cache holds $(ls "$dir/cache")"; exit 1; }
# It measured what a synchronisation waits among the launch's 4 ranks sharing the cores.
grep -A1 '"op": "sync_wait"' "$cal" | grep -q '"ranks": 4' \
  || { echo "FAIL: no sync_wait sample for 4 ranks in $cal"; exit 1; }
# With more ranks than cores, what sharing them costs the compute, measured with all 4 at once.
if (($(nproc) < 4)); then
  /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["compute"].get("time_sharing", [])
sys.exit(not any(s["ranks"] == 4 and 0.05 <= s["efficiency"] <= 2 for s in t))' "$cal" \
    || { echo "FAIL: no time_sharing sample for 4 ranks in $cal"; exit 1; }
fi
# The planner chooses dp too (the demo fixes no micro-batch).
grep -qE -- 'layout tp=[0-9]+ cp=[0-9]+ pp=[0-9]+ vpp=[0-9]+ dp=[0-9]+' <<<"$out" \
  || { echo "FAIL: no layout line"; exit 1; }
summary=$(grep -E '^done in' <<<"$out")
train=$(sed -E 's/.*train loss ([0-9.]+).*/\1/' <<<"$summary")
val=$(sed -E 's/.*val loss ([0-9.na]+).*/\1/' <<<"$summary")
first=$(grep -E '^step +[0-9]+/' <<<"$out" | head -1 | sed -E 's/.*loss ([0-9.]+).*/\1/')
echo "first logged loss $first, final train loss $train, val loss $val"
grep -q -- '4 ranks via mpirun' <<<"$out" || { echo "FAIL: not a 4-rank launch"; exit 1; }
grep -q -- '(planner: best of' <<<"$out" || { echo "FAIL: the planner did not choose the layout"; exit 1; }
grep -A1 -- '--- sample' <<<"$out" | grep -q '^ROMEO:' \
  || { echo "FAIL: no sample printed after the job's prompt (ROMEO:)"; exit 1; }
awk -v t="$train" -v f="$first" -v v="$val" 'BEGIN { exit !(t < 2.5 && t < f && v < 2.7) }' \
  || { echo "FAIL: loss did not fall below 2.5 (train $train, val $val, first logged $first)"; exit 1; }
# The run's series for loom dashboard is kept beside the checkpoints (metrics.run_dir's default).
[[ $(ls "$dir/checkpoints") == $'latest\nseries.jsonl\nstep_00000200\nstep_00000250' ]] || { echo "FAIL: checkpoints: $(ls "$dir/checkpoints")"; exit 1; }
steps=$(grep -c '"kind":"step"' "$dir/checkpoints/series.jsonl")
[[ $steps == 250 ]] && tail -1 "$dir/checkpoints/series.jsonl" | grep -q '"type":"finished"' \
  || { echo "FAIL: series.jsonl: $steps steps, last line $(tail -1 "$dir/checkpoints/series.jsonl")"; exit 1; }
"$loom" ckpt verify "$dir/checkpoints" || { echo "FAIL: the final checkpoint does not verify"; exit 1; }
again=$("$loom" launch "$dir/demo.yaml" --steps 2 --checkpoint-dir "$dir/again" 2>&1) \
  || { echo "$again"; echo "FAIL: second launch"; exit 1; }
grep -q -- "calibration $cal (measured [0-9.]* \(min\|h\|days\) ago, cached" <<<"$again" && ! grep -q "measuring this machine" <<<"$again" \
  || { echo "$again" | head -5; echo "FAIL: the second launch did not read the cached calibration"; exit 1; }
echo "PASS: demo loss $train < 2.5; planned with this machine's calibration, measured once"
