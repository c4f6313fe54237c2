#!/usr/bin/env bash
# Fine-tuning from a checkpoint (checkpoint.init_from, --init-from): only the model weights are
# loaded, into another layout; the step, data position, LR schedule and AdamW state start fresh.
#   1. A trains 5 steps with tp2 dp2 (4 ranks) and saves; its checkpoint is exported.
#   2. B starts from A's checkpoint with pp2 dp2 zero1 (4 ranks), C from its step directory with
#      dp2 zero3 (2 ranks), both for 2 steps; check_finetune.py replays steps 1 and 2 in PyTorch
#      from A's exported weights with a new AdamW and compares their losses.
#   3. B's checkpoint records 2 optimizer updates and 2 steps of samples, not A's 5 + 2.
#   4. B run again with the same flags resumes its own checkpoint instead of A's weights.
#   5. Bad input: init_from together with load; a checkpoint of another model; a directory with
#      no checkpoint. Each is an error naming the field or file, exit non-zero, nothing saved.
#   6. `loom ckpt import`: A's Hugging Face export imported and trained from (--init-from, and
#      --load, which says it was imported and reports no settings changed; and --init-from the
#      file itself, imported on the way) gives B's losses bit for bit; a file as the hub ships GPT-2 (prefix, mask buffers, tied lm_head, F16, no
#      metadata) imports with --heads to A's weights rounded to F16; an untied head, a missing
#      tensor, a truncated file, an overflowing
#      shape, a missing head count and a non-empty output root are named errors.
# Usage: run_finetune_check.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
sed "s#text: \([^,}]*\)#text: $jobdir/\1#" "$job" > "$dir/job.yaml"
fail=0
train() {  # train NAME NP "parallel spec" args...
  local name=$1 np=$2 spec=$3
  shift 3
  sed "s/^steps:/parallel: {$spec}\nsteps:/" "$dir/job.yaml" > "$dir/$name.yaml"
  timeout 300 mpirun --oversubscribe -np "$np" "$loom" train --config "$dir/$name.yaml" "$@" \
    > "$dir/$name.log" 2>&1
}
train a 4 "tp: 2, dp: 2" --steps 5 --checkpoint-dir "$dir/a" \
  || { tail -20 "$dir/a.log"; echo "FAIL: run a"; exit 1; }
"$loom" ckpt export "$dir/a" --safetensors "$dir/a.safetensors" --names loom > /dev/null \
  || { echo "FAIL: export of a"; exit 1; }

train b 4 "pp: 2, dp: 2, zero: 1" --steps 2 --init-from "$dir/a" --checkpoint-dir "$dir/b" \
  --dump-losses "$dir/b.txt" || { tail -20 "$dir/b.log"; echo "FAIL: run b"; exit 1; }
train c 2 "dp: 2, zero: 3" --steps 2 --init-from "$dir/a/step_00000005" \
  --dump-losses "$dir/c.txt" || { tail -20 "$dir/c.log"; echo "FAIL: run c"; exit 1; }
for run in b c; do
  grep -q "^initialised from $dir/a/step_00000005: model weights only" "$dir/$run.log" \
    || { echo "FAIL: run $run does not say it started from a's weights"; fail=1; }
  grep -q "resumed from" "$dir/$run.log" && { echo "FAIL: run $run resumed instead"; fail=1; }
done
/usr/bin/python3 "$here/check_finetune.py" "$dir/a.safetensors" --job "$dir/job.yaml" \
  --losses "$dir/b.txt" "$dir/c.txt" || fail=1

"$loom" ckpt inspect "$dir/b/step_00000002" > "$dir/b.inspect" || { echo "FAIL: inspect b"; fail=1; }
grep -q "^optimizer    adamw, 2 updates" "$dir/b.inspect" \
  || { echo "FAIL: b's checkpoint: $(grep ^optimizer "$dir/b.inspect") (expected 2 updates)"; fail=1; }
grep -q "^data .* 16 samples consumed" "$dir/b.inspect" \
  || { echo "FAIL: b's checkpoint: $(grep ^data "$dir/b.inspect") (expected 16 samples)"; fail=1; }

