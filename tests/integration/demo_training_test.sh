#!/usr/bin/env bash
# The README's demo job: the training loss on the shipped corpus must fall below 2.5 nats/byte,
# evaluation must run, and a sample must be printed.
set -euo pipefail
loom=$1 job=$2
out=$("$loom" train --config "$job" 2>&1 | tee /dev/stderr)
summary=$(grep -E '^done in' <<<"$out")
train=$(sed -E 's/.*train loss ([0-9.]+).*/\1/' <<<"$summary")
first=$(sed -E 's/.*first step ([0-9.]+).*/\1/' <<<"$summary")
val=$(sed -E 's/.*val loss ([0-9.na]+).*/\1/' <<<"$summary")
echo "first-step loss $first, final train loss $train, val loss $val"
grep -q -- '--- sample' <<<"$out" || { echo "FAIL: no sample printed"; exit 1; }
grep -qE '^eval  step' <<<"$out" || { echo "FAIL: no periodic eval"; exit 1; }
awk -v t="$train" -v f="$first" -v v="$val" 'BEGIN { exit !(t < 2.5 && t < f - 2 && v < 2.7) }' \
  || { echo "FAIL: loss did not fall below 2.5 (train $train, val $val, first $first)"; exit 1; }
echo "PASS: demo loss $train < 2.5"
