#!/usr/bin/env bash
# `loom ckpt export` against PyTorch: train 5 steps with tp2 dp2 (4 ranks) and save, export the
# checkpoint with Hugging Face GPT-2 names and with Loom's, run step 6 from the checkpoint, and let
# check_export.py load both files into the reference model and compare its loss on step 6's batch;
# the bf16 and f16 exports must be the f32 one rounded to nearest-even, bit for bit; the --hf-dir
# export's model, built from its config.json alone, must give the same loss. The first run also
# exports its final checkpoint itself (checkpoint.export, bf16): the same bytes as `loom ckpt
# export --hf-dir --dtype bf16` of it (its tokenizer and generation files too).
# Usage: run_export_check.sh LOOM WORK_DIR JOB
set -euo pipefail
loom=$1 dir=$2 job=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
sed "s#text: \([^,}]*\)#text: $jobdir/\1#; s/^steps:/parallel: {tp: 2, dp: 2}\nsteps:/" "$job" > "$dir/job.yaml"
mpi() { mpirun --oversubscribe -np 4 "$loom" train --config "$dir/job.yaml" --checkpoint-dir "$dir/ck" "$@"; }
sed "s#^steps:#checkpoint: {export: $dir/trained_hf/, export_dtype: bf16}\nsteps:#" "$dir/job.yaml" > "$dir/export_job.yaml"
mpirun --oversubscribe -np 4 "$loom" train --config "$dir/export_job.yaml" --checkpoint-dir "$dir/ck" \
  --steps 5 > "$dir/train.log" 2>&1 || { cat "$dir/train.log"; exit 1; }
grep -q "exported $dir/ck/step_00000005 to $dir/trained_hf (a Hugging Face model directory, 28 tensors, bf16, Hugging Face GPT-2 names, the byte-level tokenizer)" "$dir/train.log" \
  || { echo "FAIL: the run did not say it exported: $(grep -i export "$dir/train.log")"; exit 1; }
"$loom" ckpt export "$dir/ck" --hf-dir "$dir/hf_dir_bf16" --dtype bf16 > /dev/null
for f in model.safetensors config.json generation_config.json tokenizer.json tokenizer_config.json; do
  cmp "$dir/trained_hf/$f" "$dir/hf_dir_bf16/$f" || { echo "FAIL: checkpoint.export's $f differs"; exit 1; }
done
echo "checkpoint.export: the run's own bf16 Hugging Face export is byte-identical to loom ckpt export's"
"$loom" ckpt export "$dir/ck" --safetensors "$dir/hf.safetensors"
"$loom" ckpt export "$dir/ck" --safetensors "$dir/loom.safetensors" --names loom
"$loom" ckpt export "$dir/ck" --safetensors "$dir/bf16.safetensors" --names loom --dtype bf16
"$loom" ckpt export "$dir/ck" --safetensors "$dir/f16.safetensors" --names loom --dtype f16
"$loom" ckpt export "$dir/ck" --hf-dir "$dir/hf_dir"
mpi --steps 6 --dump-losses "$dir/step6.txt" > "$dir/step6.log" 2>&1 || { cat "$dir/step6.log"; exit 1; }
read -r step loss < "$dir/step6.txt"
[[ $step == 6 ]] || { echo "FAIL: expected the loss of step 6, got step $step"; exit 1; }
exec /usr/bin/python3 "$here/check_export.py" "$dir/hf.safetensors" "$dir/loom.safetensors" \
  --job "$dir/job.yaml" --step 6 --loss "$loss" \
  --bf16 "$dir/bf16.safetensors" --f16 "$dir/f16.safetensors" --hf-dir "$dir/hf_dir"