# Started again (a restarted fine-tuning job): its own checkpoint wins over init_from.
train b 4 "pp: 2, dp: 2, zero: 1" --steps 3 --init-from "$dir/a" --checkpoint-dir "$dir/b" \
  --dump-losses "$dir/b3.txt" || { tail -20 "$dir/b.log"; echo "FAIL: run b, restarted"; exit 1; }
grep -q "^resumed from $dir/b/step_00000002: continuing at step 3" "$dir/b.log" \
  || { echo "FAIL: the restarted run b did not resume its own checkpoint"; fail=1; }
grep -q "initialised from" "$dir/b.log" && { echo "FAIL: the restarted run b took a's weights"; fail=1; }
[[ $(cut -d' ' -f1 "$dir/b3.txt") == 3 ]] || { echo "FAIL: the restarted run b ran steps $(cut -d' ' -f1 "$dir/b3.txt" | tr '\n' ' ')"; fail=1; }

# Import: A's Hugging Face export back into a checkpoint, bit-exact: a run from it (B's layout and
# steps) gives B's losses bit for bit.
"$loom" ckpt export "$dir/a" --safetensors "$dir/a_hf.safetensors" > /dev/null \
  || { echo "FAIL: export of a with Hugging Face names"; exit 1; }
"$loom" ckpt import "$dir/a_hf.safetensors" "$dir/imported" > "$dir/import.log" 2>&1 \
  || { cat "$dir/import.log"; echo "FAIL: import"; fail=1; }
"$loom" ckpt verify "$dir/imported" > /dev/null || { echo "FAIL: the imported checkpoint does not verify"; fail=1; }
train d 4 "pp: 2, dp: 2, zero: 1" --steps 2 --init-from "$dir/imported" --checkpoint-dir "$dir/d" \
  --dump-losses "$dir/d.txt" || { tail -20 "$dir/d.log"; echo "FAIL: run d"; exit 1; }
cmp -s "$dir/b.txt" "$dir/d.txt" && echo "run d (from the imported export): losses bit-identical to run b" \
  || { echo "FAIL: run d's losses differ from b's:"; paste "$dir/b.txt" "$dir/d.txt"; fail=1; }
# --init-from the exported file itself: imported on the way (into the run's checkpoint
# directory, removed after), the same losses; without a checkpoint directory it says what to do.
train f 4 "pp: 2, dp: 2, zero: 1" --steps 2 --init-from "$dir/a_hf.safetensors" --checkpoint-dir "$dir/f" \
  --dump-losses "$dir/f.txt" || { tail -20 "$dir/f.log"; echo "FAIL: run f"; exit 1; }
cmp -s "$dir/b.txt" "$dir/f.txt" && grep -q "initialised from $dir/a_hf.safetensors: model weights only" "$dir/f.log" \
  && [[ ! -e $dir/f/init_weights.tmp ]] \
  && echo "run f (--init-from the safetensors file): losses bit-identical to run b, the import removed" \
  || { echo "FAIL: run f: $(grep -i "init" "$dir/f.log"; ls "$dir/f")"; paste "$dir/b.txt" "$dir/f.txt"; fail=1; }
out=$("$loom" train --config "$dir/job.yaml" --steps 1 --init-from "$dir/a_hf.safetensors" 2>&1)
[[ $? -eq 1 && $out == *"--init-from: '$dir/a_hf.safetensors' holds weights, not a checkpoint: they are imported into checkpoint.dir on the way, so set it (or --checkpoint-dir)"* ]] \
  && echo "--init-from a safetensors file without a checkpoint directory: refused, saying why" \
  || { echo "FAIL: init-from weights without a directory: $out"; fail=1; }
# --load of an imported checkpoint starts from its weights the same way, saying so, without
# reporting the settings an import does not have as changed.
train e 4 "pp: 2, dp: 2, zero: 1" --steps 2 --load "$dir/imported" --checkpoint-dir "$dir/e" \
  --dump-losses "$dir/e.txt" || { tail -20 "$dir/e.log"; echo "FAIL: run e"; exit 1; }
