#!/usr/bin/env bash
# Hugging Face Llama weights both ways, against PyTorch (check_hf_llama.py), the model with
# Llama 3.1's rope scaling:
#   1. A trains 3 steps of the llama job with tp2 (2 ranks), exporting its final checkpoint itself
#      (checkpoint.export, bf16: the same bytes as `loom ckpt export --hf-dir --dtype bf16`).
#      `loom ckpt export --hf-dir --max-shard-size 100KB` writes save_pretrained's sharded layout
#      (3 or more shards, the index, config.json); a run started from that directory (--init-from,
#      imported on the way) takes the step-1 loss of a run started from A's checkpoint itself, bit
#      for bit; read with plain Python and the names mapped back, the shards hold the tensors of
#      the export with Loom's names bit for bit, and PyTorch's Llama, built from config.json and
#      them alone, gives that loss within 1e-5. The same weights as one file (--names hf) and
#      with Loom's names import to A's weights exactly (diff); an export without the limit
#      replaces the shards and index by one model.safetensors.
#   2. PyTorch writes a sharded Hugging Face Llama directory of random weights (BF16, one F16
#      tensor); `loom ckpt import` of it and --init-from it train 2 steps (tp2) with the losses
#      PyTorch takes from the same weights with a fresh AdamW, within 1e-5.
#   3. Bad input, each a named error with exit status 1 that leaves nothing: a missing tensor, a
#      wrong shape, an index naming a missing shard, a shard holding a tensor the index does not
#      list, config.json without num_attention_heads, yarn rope_scaling, a tied config whose lm_head
#      differs from the embedding, a NaN; --init-from of another model (rope_theta, no rope
#      scaling) or of a directory missing a shard.
# Usage: run_hf_llama_check.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
# The model with Llama 3.1's rope scaling (original context 64: of head dim 8's frequencies one
# is kept, one blended, two slowed), so that both directions carry it.
sed "s#text: \([^,}]*\)#text: $jobdir/\1#; s/^steps:/parallel: {tp: 2}\nsteps:/; s/rope_theta: 10000}/rope_theta: 10000, rope_scaling: {type: llama3, factor: 8, original_max_seq: 64}}/" "$job" > "$dir/job.yaml"
grep -q "rope_scaling: {type: llama3" "$dir/job.yaml" || { echo "FAIL: no rope_scaling in the job"; exit 1; }
export PYTHONPATH="$here"
fail=0
train() {  # train NAME JOB STEPS args...: 2 ranks
  local name=$1 config=$2 steps=$3
  shift 3
  timeout 300 mpirun --oversubscribe -np 2 "$loom" train --config "$config" --steps "$steps" "$@" \
    > "$dir/$name.log" 2>&1
}

# 1. Export.
sed "s#^steps:#checkpoint: {export: $dir/trained_hf/, export_dtype: bf16}\nsteps:#" "$dir/job.yaml" \
  > "$dir/export_job.yaml"
train a "$dir/export_job.yaml" 3 --checkpoint-dir "$dir/a" || { tail -20 "$dir/a.log"; echo "FAIL: run a"; exit 1; }
grep -q "exported $dir/a/step_00000003 to $dir/trained_hf (a Hugging Face model directory, 75 tensors, bf16, Hugging Face Llama names, the byte-level tokenizer)" "$dir/a.log" \
  || { echo "FAIL: run a did not say it exported: $(grep -i export "$dir/a.log")"; fail=1; }
"$loom" ckpt export "$dir/a" --hf-dir "$dir/hf_bf16" --dtype bf16 > /dev/null || { echo "FAIL: bf16 export"; fail=1; }
for f in model.safetensors config.json generation_config.json tokenizer.json tokenizer_config.json; do
  cmp "$dir/trained_hf/$f" "$dir/hf_bf16/$f" || { echo "FAIL: checkpoint.export's $f differs"; fail=1; }
done
"$loom" ckpt export "$dir/a" --hf-dir "$dir/hf" --max-shard-size 100KB > "$dir/export.log" 2>&1 \
  || { cat "$dir/export.log"; echo "FAIL: sharded export"; exit 1; }
cat "$dir/export.log"
shards=$(ls "$dir/hf" | grep -c '^model-0000[0-9]-of-0000[0-9]\.safetensors$')
[[ $shards -ge 3 && -f $dir/hf/model.safetensors.index.json && ! -e $dir/hf/model.safetensors ]] \
  || { echo "FAIL: expected 3 or more shards and an index: $(ls "$dir/hf")"; fail=1; }
