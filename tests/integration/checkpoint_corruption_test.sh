#!/usr/bin/env bash
# Corrupt, truncated and incomplete checkpoints: `loom ckpt verify`, `loom ckpt diff` (exit 2) and
# loading refuse them naming the file and chunk; `loom train` falls back to the previous valid checkpoint, says so, and
# continues exactly; with no valid checkpoint left, or a checkpoint of another model, it stops with
# an error. Offline tools refuse bad flags and leave nothing half-written.
# Usage: checkpoint_corruption_test.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
sed "s#text: \([^,}]*\)#text: $jobdir/\1#; s/^steps: .*/parallel: {tp: 2, dp: 2, zero: 1}\ncheckpoint: {every: 2}\nsteps: 8/" \
  "$job" > "$dir/job.yaml"
fail=0
mpi() { timeout 300 mpirun --oversubscribe -np 4 "$loom" train --config "$dir/job.yaml" "$@"; }
. "$(dirname "$0")/expect.sh"
mpi --checkpoint-dir "$dir/reference" --dump-losses "$dir/reference.txt" > "$dir/reference.log" 2>&1 \
  || { tail "$dir/reference.log"; echo "FAIL: reference run"; exit 1; }
mpi --checkpoint-dir "$dir/base" --steps 6 > "$dir/base.log" 2>&1 || { echo "FAIL: base run"; exit 1; }

# corrupt CASE: a copy of base whose step 6 is damaged by the command in $2
corrupt_and_resume() {
  local name=$1 damage=$2 why=$3
  local ck="$dir/$name"
  cp -r "$dir/base" "$ck"
  (cd "$ck/step_00000006" && eval "$damage")
  if "$loom" ckpt verify "$ck/step_00000006" > "$ck.verify.log" 2>&1; then
    echo "FAIL $name: verify accepted a damaged checkpoint"; fail=1
  else
    expect "$name: verify names the problem" "$ck.verify.log" "$why"
  fi
  "$loom" ckpt verify "$ck/step_00000004" > /dev/null || { echo "FAIL $name: step 4 broken"; fail=1; }
  # loom ckpt diff reads through the same checks: an error (exit 2) naming the problem.
  "$loom" ckpt diff "$dir/base/step_00000006" "$ck/step_00000006" > "$ck.diff.log" 2>&1
  local code=$?
  [[ $code -eq 2 ]] || { echo "FAIL $name: loom ckpt diff exited $code, expected 2"; fail=1; }
  expect "$name: loom ckpt diff names the problem" "$ck.diff.log" "loom ckpt diff: error: " "$why"
  if ! mpi --checkpoint-dir "$ck" --dump-losses "$ck.losses" > "$ck.log" 2>&1; then
    tail "$ck.log"; echo "FAIL $name: training did not fall back"; fail=1; return
  fi
  expect "$name: training falls back and says why" "$ck.log" \
    "checkpoint $ck/step_00000006 refused:" "$why" \
    "falling back to the previous one, $ck/step_00000004" "resumed from $ck/step_00000004:"
  while read -r line; do
    grep -qxF "$line" "$dir/reference.txt" || { echo "FAIL $name: loss '$line' differs from the uninterrupted run"; fail=1; }
  done < "$ck.losses"
  [[ $(head -1 "$ck.losses" | cut -d' ' -f1) == 5 ]] || { echo "FAIL $name: did not restart at step 5"; fail=1; }
  [[ -d $ck/step_00000006.refused ]] || { echo "FAIL $name: the refused checkpoint was not set aside"; fail=1; }
}
flip() {  # flip FILE: invert one byte 5 bytes before the end (inside the last chunk)
  /usr/bin/python3 -c "
import os, sys
f = open(sys.argv[1], 'r+b'); f.seek(-5, os.SEEK_END); b = f.read(1); f.seek(-5, os.SEEK_END)
f.write(bytes([b[0] ^ 0x40]))" "$1"
}
# reseal: python code that fills in metadata.json's own CRC-32C (field metadata_crc32c: the CRC of
# the file with those 8 hex digits read as zeros), as after an edit made on purpose
reseal='
def crc32c(data):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
def reseal(text):
    key = text.index(b"\"metadata_crc32c\": \"") + len(b"\"metadata_crc32c\": \"")
    text = text[:key] + b"00000000" + text[key + 8:]
    return text[:key] + b"%08x" % crc32c(text) + text[key + 8:]
