#!/usr/bin/env bash
# Pipeline activation memory follows the schedule: with pp = 4 and 8 micro-batches, every rank's
# measured peak activation bytes equal its scratch plus the simulator's peak in-flight count times
# one slot; GPipe's first stage holds all 8 micro-batches, 1F1B's at most pp = 4.
set -uo pipefail
loom=$1 dir=$2 corpus=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
fail=0
for sched in gpipe 1f1b; do
  cat > "$dir/$sched.yaml" <<YAML
model: {vocab: 256, max_seq: 64, layers: 4, heads: 4, hidden: 64}
data: {text: $corpus, seq: 32, global_batch: 16, micro_batch: 2}
optimizer: {lr: 1.0e-3}
steps: 2
eval: {batches: 1}
runtime: {threads: 1}
parallel: {pp: 4, schedule: $sched}
YAML
  out=$(timeout 300 mpirun --oversubscribe -np 4 "$loom" train --config "$dir/$sched.yaml" 2>&1)
  lines=$(grep "pipeline activations" <<<"$out")
  echo "$lines"
  [[ $(wc -l <<<"$lines") -eq 4 ]] || { echo "FAIL $sched: expected 4 ranks to report"; echo "$out" | tail; fail=1; continue; }
  while read -r line; do
    measured=$(sed -E 's/.* \+ ([0-9]+) in flight.*/\1/' <<<"$line")
    remainder=$(sed -E 's/.*\(remainder ([0-9]+)\).*/\1/' <<<"$line")
    simulated=$(sed -E 's/.*simulated peak in flight ([0-9]+).*/\1/' <<<"$line")
    rank=$(sed -E 's/.*pp rank ([0-9]+)\).*/\1/' <<<"$line")
    [[ $measured -eq $simulated && $remainder -eq 0 ]] || { echo "FAIL $sched rank $rank: measured $measured (+$remainder bytes) vs simulated $simulated"; fail=1; }
    if [[ $rank -eq 0 ]]; then
      [[ $sched == gpipe && $measured -ne 8 ]] && { echo "FAIL: GPipe first stage holds $measured, expected 8"; fail=1; }
      [[ $sched == 1f1b && $measured -gt 4 ]] && { echo "FAIL: 1F1B first stage holds $measured > 4"; fail=1; }
    fi
  done <<<"$lines"
done
[[ $fail -eq 0 ]] && echo PASS
exit $fail