cmp -s "$dir/b.txt" "$dir/e.txt" && grep -q "imported/step_00000000 was imported (weights only, no training state): training starts at step 1" "$dir/e.log" \
  && ! grep -q "settings changed" "$dir/e.log" \
  && echo "run e (--load of the import): losses bit-identical to run b, no settings reported changed" \
  || { echo "FAIL: run e: $(grep -i "import\|changed" "$dir/e.log")"; paste "$dir/b.txt" "$dir/e.txt"; fail=1; }
# As the Hugging Face hub ships GPT-2: a `transformer.` prefix, attention-mask buffers, a tied
# lm_head, F16, no metadata (so --heads is needed). Imported and exported again with Loom's names,
# the weights are A's rounded to F16.
PYTHONPATH="$here" /usr/bin/python3 - "$dir" <<'PY' || { echo "FAIL: writing hub-style files"; fail=1; }
import sys
import numpy as np
import torch_gpt
d = sys.argv[1]
hf = torch_gpt.read_safetensors(f"{d}/a_hf.safetensors")
out = {}
for name, t in hf.items():
    out["transformer." + name] = t.astype(np.float16)
    if name.endswith("ln_1.weight"):  # the mask buffers of each block
        block = name[:-len("ln_1.weight")]
        n = hf["wpe.weight"].shape[0]
        out[f"transformer.{block}attn.bias"] = np.tril(np.ones((1, 1, n, n), np.float16))
        out[f"transformer.{block}attn.masked_bias"] = np.array(-1e4, np.float16)