'
drop_chunk() {  # drop_chunk TENSOR STATE: delete chunk 0 of the entry from metadata.json (resealed)
  /usr/bin/python3 -c "$reseal
import json, sys
m = json.load(open('metadata.json'))
for t in m['tensors']:
    if t['name'] == sys.argv[1] and t['state'] == sys.argv[2]:
        del t['chunks'][0]
open('metadata.json', 'wb').write(reseal(json.dumps(m, indent=1).encode()))" "$1" "$2"
}
export -f flip drop_chunk
export reseal
corrupt_and_resume flipped "flip rank_00001.safetensors" \
  "rank_00001.safetensors: tensor '"
grep -qE "rank_00001.safetensors: tensor '[^']+' state '[a-z_]+' chunk [0-9]+: checksum mismatch in block" "$dir/flipped.verify.log" \
  || { echo "FAIL flipped: verify does not name the chunk and block"; fail=1; }
grep -qE "rank_00001.safetensors: tensor '[^']+' state '[a-z_]+' chunk [0-9]+: checksum mismatch in block" "$dir/flipped.log" \
  || { echo "FAIL flipped: loading does not name the chunk and block"; fail=1; }
corrupt_and_resume truncated "truncate -s -1000 rank_00002.safetensors" \
  "rank_00002.safetensors: truncated or overwritten"
grep -qE "rank_00002.safetensors: truncated or overwritten: .*; lost: tensor '[^']+' state '[a-z_]+' chunk [0-9]+ \(bytes" "$dir/truncated.verify.log" \
  || { echo "FAIL truncated: verify does not name a lost chunk"; fail=1; }
corrupt_and_resume missing_file "rm rank_00003.safetensors" \
  "rank_00003.safetensors: missing data file of the checkpoint"
grep -qE "rank_00003.safetensors: missing data file .*; lost: tensor '[^']+' state '[a-z_]+' chunk [0-9]+ .* and [0-9]+ more chunk" "$dir/missing_file.log" \
  || { echo "FAIL missing_file: loading does not name the lost chunks"; fail=1; }
corrupt_and_resume missing_chunk "drop_chunk h.1.mlp.c_fc.weight exp_avg" \
  "tensor 'h.1.mlp.c_fc.weight' state 'exp_avg'"
grep -q "a chunk is missing" "$dir/missing_chunk.log" || { echo "FAIL missing_chunk: load message"; fail=1; }
# One digit of the metadata changed, the JSON still valid: the file's own checksum catches it.
corrupt_and_resume metadata_digit "sed -i 's/\"step\": \"6\"/\"step\": \"7\"/' metadata.json" \
  "step_00000006/metadata.json: field 'metadata_crc32c': the file's CRC-32C is"
# The same edit sealed again: the step no longer matches its directory.
corrupt_and_resume metadata_step "sed -i 's/\"step\": \"6\"/\"step\": \"7\"/' metadata.json && python3 -c \"\$reseal
t = open('metadata.json', 'rb').read(); open('metadata.json', 'wb').write(reseal(t))\"" \
  "step_00000006/metadata.json: field 'step': 7, but the directory is step_00000006"

# Resuming an older step of the same directory sets the newer ones aside (they belong to a run
# that is not continued) instead of mixing them with the new run's.
cp -r "$dir/base" "$dir/older"
if mpi --checkpoint-dir "$dir/older" --load "$dir/older/step_00000002" > "$dir/older.log" 2>&1; then
  [[ -d $dir/older/step_00000004.abandoned && -d $dir/older/step_00000006.abandoned ]] \
    && grep -q "resumed from $dir/older/step_00000002" "$dir/older.log" \
    && "$loom" ckpt verify "$dir/older/step_00000008" > /dev/null \
    && echo "PASS resuming an older step sets the newer checkpoints aside" \
    || { echo "FAIL older: $(ls "$dir/older")"; fail=1; }
else
  tail "$dir/older.log"; echo "FAIL: resuming an older step"; fail=1
