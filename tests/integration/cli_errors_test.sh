#!/usr/bin/env bash
# Bad input to the CLI: a clear error naming the file and field, a non-zero exit, nothing written.
set -uo pipefail
loom=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
fail=0
expect() {  # expect EXIT_CODE NEEDLE -- command...
  local code=$1 needle=$2
  shift 3
  local out
  out=$("$@" 2>&1)
  local got=$?
  if [[ $got -ne $code ]]; then echo "FAIL: '$*' exited $got, expected $code: $out"; fail=1; return; fi
  if [[ "$out" != *"$needle"* ]]; then echo "FAIL: '$*' output lacks '$needle': $out"; fail=1; return; fi
  echo "ok: $* -> $needle"
}
printf 'hello world, this is a tiny corpus for the test. %.0s' {1..40} > "$dir/corpus.txt"
cat > "$dir/bad_field.yaml" <<'YAML'
model: {vocab: 256, max_seq: 32, layers: 2, heads: 2, hidden: 16}
data: {text: corpus.txt, seq: 16, global_batch: 4}
optimizer: {lr: fast}
steps: 3
YAML
expect 1 "bad_field.yaml:3: field 'optimizer.lr': expected a number" -- "$loom" train --config "$dir/bad_field.yaml"
sed 's/layers: 2/layerz: 2/' "$dir/bad_field.yaml" > "$dir/typo.yaml"
expect 1 "field 'model.layers': missing" -- "$loom" train --config "$dir/typo.yaml"
sed 's/lr: fast/lr: 0.001/; s/heads: 2/heads: 2, dropout: 0.1/' "$dir/bad_field.yaml" > "$dir/unknown.yaml"
expect 1 "field 'model.dropout': unknown field" -- "$loom" train --config "$dir/unknown.yaml"
sed 's/lr: fast/lr: 0.001/; s/corpus.txt/missing.txt/' "$dir/bad_field.yaml" > "$dir/nodata.yaml"
expect 1 "missing.txt" -- "$loom" train --config "$dir/nodata.yaml"
expect 1 "cannot open" -- "$loom" train --config "$dir/does_not_exist.yaml"
expect 2 "config is required" -- "$loom" train
expect 2 "loom: error: unknown command 'frobnicate' (expected one of: train, data," -- "$loom" frobnicate
expect 2 "loom ckpt: error: unknown command 'inspekt' (expected one of: inspect, verify, reshard, export, diff, import)" -- "$loom" ckpt inspekt "$dir"
# loom plan on this machine's built-in manifest, as loom launch plans it: --np or --cluster.
demo="$(dirname "$0")/../../examples/demo.yaml"
expect 0 "cluster localhost: 3 ranks on 1 node x 3 cpu-core" -- "$loom" plan --job "$demo" --np 3 --top 1
expect 2 "--cluster excludes --np" -- "$loom" plan --job "$demo" --np 3 --cluster "$dir/none.yaml"
expect 1 "nope.txt" -- "$loom" data prepare --input "$dir/nope.txt" --output-dir "$dir/out"
[[ -e "$dir/out" ]] && { echo "FAIL: output directory created for a failed prepare"; fail=1; }
printf 'LOOMTOK\0\1\0\0\0\2\0\0\0\xff\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0' > "$dir/short.bin"
sed 's/lr: fast/lr: 0.001/; s/text: corpus.txt/train: short.bin/' "$dir/bad_field.yaml" > "$dir/short.yaml"
expect 1 "short.bin': count" -- "$loom" train --config "$dir/short.yaml"
# Flags: what was expected, not a range of doubles; an empty path is not "not given"; an output
# that cannot be written is refused before training, not after it.
sed 's/lr: fast/lr: 0.001/' "$dir/bad_field.yaml" > "$dir/good.yaml"
expect 2 "--steps: expected a positive whole number, got '0'" -- "$loom" train --config "$dir/good.yaml" --steps 0
expect 2 "--checkpoint-dir: expected a path, got an empty string" -- "$loom" train --config "$dir/good.yaml" --checkpoint-dir ""
expect 2 "--precision: expected fp32 or bf16, got 'bf17'" -- "$loom" train --config "$dir/good.yaml" --precision bf17
expect 2 "--precision: expected fp32 or bf16, got 'BF16'" -- "$loom" plan --job "$dir/good.yaml" --np 2 --precision BF16
# A field given without a value is not the default (`precision:` would train fp32).
printf 'precision:\n' >> "$dir/good.yaml"
expect 1 "good.yaml:5: field 'precision': no value; expected a string (or leave the field out for its default)" -- "$loom" train --config "$dir/good.yaml"
sed -i '$d' "$dir/good.yaml"
# A bf16 plan on a manifest without a bf16 peak names the manifest's field.
grep -v 'bf16:' "$(dirname "$0")/../../deploy/clusters/localhost.yaml" > "$dir/nobf16.yaml"
expect 1 "nobf16.yaml:9: field 'device_types.cpu-core.peak_flops.bf16': missing; a plan in bf16 needs the device type's bf16 peak" -- "$loom" plan --cluster "$dir/nobf16.yaml" --job "$dir/good.yaml" --precision bf16
printf 'checkpoint: {dir: ""}\n' >> "$dir/good.yaml"
expect 1 "good.yaml:5: field 'checkpoint.dir': expected a directory path, got an empty string" -- "$loom" train --config "$dir/good.yaml"
sed -i '$d' "$dir/good.yaml"
# checkpoint.export: a dtype it cannot write, no final save to export, a destination that cannot
# take it: refused before training (nothing saved).
# with_export FIELDS NEEDLE: the job with `checkpoint: {dir: ..., FIELDS}` is refused with NEEDLE.
with_export() {
  printf 'checkpoint: {dir: %s, %s}\n' "$dir/exp_ck" "$1" >> "$dir/good.yaml"
  expect 1 "$2" -- "$loom" train --config "$dir/good.yaml"
  sed -i '$d' "$dir/good.yaml"
}
with_export "export: $dir/x.safetensors, export_dtype: f8" \
  "good.yaml:5: field 'checkpoint.export_dtype': expected f32, bf16 or f16, got 'f8'"
