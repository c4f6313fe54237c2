#!/usr/bin/env bash
# The tokenizer of `loom ckpt export --hf-dir` against Hugging Face's `tokenizers`: a job that
# reads text (byte tokens) trains 2 steps; its export must carry tokenizer.json that encodes the
# text (ASCII, accented Latin, CJK, a control byte) into exactly Loom's tokens (`loom data
# prepare`'s) and decodes them back, tokenizer_config.json and generation_config.json agreeing
# with the model and the job's sampling (check_hf_tokenizer.js); fine-tuning on text starts from
# it, and is refused from a directory whose tokenizer is another. `--tokenizer none` writes no
# tokenizer; a model trained on token files with a vocabulary other than 256 gets none unless
# asked, and one asked of a model of fewer than 256 tokens is refused by name.
# Usage: run_hf_tokenizer_check.sh LOOM WORK_DIR NODE_MODULES
set -euo pipefail
loom=$1 dir=$2 modules=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files under $dir/tmp
[[ -f $modules/tokenizers/package.json ]] || {
  echo "FAIL: Hugging Face's tokenizers (npm) is not in $modules: run deploy/install-deps.sh"
  exit 1
}
command -v node > /dev/null || { echo "FAIL: node not found: run deploy/install-deps.sh"; exit 1; }

# Text: Shakespeare's first lines, then what a byte tokenizer must not split wrongly.
head -c 6000 "$here/../../data/tinyshakespeare.txt" > "$dir/text.txt"
printf 'ROMEO: café, naïve — 日本語 \x01\ttab\n' >> "$dir/text.txt"
head -c 2000 "$here/../../data/tinyshakespeare.txt" >> "$dir/text.txt"
cat > "$dir/job.yaml" <<YAML
model: {vocab: 256, max_seq: 32, layers: 1, heads: 2, hidden: 32}
data: {text: $dir/text.txt, seq: 32, global_batch: 2}
optimizer: {lr: 1.0e-3}
sample: {temperature: 0.7, top_k: 13}
steps: 2
eval: {batches: 1}
runtime: {threads: 1}
checkpoint: {dir: $dir/ck}
YAML
"$loom" train --config "$dir/job.yaml" > "$dir/train.log" 2>&1 || { cat "$dir/train.log"; exit 1; }
out=$("$loom" ckpt export "$dir/ck" --hf-dir "$dir/hf")
echo "$out"
grep -q "tokenizer.json and tokenizer_config.json: the byte-level tokenizer (256 tokens)" <<<"$out" ||
  { echo "FAIL: the export did not say it wrote the tokenizer"; exit 1; }

# Loom's own tokens of the same text: loom data prepare (train + val is the whole text).
"$loom" data prepare --input "$dir/text.txt" --output-dir "$dir/tok" --val-fraction 0 > /dev/null
/usr/bin/python3 - "$dir/tok/train.bin" "$dir/tokens.json" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
width, count = struct.unpack_from("<IQ", raw, 12)
fmt = {2: "H", 4: "I"}[width]
tokens = list(struct.unpack_from(f"<{count}{fmt}", raw, 32))
json.dump({"tokens": tokens, "temperature": 0.7, "top_k": 13}, open(sys.argv[2], "w"))
PY
NODE_PATH=$modules node "$here/check_hf_tokenizer.js" "$dir/hf" "$dir/text.txt" "$dir/tokens.json"

# --tokenizer none: no tokenizer files (an earlier export's are the user's to keep or remove).
"$loom" ckpt export "$dir/ck" --hf-dir "$dir/hf_none" --tokenizer none > /dev/null
[[ -f $dir/hf_none/generation_config.json && ! -e $dir/hf_none/tokenizer.json &&
   ! -e $dir/hf_none/tokenizer_config.json ]] ||
  { echo "FAIL: --tokenizer none: $(ls "$dir/hf_none")"; exit 1; }