fi
# --load of a step directory under another name loads that directory, not a sibling named after
# its step (here a damaged one).
mkdir -p "$dir/renamed"
cp -r "$dir/base/step_00000004" "$dir/renamed/mycopy"
cp -r "$dir/base/step_00000004" "$dir/renamed/step_00000004"
flip "$dir/renamed/step_00000004/rank_00000.safetensors"
if mpi --checkpoint-dir "$dir/renamed_out" --load "$dir/renamed/mycopy" --dump-losses "$dir/renamed.losses" > "$dir/renamed.log" 2>&1; then
  grep -q "resumed from $dir/renamed/mycopy" "$dir/renamed.log" \
    && [[ $(head -1 "$dir/renamed.losses") == $(grep '^5 ' "$dir/reference.txt") ]] \
    && echo "PASS --load of a renamed step directory loads it" \
    || { echo "FAIL renamed: $(grep -i resum "$dir/renamed.log")"; fail=1; }
else
  tail "$dir/renamed.log"; echo "FAIL: --load of a renamed step directory"; fail=1
fi
# An uncommitted save is never loaded, even when named.
cp -r "$dir/base/step_00000004" "$dir/renamed/step_00000004.tmp"
if mpi --checkpoint-dir "$dir/tmp_out" --load "$dir/renamed/step_00000004.tmp" > "$dir/tmp_load.log" 2>&1; then
  echo "FAIL: an uncommitted save was loaded"; fail=1
else
  expect "--load of an uncommitted save" "$dir/tmp_load.log" "'$dir/renamed/step_00000004.tmp' is an uncommitted save"
fi
# --load with --no-resume is contradictory.
if mpi --checkpoint-dir "$dir/x" --load "$dir/base" --no-resume > "$dir/contra.log" 2>&1; then
  echo "FAIL: --load with --no-resume accepted"; fail=1
else
  expect "--load with --no-resume" "$dir/contra.log" "--load: set, but --no-resume is given"
fi

# No valid checkpoint left: an error, not a silent fresh start.
cp -r "$dir/base" "$dir/none"
for s in 2 4 6; do flip "$dir/none/step_0000000$s/rank_00000.safetensors"; done
if mpi --checkpoint-dir "$dir/none" > "$dir/none.log" 2>&1; then
  echo "FAIL none: training started although every checkpoint is corrupt"; fail=1
else
  expect "no valid checkpoint" "$dir/none.log" "no valid checkpoint in '$dir/none'" "no older checkpoint left"
fi
# A checkpoint of another model.
sed 's/hidden: 64/hidden: 32/' "$dir/job.yaml" > "$dir/other_model.yaml"
if timeout 300 mpirun --oversubscribe -np 4 "$loom" train --config "$dir/other_model.yaml" \
    --load "$dir/base" --checkpoint-dir "$dir/other_model" > "$dir/other_model.log" 2>&1; then
  echo "FAIL: a checkpoint of another model was loaded"; fail=1
else
  expect "another model" "$dir/other_model.log" \
    "$dir/base/step_00000006/metadata.json: field 'model.hidden': the checkpoint has 64, the job's model has 32"
fi
# A checkpoint directory that cannot be made (here: it would be under a file) stops the run before
# training, with the reason from world rank 0 (which makes and locks it) and the others naming it.
touch "$dir/a_file"
if mpi --checkpoint-dir "$dir/a_file/ckpt" --steps 4 > "$dir/unwritable.log" 2>&1; then
  echo "FAIL: training reported success although no checkpoint could be written"; fail=1
else
  expect "unwritable checkpoint directory" "$dir/unwritable.log" \
    "--checkpoint-dir: create directory '$dir/a_file': Not a directory" \
    "--checkpoint-dir: world rank 0 could not use '$dir/a_file/ckpt' (see its error)"
  grep -q "^step " "$dir/unwritable.log" && { echo "FAIL: training started without a checkpoint directory"; fail=1; }
fi
# A checkpoint directory inside a checkpoint (--checkpoint-dir mixed up with --load) is refused
# before anything is written there.
ls -lAR --time-style=full-iso "$dir/base" > "$dir/inside_before.txt"
if mpi --checkpoint-dir "$dir/base/step_00000006" --steps 8 > "$dir/inside.log" 2>&1; then
  echo "FAIL: a run saved inside a checkpoint"; fail=1
else
  expect "checkpoint directory inside a checkpoint" "$dir/inside.log" \
    "--checkpoint-dir '$dir/base/step_00000006': inside the checkpoint '$(realpath "$dir/base/step_00000006")'; choose a path outside every checkpoint"
  ls -lAR --time-style=full-iso "$dir/base" | cmp -s - "$dir/inside_before.txt" \
    || { echo "FAIL: the refused run changed $dir/base"; fail=1; }
