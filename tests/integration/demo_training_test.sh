#!/usr/bin/env bash
# The README's demo job: the training loss on the shipped corpus must fall below 2.5 nats/byte,
# evaluation must run, a sample must be printed, and the job's checkpoints (every 50 steps, keep
# 2) must be saved and verify.
set -euo pipefail
loom=$1 job=$2 ckpt=$3
rm -rf "$ckpt"
out=$("$loom" train --config "$job" --checkpoint-dir "$ckpt" 2>&1 | tee /dev/stderr)
summary=$(grep -E '^done in' <<<"$out")
train=$(sed -E 's/.*train loss ([0-9.]+).*/\1/' <<<"$summary")
first=$(sed -E 's/.*first step ([0-9.]+).*/\1/' <<<"$summary")
val=$(sed -E 's/.*val loss ([0-9.na]+).*/\1/' <<<"$summary")
echo "first-step loss $first, final train loss $train, val loss $val"
grep -q -- '--- sample' <<<"$out" || { echo "FAIL: no sample printed"; exit 1; }
grep -qE '^eval  step' <<<"$out" || { echo "FAIL: no periodic eval"; exit 1; }
awk -v t="$train" -v f="$first" -v v="$val" 'BEGIN { exit !(t < 2.5 && t < f - 2 && v < 2.7) }' \
  || { echo "FAIL: loss did not fall below 2.5 (train $train, val $val, first $first)"; exit 1; }
[[ $(ls "$ckpt") == $'latest\nstep_00000200\nstep_00000250' ]] || { echo "FAIL: checkpoints: $(ls "$ckpt")"; exit 1; }
"$loom" ckpt verify "$ckpt" || { echo "FAIL: the final checkpoint does not verify"; exit 1; }
echo "PASS: demo loss $train < 2.5"
