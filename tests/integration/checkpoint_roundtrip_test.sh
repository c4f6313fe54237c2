#!/usr/bin/env bash
# Universal checkpoint round trip through seven layouts (8 ranks each, vocab 257 padded by tp):
#   A = tp2 pp2 dp2 zero1  (trains 4 steps and saves)
#   -> B = tp1 pp4 dp2 zero3 -> cp2 pp2 dp2 zero2 -> tp2 pp2 vpp2 dp2 zero1
#   -> pp4 dp2 zero1 with uneven stages (1 | 3 x 2 | 1 layers) -> C = tp4 dp2 zero2 -> A again
# Each link loads the previous checkpoint and saves at once (no training). Checks:
#   * the consolidated fp32 weights and both Adam moments after the chain are byte-identical to
#     the original (both consolidated with `loom ckpt reshard --to tp=1`), and the final
#     checkpoint in layout A is byte-identical to the first one, file for file;
#   * `loom ckpt reshard` of each link's input gives the same bytes as loading with the link's
#     layout and saving;
#   * `loom ckpt diff` finds A and C (two layouts of one state) identical.
# Usage: checkpoint_roundtrip_test.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
sed "s#text: \([^,}]*\)#text: $jobdir/\1#" "$job" > "$dir/job.yaml"
fail=0
run() {  # run NAME "parallel spec" extra loom args...
  local name=$1 spec=$2
  shift 2
  sed "s/^steps:/parallel: {$spec}\nsteps:/" "$dir/job.yaml" > "$dir/$name.yaml"
  if ! timeout 300 mpirun --oversubscribe -np 8 "$loom" train --config "$dir/$name.yaml" \
      --checkpoint-dir "$dir/$name" "$@" > "$dir/$name.log" 2>&1; then
    tail -20 "$dir/$name.log"
    echo "FAIL: run $name ($spec) failed"
    exit 1
  fi
}
# same_files DIR1 DIR2 LABEL: every data file byte-identical, and metadata.json too but for its
# provenance (when and by which job it was saved) and the checksum that covers it.
same_files() {
  local a=$1 b=$2 label=$3 f
  [[ $(ls "$a" | wc -l) -eq $(ls "$b" | wc -l) ]] || { echo "FAIL $label: file lists differ"; fail=1; return; }
  for f in "$a"/*; do
    if [[ $(basename "$f") == metadata.json ]]; then
      /usr/bin/python3 - "$f" "$b/metadata.json" <<'PY' || { echo "FAIL $label: metadata.json differs"; fail=1; return; }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for m in (a, b):
    assert m.get("provenance", {}).get("loom_version"), "no provenance"
    m.pop("provenance"); m.pop("metadata_crc32c")
sys.exit(0 if a == b else 1)
PY
      continue
    fi
    cmp -s "$f" "$b/$(basename "$f")" || { echo "FAIL $label: $(basename "$f") differs"; fail=1; return; }
  done
  echo "PASS $label: $(ls "$a" | wc -l) files byte-identical (metadata.json but for its provenance)"
}

run A "tp: 2, pp: 2, dp: 2, zero: 1" --steps 4
prev=A
links=("B|tp: 1, pp: 4, dp: 2, zero: 3|tp=1,pp=4,dp=2,zero=3"
       "CP|cp: 2, pp: 2, dp: 2, zero: 2|cp=2,pp=2,dp=2,zero=2"
       "V|tp: 2, pp: 2, vpp: 2, dp: 2, zero: 1|tp=2,pp=2,vpp=2,dp=2,zero=1"
       "U|pp: 4, dp: 2, zero: 1, first_stage_layers: 1, last_stage_layers: 1|pp=4,dp=2,zero=1,first_stage_layers=1,last_stage_layers=1"
       "C|tp: 4, dp: 2, zero: 2|tp=4,dp=2,zero=2"
       "A2|tp: 2, pp: 2, dp: 2, zero: 1|tp=2,pp=2,dp=2,zero=1")
for link in "${links[@]}"; do
  IFS='|' read -r name spec to <<<"$link"
  run "$name" "$spec" --steps 4 --load "$dir/$prev"
  grep -q "resumed from $dir/$prev/step_00000004" "$dir/$name.log" \
    || { echo "FAIL $name: did not resume from $prev"; fail=1; }
  "$loom" ckpt reshard "$dir/$prev" --to "$to" "$dir/$name.offline" > /dev/null \
    || { echo "FAIL: loom ckpt reshard $prev --to $to"; fail=1; }
  same_files "$dir/$name.offline/step_00000004" "$dir/$name/step_00000004" \
    "offline reshard $prev -> $name equals loading with $name and saving"
  "$loom" ckpt verify "$dir/$name" > /dev/null || { echo "FAIL: verify $name"; fail=1; }
  prev=$name
done
same_files "$dir/A/step_00000004" "$dir/A2/step_00000004" "A -> B -> CP -> V -> U -> C -> A"
"$loom" ckpt reshard "$dir/A" --to tp=1 "$dir/A.consolidated" > /dev/null &&
  "$loom" ckpt reshard "$dir/A2" --to tp=1 "$dir/A2.consolidated" > /dev/null ||
  { echo "FAIL: consolidation"; exit 1; }
same_files "$dir/A.consolidated/step_00000004" "$dir/A2.consolidated/step_00000004" \
  "consolidated weights, exp_avg and exp_avg_sq after the chain"
# The consolidated file holds non-trivial moments (4 updates were applied).
grep -q '"step_count": "4"' "$dir/A2/step_00000004/metadata.json" || { echo "FAIL: step count"; fail=1; }
# loom ckpt diff reads both layouts' tensors whole: the state saved as A and as C is identical,
# and only the saved layout differs in the metadata.
out=$("$loom" ckpt diff "$dir/A" "$dir/C" 2>&1)
code=$?
# (The model: 100 tensors of 111968 elements in all, each with 3 states.)
[[ $code -eq 0 ]] && grep -q "^identical: all 300 tensor states, 335904 elements, bit for bit$" <<<"$out" \
  && grep -q "^metadata differs: saved_layout.tp: 2 vs 4$" <<<"$out" \
  && grep -q "^metadata differs: saved_layout.pp: 2 vs 1$" <<<"$out" \
  && grep -q "^metadata differs: saved_layout.zero: 1 vs 2$" <<<"$out" \
  && [[ $(grep -c "^metadata differs" <<<"$out") -eq 3 ]] \
  && echo "PASS loom ckpt diff: A and C identical across layouts" \
  || { echo "FAIL loom ckpt diff A C (exit $code): $out"; fail=1; }
exit $fail