fi
# Offline tools: bad flags and a corrupt source leave no output checkpoint.
"$loom" ckpt reshard "$dir/base" --to tp=3 "$dir/bad_to" > "$dir/bad_to.log" 2>&1 && { echo "FAIL: tp=3 accepted"; fail=1; }
expect "reshard --to tp=3" "$dir/bad_to.log" "model.heads (4) must be divisible by tp (3)"
"$loom" ckpt reshard "$dir/base" --to tp=2,xp=2 "$dir/bad_to" > "$dir/bad_to.log" 2>&1 && { echo "FAIL: xp accepted"; fail=1; }
expect "reshard --to xp=2" "$dir/bad_to.log" "item 'xp=2'"
cp -r "$dir/base/step_00000006" "$dir/bad_src" && flip "$dir/bad_src/rank_00003.safetensors"
"$loom" ckpt reshard "$dir/bad_src" --to tp=1 "$dir/from_bad" > "$dir/from_bad.log" 2>&1 \
  && { echo "FAIL: resharded a corrupt checkpoint"; fail=1; }
expect "reshard of a corrupt checkpoint" "$dir/from_bad.log" "checksum mismatch"
[[ ! -e $dir/from_bad ]] || { echo "FAIL: reshard left $dir/from_bad: $(ls -a "$dir/from_bad")"; fail=1; }
# Outputs that would damage something: OUT inside the source, a FIFO or the source's own file as
# the export target. Each is refused and the source still verifies.
cp -r "$dir/base/step_00000006" "$dir/src6"
"$loom" ckpt reshard "$dir/src6" --to tp=1 "$dir/src6/out" > "$dir/into_src.log" 2>&1 && { echo "FAIL: reshard into its source"; fail=1; }
expect "reshard into its source" "$dir/into_src.log" "output directory '$dir/src6/out': inside the checkpoint '$dir/src6'"
[[ ! -e $dir/src6/out ]] || { echo "FAIL: reshard into its source left $dir/src6/out"; fail=1; }
"$loom" ckpt export "$dir/src6" --safetensors "$dir/src6/rank_00000.safetensors" > "$dir/over_src.log" 2>&1 && { echo "FAIL: export over its source"; fail=1; }
expect "export over its source" "$dir/over_src.log" "inside the checkpoint '$dir/src6'"
ln -s "$dir/src6/new.st" "$dir/dangling"  # a link into the source, its target not there yet
"$loom" ckpt export "$dir/src6" --safetensors "$dir/dangling" > "$dir/dangling.log" 2>&1 && { echo "FAIL: export through a link into its source"; fail=1; }
expect "export through a link into its source" "$dir/dangling.log" "inside the checkpoint '$dir/src6'"
[[ -L $dir/dangling && ! -e $dir/src6/new.st ]] || { echo "FAIL: the link or the source was changed"; fail=1; }
ln -s "$dir/exported.st" "$dir/link"  # a link elsewhere is written through
"$loom" ckpt export "$dir/src6" --safetensors "$dir/link" > "$dir/link.log" 2>&1 \
  && [[ -L $dir/link && -s $dir/exported.st ]] && echo "PASS export through a link writes its target" \
  || { echo "FAIL: export through a link: $(cat "$dir/link.log")"; fail=1; }
mkfifo "$dir/fifo"
"$loom" ckpt export "$dir/src6" --safetensors "$dir/fifo" > "$dir/fifo.log" 2>&1 && { echo "FAIL: export over a FIFO"; fail=1; }
expect "export over a FIFO" "$dir/fifo.log" "'$dir/fifo': exists and is not a regular file"
[[ -p $dir/fifo ]] || { echo "FAIL: export replaced the FIFO"; fail=1; }
# Nor into another committed checkpoint beside the one read.
"$loom" ckpt export "$dir/base/step_00000006" --safetensors "$dir/base/step_00000004/w.st" > "$dir/beside.log" 2>&1 && { echo "FAIL: export into a sibling checkpoint"; fail=1; }
expect "export into a sibling checkpoint" "$dir/beside.log" "inside the checkpoint '$dir/base/step_00000004'"
"$loom" ckpt verify "$dir/src6" > /dev/null || { echo "FAIL: the source was damaged"; fail=1; }
ls "$dir" | grep -q '\.tmp\.' && { echo "FAIL: temporary files left: $(ls "$dir" | grep '\.tmp\.')"; fail=1; }
"$loom" ckpt reshard "$dir/base" --to tp=2,tp=1 "$dir/twice" > "$dir/twice.log" 2>&1 && { echo "FAIL: tp given twice accepted"; fail=1; }
expect "reshard --to tp=2,tp=1" "$dir/twice.log" "'tp' is given twice"
"$loom" ckpt verify "$dir/nowhere" > "$dir/nowhere.log" 2>&1 && { echo "FAIL: verify of nothing"; fail=1; }
expect "verify of a missing directory" "$dir/nowhere.log" "$dir/nowhere: no such checkpoint directory"
"$loom" ckpt export "$dir/base" --safetensors "$dir/x.st" --names gpt > "$dir/names.log" 2>&1 && { echo "FAIL: --names gpt"; fail=1; }
expect "export --names gpt" "$dir/names.log" "--names: expected 'hf' or 'loom', got 'gpt'"