with_export "export: $dir/x.safetensors, final: false" \
  "good.yaml: field 'checkpoint.export': made from the final checkpoint, so it needs checkpoint.dir (or --checkpoint-dir) and checkpoint.final: true"
with_export "export: $dir/no_such_dir/x.safetensors" \
  "good.yaml: field 'checkpoint.export': '$dir/no_such_dir' is not a directory (the export goes in it)"
mkdir -p "$dir/a_dir.safetensors" && touch "$dir/a_file"
with_export "export: $dir/a_dir.safetensors" "good.yaml: field 'checkpoint.export' '$dir/a_dir.safetensors'"
with_export "export: $dir/a_file" \
  "good.yaml: field 'checkpoint.export': '$dir/a_file' exists and is not a directory (without the .safetensors extension the export is a Hugging Face model directory)"
[[ -e $dir/exp_ck ]] && { echo "FAIL: a refused checkpoint.export left $dir/exp_ck"; fail=1; }
printf 'checkpoint: {keep_every: 5}\n' >> "$dir/good.yaml"
expect 1 "field 'checkpoint.dir': expected a directory (or --checkpoint-dir) when checkpoint.every, keep or keep_every is set" -- "$loom" train --config "$dir/good.yaml"
sed -i '$d' "$dir/good.yaml"
printf "checkpoint: {dir: ck, signal: ''}\n" >> "$dir/good.yaml"
expect 1 "field 'checkpoint.signal': expected SIGUSR1, SIGUSR2, SIGTERM, SIGINT or none, got ''" -- "$loom" train --config "$dir/good.yaml"
sed -i '$d' "$dir/good.yaml"
out=$("$loom" train --config "$dir/good.yaml" --dump-losses "$dir/no/such/dir/losses.txt" 2>&1)
[[ $? -eq 1 && $out == *"--dump-losses '$dir/no/such/dir/losses.txt': No such file or directory"* && $out != *"step "* ]] \
  && echo "ok: --dump-losses into a missing directory refused before training" \
  || { echo "FAIL: --dump-losses into a missing directory: $out"; fail=1; }
# A checkpoint directory that nothing will save into is said so at the start.
printf "checkpoint: {dir: ck_none, final: false}\n" >> "$dir/good.yaml"
expect 0 "checkpoint.every is 0 and checkpoint.final is false: only a stop signal (checkpoint.signal) saves this run" \
  -- "$loom" train --config "$dir/good.yaml" --steps 1
sed -i '$d' "$dir/good.yaml"
expect 1 "--no-load-optimizer: needs checkpoint.load (or --load)" -- "$loom" train --config "$dir/good.yaml" --no-load-optimizer
# Training on past the LR decay (--steps does not move it, the job's steps do) is said so; a
# checkpoint past --steps names the flag.
expect 0 "" -- "$loom" train --config "$dir/good.yaml" --checkpoint-dir "$dir/lr_ck"
expect 0 "the LR decay ends at step 3 (the job file's steps; --steps does not move it): steps 4-5 run at min_lr" \
  -- "$loom" train --config "$dir/good.yaml" --checkpoint-dir "$dir/lr_ck" --steps 5
expect 1 "--steps: the checkpoint is at step 5, past the job's 2 steps" \
  -- "$loom" train --config "$dir/good.yaml" --checkpoint-dir "$dir/lr_ck" --steps 2
# loom launch says it once: its workers read the decay written out, not the job file's steps.
out=$("$loom" launch "$dir/good.yaml" --np 2 --steps 5 2>&1) || { echo "$out" | tail -3; echo "FAIL: loom launch --steps 5"; fail=1; }
if [[ $(grep -c "the LR decay ends at step 3 (the job file's steps; --steps does not move it): steps 4-5 run at min_lr" <<<"$out") -ne 1 ]]; then
  echo "FAIL: loom launch --steps 5 does not say once that steps 4-5 run at min_lr: $out"; fail=1
else
  echo "ok: loom launch --steps 5 says once that steps 4-5 run at min_lr"
fi
# Under plain mpirun a bad job file fails every rank alike: one line says it (rank 0's), not one
# per rank; an error of one rank's own is said by that rank, named.
mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun --oversubscribe)
out=$("${mpi[@]}" -np 4 "$loom" train --config "$dir/typo.yaml" 2>&1)
if [[ $? -eq 0 || $(grep -c "error:" <<<"$out") -ne 1 ]] || ! grep -q "^loom train: error: .*field 'model.layers': missing" <<<"$out"; then
  echo "FAIL: 4 ranks on a bad job file: expected one error line: $out"; fail=1
else
  echo "ok: mpirun -np 4 on a bad job file -> one line"
fi
out=$("${mpi[@]}" -np 1 "$loom" train --config "$dir/good.yaml" : -np 1 "$loom" train --config "$dir/typo.yaml" 2>&1)
if [[ $? -eq 0 || $(grep -c "error:" <<<"$out") -ne 1 ]] || ! grep -q "^loom train: error: rank 1: .*field 'model.layers': missing" <<<"$out"; then
  echo "FAIL: rank 1 alone on a bad job file: expected one error line naming rank 1: $out"; fail=1
else
  echo "ok: rank 1 alone on a bad job file -> one line naming it"
fi
exit $fail