grep -q "($shards shards), model.safetensors.index.json and config.json from $dir/a/step_00000003: 75 tensors" "$dir/export.log" \
  || { echo "FAIL: the export did not say what it wrote"; fail=1; }

train from_ckpt "$dir/job.yaml" 1 --init-from "$dir/a" --dump-losses "$dir/from_ckpt.txt" \
  || { tail -20 "$dir/from_ckpt.log"; echo "FAIL: run from a's checkpoint"; exit 1; }
train from_hf "$dir/job.yaml" 1 --init-from "$dir/hf" --checkpoint-dir "$dir/from_hf" \
  --dump-losses "$dir/from_hf.txt" || { tail -20 "$dir/from_hf.log"; echo "FAIL: run from hf"; exit 1; }
cmp -s "$dir/from_ckpt.txt" "$dir/from_hf.txt" && grep -q "initialised from $dir/hf: model weights only" "$dir/from_hf.log" \
  && [[ ! -e $dir/from_hf/init_weights.tmp ]] \
  && echo "--init-from the sharded export: step 1's loss bit-identical to a run from the checkpoint, the import removed" \
  || { echo "FAIL: from_hf: $(grep -i init "$dir/from_hf.log")"; paste "$dir/from_ckpt.txt" "$dir/from_hf.txt"; fail=1; }
read -r step loss < "$dir/from_ckpt.txt"
[[ $step == 1 ]] || { echo "FAIL: expected the loss of step 1, got step $step"; exit 1; }
"$loom" ckpt export "$dir/a" --safetensors "$dir/one.safetensors" > /dev/null || { echo "FAIL: --names hf"; fail=1; }
"$loom" ckpt export "$dir/a" --safetensors "$dir/loom.safetensors" --names loom > /dev/null || { echo "FAIL: --names loom"; fail=1; }
/usr/bin/python3 "$here/check_hf_llama.py" export "$dir/hf" --job "$dir/job.yaml" --loss "$loss" \
  --loom "$dir/loom.safetensors" || fail=1
for x in hf one.safetensors loom.safetensors; do
  out=$dir/imported_${x%%.*}
  "$loom" ckpt import "$dir/$x" "$out" > "$out.log" 2>&1 \
    && "$loom" ckpt diff --weights-only "$out" "$dir/a" > "$out.diff" 2>&1 \
    && echo "import of $x: $(tail -1 "$out.diff")" \
    || { echo "FAIL: import of $x: $(cat "$out.log" "$out.diff")"; fail=1; }
done
grep -q "Llama of 8 layers, 4 heads (2 key/value), hidden 32, ffn_hidden 48, vocab 257, max_seq 64, untied head; 75 tensors" "$dir/imported_hf.log" \
  || { echo "FAIL: import of hf: $(cat "$dir/imported_hf.log")"; fail=1; }
"$loom" ckpt export "$dir/a" --hf-dir "$dir/hf" > /dev/null
[[ $(ls "$dir/hf" | tr '\n' ' ') == "config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json " ]] \
  && echo "exported again without the limit: one model.safetensors, the shards and index removed" \
  || { echo "FAIL: exported again without the limit: $(ls "$dir/hf")"; fail=1; }

# 2. Import.
/usr/bin/python3 "$here/check_hf_llama.py" write "$dir/rand" --job "$dir/job.yaml" || { echo "FAIL: writing"; exit 1; }
"$loom" ckpt import "$dir/rand/hf" "$dir/rand_imported" > "$dir/rand_import.log" 2>&1 \
  || { cat "$dir/rand_import.log"; echo "FAIL: import of the PyTorch-written directory"; fail=1; }
cat "$dir/rand_import.log"
train r_import "$dir/job.yaml" 2 --init-from "$dir/rand_imported" --dump-losses "$dir/r_import.txt" \
  || { tail -20 "$dir/r_import.log"; echo "FAIL: run from the import"; fail=1; }
train r_direct "$dir/job.yaml" 2 --init-from "$dir/rand/hf" --checkpoint-dir "$dir/r_direct" \
  --dump-losses "$dir/r_direct.txt" || { tail -20 "$dir/r_direct.log"; echo "FAIL: run from the directory"; fail=1; }
/usr/bin/python3 "$here/check_hf_llama.py" losses "$dir/rand/expected.txt" "$dir/r_import.txt" \
  "$dir/r_direct.txt" || fail=1