# Interrupted (SIGINT at the 3rd tensor, through the real handler): exit 130, and neither a
# partial output nor a temporary file is left; OUT's own `latest` (no checkpoints) is kept.
mkdir -p "$dir/int_out" && echo keep > "$dir/int_out/latest"
LOOM_FAULT_INTERRUPT_AT=3 "$loom" ckpt reshard "$dir/base" --to tp=2 "$dir/int_out" > "$dir/int.log" 2>&1
rc=$?
[[ $rc -eq 130 ]] || { echo "FAIL: interrupted reshard exited $rc, expected 130"; fail=1; }
expect "interrupted reshard" "$dir/int.log" "interrupted by SIGINT while writing the resharded checkpoint"
[[ $(ls -A "$dir/int_out") == latest && $(cat "$dir/int_out/latest") == keep ]] \
  || { echo "FAIL: interrupted reshard left: $(ls -A "$dir/int_out")"; fail=1; }
LOOM_FAULT_INTERRUPT_AT=3 "$loom" ckpt export "$dir/base" --safetensors "$dir/int.st" > "$dir/int_export.log" 2>&1
rc=$?
[[ $rc -eq 130 ]] || { echo "FAIL: interrupted export exited $rc, expected 130"; fail=1; }
expect "interrupted export" "$dir/int_export.log" "interrupted by SIGINT while writing '$dir/int.st'"
ls "$dir" | grep -q '^int\.st' && { echo "FAIL: interrupted export left: $(ls "$dir" | grep '^int\.st')"; fail=1; }
# A SIGINT ignored from the start (a script's background job, nohup for SIGHUP) stays ignored.
(trap '' INT; LOOM_FAULT_INTERRUPT_AT=3 exec "$loom" ckpt export "$dir/base" --safetensors "$dir/ign.st") > "$dir/ign.log" 2>&1 \
  && [[ -s $dir/ign.st ]] && echo "PASS an ignored SIGINT stays ignored" \
  || { echo "FAIL: export with SIGINT ignored: $(cat "$dir/ign.log")"; fail=1; }
# Two writers into one OUT: the second is refused while the first holds the directory's lock,
# and its failure removes nothing of the first's.
mkdir -p "$dir/locked"
# The holder is one process with no children (killing it releases the lock at once).
/usr/bin/python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); print("locked", flush=True)
time.sleep(60)' "$dir/locked" > "$dir/holder.log" 2>&1 &
holder=$!
for _ in $(seq 200); do grep -q locked "$dir/holder.log" && break; sleep 0.05; done
"$loom" ckpt reshard "$dir/base" --to tp=2 "$dir/locked" > "$dir/locked.log" 2>&1 && { echo "FAIL: reshard into a locked OUT"; fail=1; }
expect "reshard into a directory another writer holds" "$dir/locked.log" "output directory '$dir/locked': another process is writing into it"
kill $holder; wait $holder 2>/dev/null
[[ -d $dir/locked && -z $(ls -A "$dir/locked") ]] || { echo "FAIL: refused reshard touched $dir/locked"; fail=1; }
# A target layout the model allows but the checkpoint's global batch (8) does not: written, with
# a note (a job may resume it with another global_batch).
"$loom" ckpt reshard "$dir/base" --to dp=16 "$dir/dp16" > "$dir/dp16.log" 2>&1 || { echo "FAIL: reshard --to dp=16 refused: $(cat "$dir/dp16.log")"; fail=1; }
expect "reshard to a dp the global batch does not divide" "$dir/dp16.log" "note: the checkpoint's data settings do not fit this layout (data.global_batch (8) must be divisible by dp (16)): a job resuming it with" "must change them"
"$loom" ckpt verify "$dir/dp16" > /dev/null || { echo "FAIL: the dp=16 checkpoint does not verify"; fail=1; }
for bad in "tp= 2" "tp=+2" "tp=99999999999"; do
  "$loom" ckpt reshard "$dir/base" --to "$bad" "$dir/badnum" > "$dir/badnum.log" 2>&1 && { echo "FAIL: --to '$bad' accepted"; fail=1; }
  expect "reshard --to '$bad'" "$dir/badnum.log" "expected a whole number from 0 to 999999"
