#!/usr/bin/env bash
# Context parallelism divides activation memory: the same model at seq 1024, 2048 and 4096 with
# cp = 1, 2, 4; each rank's measured peak activation bytes must be within 15% of (cp = 1) / cp.
# Prints the table (it is copied into docs/BENCHMARKS.md).
set -uo pipefail
loom=$1 dir=$2 corpus=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
fail=0
printf '%8s %4s %16s %10s\n' seq cp "peak act bytes" "x cp=1"
for seq in 1024 2048 4096; do
  base=0
  for cp in 1 2 4; do
    cat > "$dir/job.yaml" <<YAML
model: {vocab: 256, max_seq: $seq, layers: 2, heads: 4, hidden: 64}
data: {text: $corpus, seq: $seq, global_batch: 1, micro_batch: 1}
optimizer: {lr: 1.0e-3}
steps: 1
eval: {batches: 1}
runtime: {threads: 1, attn_block_q: 64, attn_block_k: 128}
parallel: {cp: $cp}
YAML
    out=$(LOOM_LOG_LEVEL=INFO timeout 300 mpirun --oversubscribe -np $cp "$loom" train --config "$dir/job.yaml" 2>&1)
    peak=$(grep -E "^\[loom 0\] INFO TRAIN activation peak bytes" <<<"$out" | awk '{print $NF}')
    [[ -n "$peak" ]] || { echo "FAIL: no peak reported for seq $seq cp $cp"; echo "$out" | tail -5; fail=1; continue; }
    [[ $cp -eq 1 ]] && base=$peak
    ratio=$(awk -v p="$peak" -v b="$base" 'BEGIN { printf "%.3f", p / b }')
    printf '%8d %4d %16d %10s\n' "$seq" "$cp" "$peak" "$ratio"
    awk -v r="$ratio" -v cp="$cp" 'BEGIN { e = 1 / cp; exit !(r <= e * 1.15 && r >= e * 0.85) }' \
      || { echo "FAIL: seq $seq cp $cp: ratio $ratio not within 15% of $(awk -v c=$cp 'BEGIN{print 1/c}')"; fail=1; }
  done
done
[[ $fail -eq 0 ]] && echo PASS
exit $fail