out["lm_head.weight"] = out["transformer.wte.weight"]
torch_gpt.write_safetensors(f"{d}/hub.safetensors", out)
bad = dict(out)
bad["lm_head.weight"] = bad["lm_head.weight"] + np.float16(1)
torch_gpt.write_safetensors(f"{d}/hub_untied.safetensors", bad)
nan = dict(out)
nan["transformer.h.0.mlp.c_proj.weight"] = nan["transformer.h.0.mlp.c_proj.weight"].copy()
nan["transformer.h.0.mlp.c_proj.weight"].flat[5] = np.nan
torch_gpt.write_safetensors(f"{d}/hub_nan.safetensors", nan)
del out["transformer.h.1.mlp.c_fc.bias"]
torch_gpt.write_safetensors(f"{d}/hub_missing.safetensors", out)
# A header whose shape overflows 64 bits when multiplied out (a zero-length range must not pass).
import json, struct
header = json.dumps({"wte.weight": {"dtype": "F32", "shape": [2**62, 4], "data_offsets": [0, 0]}})
with open(f"{d}/hub_overflow.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header.encode())
PY
"$loom" ckpt import "$dir/hub.safetensors" "$dir/hub" > "$dir/hub.log" 2>&1 \
  && { echo "FAIL: import without --heads or n_head succeeded"; fail=1; }
grep -q "the number of attention heads is not in the file's metadata (n_head): give it with --heads" \
  "$dir/hub.log" || { echo "FAIL: import without heads: $(cat "$dir/hub.log")"; fail=1; }
"$loom" ckpt import "$dir/hub.safetensors" "$dir/hub" --heads 4 > "$dir/hub.log" 2>&1 \
  || { cat "$dir/hub.log"; echo "FAIL: import of the hub-style file"; fail=1; }
grep -q "28 tensors (5 buffers or tied head skipped)" "$dir/hub.log" \
  || { echo "FAIL: hub import: $(cat "$dir/hub.log")"; fail=1; }
"$loom" ckpt export "$dir/hub" --names loom --safetensors "$dir/hub_loom.safetensors" > /dev/null
# The hub's directory layout: model.safetensors without n_head, config.json with it.
mkdir -p "$dir/hub_dir"
cp "$dir/hub.safetensors" "$dir/hub_dir/model.safetensors"
echo '{"model_type": "gpt2", "n_head": 4, "n_layer": 2}' > "$dir/hub_dir/config.json"
"$loom" ckpt import "$dir/hub_dir" "$dir/hub_from_dir" > "$dir/hub_dir.log" 2>&1 \
  && grep -q "GPT-2 of 2 layers, 4 heads, .* 28 tensors (5 buffers or tied head skipped)" "$dir/hub_dir.log" \
  && "$loom" ckpt diff "$dir/hub_from_dir" "$dir/hub" > "$dir/hub_dir_diff.log" 2>&1 \
  && echo "hub directory import: $(tail -1 "$dir/hub_dir_diff.log")" \
  || { echo "FAIL: import of a hub-style directory: $(cat "$dir/hub_dir.log" "$dir/hub_dir_diff.log")"; fail=1; }
"$loom" ckpt import "$dir/hub_dir" "$dir/hub_dir2" --heads 2 > "$dir/hub_dir2.log" 2>&1 \
  && { echo "FAIL: --heads 2 against config.json's n_head 4 accepted"; fail=1; }
grep -q "hub_dir/config.json: --heads 2 contradicts field 'n_head' 4" "$dir/hub_dir2.log" \
  || { echo "FAIL: hub_dir2: $(cat "$dir/hub_dir2.log")"; fail=1; }
PYTHONPATH="$here" /usr/bin/python3 - "$dir" <<'PY' || fail=1
import sys
import numpy as np
import torch_gpt
d = sys.argv[1]
want = torch_gpt.read_safetensors(f"{d}/a.safetensors")
got = torch_gpt.read_safetensors(f"{d}/hub_loom.safetensors")
bad = [n for n in want if not np.array_equal(got[n], want[n].astype(np.float16).astype(np.float32))]
if list(got) != list(want) or bad:
    print(f"FAIL: the hub-style import differs from A's weights rounded to F16: {bad[:5]}")
    sys.exit(1)
print(f"hub-style import: {len(got)} tensors, each A's weights rounded to F16, exactly")
PY
head -c 200000 "$dir/hub.safetensors" > "$dir/hub_truncated.safetensors"
for f in untied missing truncated overflow nan; do
  "$loom" ckpt import "$dir/hub_$f.safetensors" "$dir/hub_$f" --heads 4 > "$dir/hub_$f.log" 2>&1 \
    && { echo "FAIL: import of hub_$f succeeded"; fail=1; }
  [[ -e $dir/hub_$f/step_00000000 ]] && { echo "FAIL: import of hub_$f left a checkpoint"; fail=1; }
  echo "hub_$f: $(cat "$dir/hub_$f.log")"
done
grep -q "hub_untied.safetensors: tensor 'lm_head.weight' differs from 'transformer.wte.weight'" \
  "$dir/hub_untied.log" || { echo "FAIL: untied head not named"; fail=1; }
grep -q "hub_missing.safetensors: tensor 'transformer.h.1.mlp.c_fc.bias' \[256\] is missing" \
  "$dir/hub_missing.log" || { echo "FAIL: missing tensor not named"; fail=1; }
grep -q "hub_truncated.safetensors': tensor '.*': data_offsets \[.*) do not hold .* (truncated file?)" "$dir/hub_truncated.log" \
  || { echo "FAIL: truncated file not named"; fail=1; }
grep -q "hub_nan.safetensors: tensor 'transformer.h.0.mlp.c_proj.weight' element 5 is NaN: expected finite weights" \
  "$dir/hub_nan.log" || { echo "FAIL: a NaN weight not named"; fail=1; }
grep -q "hub_overflow.safetensors': tensor 'wte.weight': shape \[4611686018427387904\]...: its size in bytes overflows 64 bits" \
  "$dir/hub_overflow.log" || { echo "FAIL: overflowing shape not named"; fail=1; }
# --heads must agree with the file's own n_head (export writes it).
"$loom" ckpt import "$dir/a_hf.safetensors" "$dir/heads2" --heads 2 > "$dir/heads2.log" 2>&1 \
  && { echo "FAIL: --heads 2 against n_head 4 accepted"; fail=1; }
grep -q "a_hf.safetensors: --heads 2 contradicts the file's metadata n_head 4" "$dir/heads2.log" \
  || { echo "FAIL: heads2: $(cat "$dir/heads2.log")"; fail=1; }
[[ -e $dir/heads2 ]] && { echo "FAIL: heads2 left $dir/heads2"; fail=1; }
"$loom" ckpt import "$dir/a_hf.safetensors" "$dir/imported" > "$dir/again.log" 2>&1 \
  && { echo "FAIL: import into a root with checkpoints succeeded"; fail=1; }
grep -q "already holds checkpoints" "$dir/again.log" || { echo "FAIL: again: $(cat "$dir/again.log")"; fail=1; }

# expect_error NAME PATTERN args...: one process, must fail with PATTERN and save nothing.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  if timeout 120 "$loom" train --config "$dir/job.yaml" --steps 1 --checkpoint-dir "$dir/$name" \
    "$@" > "$dir/$name.log" 2>&1; then
    echo "FAIL: $name: the run succeeded"; fail=1; return
  fi
  grep -qF -- "$pattern" "$dir/$name.log" \
    || { echo "FAIL: $name: expected '$pattern' in: $(tail -3 "$dir/$name.log")"; fail=1; }
  if compgen -G "$dir/$name/step_*" > /dev/null; then echo "FAIL: $name: something was saved"; fail=1; fi
  echo "$name: $(grep -F -- "$pattern" "$dir/$name.log" | head -1)"
}
expect_error with_load "--init-from: set together with --load" \
  --init-from "$dir/a" --load "$dir/a"