done
[[ ! -e $dir/badnum ]] || { echo "FAIL: a refused --to left $dir/badnum"; fail=1; }
# Paths of the wrong kind: a file for a checkpoint or an output directory; a root's `latest` or
# a committed checkpoint as an output.
"$loom" ckpt inspect "$dir/job.yaml" > "$dir/kind.log" 2>&1 && { echo "FAIL: inspect of a file"; fail=1; }
expect "inspect of a file" "$dir/kind.log" "$dir/job.yaml: not a directory (expected a checkpoint root or a step directory)"
"$loom" ckpt reshard "$dir/base" --to tp=1 "$dir/job.yaml" > "$dir/kind.log" 2>&1 && { echo "FAIL: reshard into a file"; fail=1; }
expect "reshard into a file" "$dir/kind.log" "output directory '$dir/job.yaml': exists and is not a directory"
cp "$dir/base/latest" "$dir/latest.saved"
"$loom" ckpt export "$dir/dp16" --safetensors "$dir/base/latest" > "$dir/kind.log" 2>&1 && { echo "FAIL: export over a root's latest"; fail=1; }
expect "export over a root's latest" "$dir/kind.log" "the 'latest' file of the checkpoint root"
cmp -s "$dir/base/latest" "$dir/latest.saved" || { echo "FAIL: export replaced $dir/base/latest"; fail=1; }
"$loom" ckpt export "$dir/dp16" --safetensors "$dir/dp16.st" > "$dir/kind.log" 2>&1 || { echo "FAIL: export of dp16: $(cat "$dir/kind.log")"; fail=1; }
expect "export names the step it exported" "$dir/kind.log" "wrote $dir/dp16.st from $dir/dp16/step_00000006:"
"$loom" ckpt import "$dir/dp16.st" "$dir/base/step_00000004/imported" > "$dir/kind.log" 2>&1 && { echo "FAIL: import into a checkpoint"; fail=1; }
expect "import into a committed checkpoint" "$dir/kind.log" "output directory '$dir/base/step_00000004/imported': inside the checkpoint '$dir/base/step_00000004'"
[[ ! -e $dir/base/step_00000004/imported ]] || { echo "FAIL: import wrote into step 4"; fail=1; }
# inspect describes a checkpoint with a missing data file from its metadata, then fails naming it.
cp -r "$dir/base/step_00000006" "$dir/nofile" && rm "$dir/nofile/rank_00001.safetensors"
"$loom" ckpt inspect "$dir/nofile" > "$dir/nofile.log" 2>&1 && { echo "FAIL: inspect of a damaged checkpoint exited 0"; fail=1; }
expect "inspect of a checkpoint missing a data file" "$dir/nofile.log" "step         6" "wte" \
  "the checkpoint is damaged (described above from its metadata): $dir/nofile/rank_00001.safetensors: missing data file"