# Fine-tuning from the export on text: its tokenizer is the byte tokens, so it starts. From a
# directory whose tokenizer is another (two ids swapped), the job on text is refused by name.
sed "s#ck}#ck_ft}#" "$dir/job.yaml" > "$dir/job_ft.yaml"
"$loom" train --config "$dir/job_ft.yaml" --init-from "$dir/hf" > "$dir/ft.log" 2>&1 &&
  grep -q "initialised from $dir/hf: model weights only" "$dir/ft.log" ||
  { cat "$dir/ft.log"; echo "FAIL: fine-tuning from the byte-tokenizer export"; exit 1; }
cp -r "$dir/hf" "$dir/hf_other"
/usr/bin/python3 - "$dir/hf_other/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
v = t["model"]["vocab"]
v["A"], v["B"] = v["B"], v["A"]
json.dump(t, open(sys.argv[1], "w"))
PY
sed "s#ck}#ck_other}#" "$dir/job.yaml" > "$dir/job_other.yaml"
if err=$("$loom" train --config "$dir/job_other.yaml" --init-from "$dir/hf_other" 2>&1); then
  echo "FAIL: fine-tuning on text from a model with another tokenizer started"; exit 1
fi
grep -q "comes with its own tokenizer ($dir/hf_other/tokenizer.json: a BPE model of 256 tokens whose ids are not the bytes' values (byte 65)), but the job's data.text is tokenised byte by byte" <<<"$err" ||
  { echo "$err"; echo "FAIL: the refusal does not name the tokenizer"; exit 1; }
[[ $(grep -c 'comes with its own tokenizer' <<<"$err") == 1 && ! -e $dir/ck_other/init_weights.tmp ]] ||
  { echo "$err"; echo "FAIL: said more than once, or left the import"; exit 1; }
echo "init_from a directory with another tokenizer on data.text: $(grep -m1 'comes with' <<<"$err" | cut -c1-160)..."

# Token files and vocab 300: the tokens may be anyone's, so no tokenizer unless asked for.
sed "s#text: [^,]*,#train: $dir/tok/train.bin,#; s/vocab: 256/vocab: 300/; s#ck}#ck300}#" \
  "$dir/job.yaml" > "$dir/job300.yaml"
"$loom" train --config "$dir/job300.yaml" > "$dir/train300.log" 2>&1 || { cat "$dir/train300.log"; exit 1; }
"$loom" ckpt export "$dir/ck300" --hf-dir "$dir/hf300" > /dev/null
[[ ! -e $dir/hf300/tokenizer.json ]] || { echo "FAIL: vocab 300 from token files got a tokenizer"; exit 1; }
"$loom" ckpt export "$dir/ck300" --hf-dir "$dir/hf300" --tokenizer byte > /dev/null
[[ -f $dir/hf300/tokenizer.json ]] || { echo "FAIL: --tokenizer byte wrote no tokenizer"; exit 1; }
echo "--tokenizer none and token files with vocab 300: no tokenizer; --tokenizer byte: written"

# A vocabulary smaller than the bytes: refused, naming the vocabulary; nothing written.
sed "s/vocab: 256/vocab: 200/; s#text: [^,]*,#train: $dir/small.bin,#; s#ck}#ck200}#" \
  "$dir/job.yaml" > "$dir/job200.yaml"
printf 'abcabcabd%.0s' {1..40} > "$dir/small.txt"
"$loom" data prepare --input "$dir/small.txt" --output-dir "$dir/small" > /dev/null
mv "$dir/small/train.bin" "$dir/small.bin"
"$loom" train --config "$dir/job200.yaml" > "$dir/train200.log" 2>&1 || { cat "$dir/train200.log"; exit 1; }
if err=$("$loom" ckpt export "$dir/ck200" --hf-dir "$dir/hf200" --tokenizer byte 2>&1); then
  echo "FAIL: --tokenizer byte of a 200-token model succeeded"; exit 1
fi
grep -q "the byte-level tokenizer has 256 tokens; the model's vocabulary .* has 200" <<<"$err" ||
  { echo "FAIL: unexpected error: $err"; exit 1; }
[[ ! -e $dir/hf200 ]] || { echo "FAIL: the refused export left $(ls "$dir/hf200")"; exit 1; }
echo "a 200-token model: $err"
