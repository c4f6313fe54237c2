#!/usr/bin/env bash
# `loom data prepare` writes token files that `loom train` reads (train + val splits).
set -euo pipefail
loom=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
for i in $(seq 1 200); do echo "line $i: the quick brown fox jumps over the lazy dog"; done > "$dir/corpus.txt"
"$loom" data prepare --input "$dir/corpus.txt" --output-dir "$dir/tokens" --val-fraction 0.2
size=$(stat -c %s "$dir/corpus.txt")
train_bytes=$(stat -c %s "$dir/tokens/train.bin")
val_bytes=$(stat -c %s "$dir/tokens/val.bin")
# 32-byte headers, 2 bytes per token, every byte of the corpus in exactly one split.
[[ $(( (train_bytes - 32) / 2 + (val_bytes - 32) / 2 )) -eq $size ]] || { echo "FAIL: token count"; exit 1; }
cat > "$dir/job.yaml" <<'YAML'
model: {vocab: 256, max_seq: 32, layers: 1, heads: 2, hidden: 32}
data: {train: tokens/train.bin, val: tokens/val.bin, seq: 32, global_batch: 4, micro_batch: 2}
optimizer: {lr: 0.003}
steps: 30
eval: {every: 10, batches: 2}
runtime: {recompute: full, log_every: 10}
YAML
out=$("$loom" train --config "$dir/job.yaml" 2>&1)
echo "$out"
grep -q '^done in' <<<"$out"
grep -q 'recompute full' <<<"$out"
echo PASS