# A newest checkpoint another user cannot read is named, not skipped for an older one (as
# nobody: root reads everything). The binary and the checkpoint are copied under /tmp, which
# nobody can reach wherever the build tree is.
if [[ $(id -u) -eq 0 ]] && command -v setpriv > /dev/null; then
  pdir=$(mktemp -d /tmp/loom-perm.XXXXXX) && chmod 755 "$pdir"
  trap 'rm -rf "$pdir"' EXIT  # also when a step below fails or the script is interrupted
  cp "$loom" "$pdir/loom" && cp -r "$dir/base" "$pdir/ck" && chmod -R a+rX "$pdir/ck"
  as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$pdir/loom" "$@"; }
  as_nobody ckpt inspect "$pdir/ck/step_00000004" > /dev/null 2>&1 || { echo "FAIL: nobody cannot read a readable checkpoint under $pdir"; fail=1; }
  chmod 700 "$pdir/ck/step_00000006"
  as_nobody ckpt inspect "$pdir/ck" > "$dir/perm.log" 2>&1 && { echo "FAIL: inspect as nobody described an older checkpoint"; fail=1; }
  expect "an unreadable newest checkpoint" "$dir/perm.log" "open '$pdir/ck/step_00000006/metadata.json': Permission denied"
  chmod 755 "$pdir/ck/step_00000006" && chmod 700 "$pdir/ck"
  as_nobody ckpt verify "$pdir/ck" > "$dir/perm.log" 2>&1 && { echo "FAIL: verify as nobody of an unreadable root"; fail=1; }
  expect "an unreadable root" "$dir/perm.log" "list '$pdir/ck': Permission denied"
  rm -rf "$pdir"
fi
# inspect of a root names what else it holds; verify notes a file the metadata does not list;
# export and reshard refuse an uncommitted *.tmp directory, as loading does.
"$loom" ckpt inspect "$dir/base" > "$dir/root.log" 2>&1
expect "inspect of a root" "$dir/root.log" "root         $dir/base: latest step_00000006; older checkpoints step_00000004, step_00000002"
cp -r "$dir/base/step_00000006" "$dir/stray" && touch "$dir/stray/rank_00009.safetensors"
"$loom" ckpt verify "$dir/stray" > "$dir/stray.log" 2>&1 || { echo "FAIL: verify with a stray file failed"; fail=1; }
expect "verify notes a stray file" "$dir/stray.log" "note: $dir/stray/rank_00009.safetensors is not part of the checkpoint"
mv "$dir/stray" "$dir/stray.tmp"
"$loom" ckpt export "$dir/stray.tmp" --safetensors "$dir/stray.st" > "$dir/stray.log" 2>&1 && { echo "FAIL: export of a *.tmp"; fail=1; }
expect "export of an uncommitted *.tmp" "$dir/stray.log" "'$dir/stray.tmp' is an uncommitted save or a deletion in progress (*.tmp), never loaded"
# verify --all: every committed checkpoint of a root, naming each that fails.
cp -r "$dir/base" "$dir/all" && flip "$dir/all/step_00000004/rank_00001.safetensors"
"$loom" ckpt verify --all "$dir/all" > "$dir/all.log" 2>&1 && { echo "FAIL: verify --all passed a damaged step 4"; fail=1; }
expect "verify --all" "$dir/all.log" "OK $dir/all/step_00000006:" "FAILED $dir/all/step_00000004: $dir/all/step_00000004/rank_00001.safetensors: tensor '" \
  "OK $dir/all/step_00000002:" "$dir/all: step_00000004 failed verification"
# A metadata.json that is not a checkpoint's (a project's, a dataset's) does not make its directory
# a checkpoint; --hf-dir with a config.json that cannot be replaced touches nothing.
mkdir -p "$dir/proj" && echo '{"name": "my project"}' > "$dir/proj/metadata.json"
"$loom" ckpt export "$dir/base" --safetensors "$dir/proj/m.st" > "$dir/proj.log" 2>&1 \
  && echo "PASS export beside a project's metadata.json" || { echo "FAIL: export into $dir/proj: $(cat "$dir/proj.log")"; fail=1; }
mkdir -p "$dir/hf/config.json" && echo OLD > "$dir/hf/model.safetensors"
"$loom" ckpt export "$dir/base" --hf-dir "$dir/hf" > "$dir/hf.log" 2>&1 && { echo "FAIL: --hf-dir over a config.json directory"; fail=1; }
expect "--hf-dir whose config.json is a directory" "$dir/hf.log" "'$dir/hf/config.json': exists and is not a regular file"
[[ $(cat "$dir/hf/model.safetensors") == OLD && $(ls -A "$dir/hf" | wc -l) -eq 2 ]] || { echo "FAIL: --hf-dir failure changed $dir/hf: $(ls -A "$dir/hf")"; fail=1; }
# A report that cannot be written out is a failure.
"$loom" ckpt inspect "$dir/base" > /dev/full 2> "$dir/full.log" && { echo "FAIL: inspect into a full device exited 0"; fail=1; }
expect "inspect into a full device" "$dir/full.log" "writing the standard output failed"
exit $fail