sed "s/hidden: 64/hidden: 32/" "$dir/job.yaml" > "$dir/other_model.yaml"
if timeout 120 "$loom" train --config "$dir/other_model.yaml" --steps 1 --init-from "$dir/a" \
  > "$dir/other_model.log" 2>&1; then
  echo "FAIL: other_model: the run succeeded"; fail=1
fi
grep -qF "$dir/a/step_00000005/metadata.json: field 'model.hidden': the checkpoint has 64, the job's model has 32" \
  "$dir/other_model.log" || { echo "FAIL: other_model: $(tail -3 "$dir/other_model.log")"; fail=1; }
grep -qF -- "--init-from: no valid checkpoint in '$dir/a'" "$dir/other_model.log" \
  || { echo "FAIL: other_model: the error does not name --init-from"; fail=1; }
mkdir -p "$dir/empty"
expect_error empty "--init-from: no checkpoint in '$dir/empty'" \
  --init-from "$dir/empty"
# Weights of another model: named with both shapes, nothing saved, nothing left.
sed 's/layers: 2/layers: 4/' "$dir/job.yaml" > "$dir/job4.yaml"
out=$(timeout 120 "$loom" train --config "$dir/job4.yaml" --steps 1 --checkpoint-dir "$dir/other_hf" --init-from "$dir/a_hf.safetensors" 2>&1)
[[ $? -eq 1 && $out == *"--init-from: '$dir/a_hf.safetensors' holds a model of vocab "*", 2 layers, "*"; the job's model has vocab "*", 4 layers, "* ]] \
  && [[ ! -e $dir/other_hf/init_weights.tmp ]] && ! compgen -G "$dir/other_hf/step_*" > /dev/null \
  && echo "other_hf: another model's weights refused by shape, nothing left" \
  || { echo "FAIL: other_hf: $out"; fail=1; }
# Weights that cannot be imported on the way: the import's error, nothing saved, nothing left.
head -c 20000 "$dir/a_hf.safetensors" > "$dir/cut.safetensors"
expect_error weights_file "--init-from: safetensors '$dir/cut.safetensors': tensor " --init-from "$dir/cut.safetensors"
[[ -e $dir/weights_file/init_weights.tmp ]] && { echo "FAIL: weights_file: the import was left"; fail=1; }

[[ $fail -eq 0 ]] && echo "PASS: runs started from a checkpoint's weights in two other layouts match PyTorch, and start a new run"
exit $fail