# 3. Bad input.
expect_import() {  # NAME PATTERN: `ckpt import` of rand/bad_NAME fails with PATTERN, leaves nothing
  local name=$1 pattern=$2 out=$dir/out_$1
  "$loom" ckpt import "$dir/rand/bad_$name" "$out" > "$out.log" 2>&1
  local rc=$?
  if [[ $rc -ne 1 ]] || ! grep -qF -- "$pattern" "$out.log" || [[ -e $out ]]; then
    echo "FAIL: bad_$name: exit $rc, expected '$pattern' in: $(cat "$out.log"); $(ls "$out" 2>&1)"
    fail=1
  else
    echo "bad_$name: $(cat "$out.log")"
  fi
}
r=$dir/rand
expect_import missing_tensor "$r/bad_missing_tensor/model.safetensors.index.json: tensor 'model.layers.3.mlp.up_proj.weight' [48, 32] is missing (a Llama of 8 layers with a head of its own: tie_word_embeddings false)"
expect_import shape "$r/bad_shape/model-00001-of-00003.safetensors: tensor 'model.layers.1.self_attn.k_proj.weight': field 'shape' is [8, 32], expected [16, 32]"
expect_import missing_shard "$r/bad_missing_shard/model.safetensors.index.json: field 'weight_map': tensor 'model.layers.2.mlp.down_proj.weight' is in 'model-00002-of-00003.safetensors', which does not exist"
expect_import unlisted "$r/bad_unlisted/model-00003-of-00003.safetensors: tensor 'model.layers.0.self_attn.extra.weight' is not in $r/bad_unlisted/model.safetensors.index.json's weight_map"
expect_import no_heads "$r/bad_no_heads/config.json: field 'num_attention_heads': missing"
expect_import rope_scaling "$r/bad_rope_scaling/config.json: field 'rope_scaling.rope_type': expected \"llama3\" (Llama 3.1's frequency scaling; Loom implements no other), got \"yarn\""
expect_import tied_head "$r/bad_tied_head/model-00003-of-00003.safetensors: tensor 'lm_head.weight' differs from 'model.embed_tokens.weight': the config ties the head to the embedding"
expect_import nan "$r/bad_nan/model-00001-of-00003.safetensors: tensor 'model.layers.0.mlp.down_proj.weight' element 7 is NaN: expected finite weights"

expect_train() {  # NAME PATTERN args...: a run fails with PATTERN, saves and leaves nothing
  local name=$1 pattern=$2
  shift 2
  train "$name" "$dir/job.yaml" 1 --checkpoint-dir "$dir/$name" "$@"
  local rc=$?
  if [[ $rc -eq 0 ]] || ! grep -qF -- "$pattern" "$dir/$name.log" || compgen -G "$dir/$name/step_*" > /dev/null \
    || [[ -e $dir/$name/init_weights.tmp ]]; then
    echo "FAIL: $name: exit $rc, expected '$pattern' in: $(grep -i error "$dir/$name.log" | head -3)"
    fail=1
  else
    echo "$name: $(grep -F -- "$pattern" "$dir/$name.log" | head -1)"
  fi
}
scaled="rope_scaling llama3 (factor 8, low 1, high 4, original_max_seq 64)"
expect_train init_theta "--init-from: '$r/bad_theta' holds a model of vocab 257, max_seq 64, 8 layers, 4 heads, hidden 32; llama: 2 key/value heads, ffn_hidden 48, untied head, rope_theta 500000, norm_eps 1e-05, $scaled; the job's model has vocab 257, max_seq 64, 8 layers, 4 heads, hidden 32; llama: 2 key/value heads, ffn_hidden 48, untied head, rope_theta 10000, norm_eps 1e-05, $scaled" \
  --init-from "$r/bad_theta"
expect_train init_unscaled "--init-from: '$r/bad_unscaled' holds a model of vocab 257, max_seq 64, 8 layers, 4 heads, hidden 32; llama: 2 key/value heads, ffn_hidden 48, untied head, rope_theta 10000, norm_eps 1e-05; the job's model has vocab 257, max_seq 64, 8 layers, 4 heads, hidden 32; llama: 2 key/value heads, ffn_hidden 48, untied head, rope_theta 10000, norm_eps 1e-05, $scaled" \
  --init-from "$r/bad_unscaled"
expect_train init_missing_shard "--init-from: $r/bad_missing_shard/model.safetensors.index.json: field 'weight_map'" \
  --init-from "$r/bad_missing_shard"

[[ $fail -eq 0 ]] && echo "PASS: Hugging Face Llama directories, sharded, both ways match PyTorch; bad input is named"
exit $fail
