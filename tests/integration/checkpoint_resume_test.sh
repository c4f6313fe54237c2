#!/usr/bin/env bash
# Resuming from a checkpoint continues training exactly:
#   * same layout (tp2 pp2 dp2 zero1, 8 ranks; and one process): an uninterrupted 20-step run
#     and a run stopped at step 10 (asynchronous saves every 5 steps) then resumed to step 20 give
#     bit-identical losses for steps 11-20 and bit-identical final parameters;
#   * another layout (the 8-rank checkpoint resumed with cp2 tp2 dp2 zero3, and with one process):
#     losses within 1e-5 relative of the uninterrupted run;
#   * another global batch (16 instead of 8): the sample stream continues after the checkpoint's
#     consumed samples, and the next checkpoint records them;
#   * the same command with --load run again continues the run it started, not the loaded step.
#   * a second run in a checkpoint directory in use is refused; the first is undisturbed;
#   * other training data on a resume is named (the checkpoint records its source and size);
#   * a `latest` edited to name an older step: the newest is resumed, with a warning naming the
#     way back (--load that step);
#   * `loom ckpt diff` of two of its steps reports them different (exit 1), naming the metadata
#     that differs; `--atol 1` accepts them (0), `--atol 1e-6` does not (1); a missing checkpoint
#     and `--rtol -1` are refused (2).
# Every resumed run must say it resumed from step 10 and report steps 11-20 only.
# Usage: checkpoint_resume_test.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
# Every run saves asynchronously every 5 steps (keeping 2, and step 10 as a milestone): saving
# must not disturb training.
sed "s#text: \([^,}]*\)#text: $jobdir/\1#; s/^steps: .*/checkpoint: {every: 5, keep: 2, keep_every: 10}\nsteps: 20/" \
  "$job" > "$dir/job.yaml"
fail=0
base=$dir/job.yaml
train() {  # train NAME NP "parallel spec" args...  (the job: $base)
  local name=$1 np=$2 spec=$3
  shift 3
  if [[ -n $spec ]]; then
    sed "s/^steps:/parallel: {$spec}\nsteps:/" "$base" > "$dir/$name.yaml"
  else
    cp "$base" "$dir/$name.yaml"
  fi
  local cmd=("$loom" train --config "$dir/$name.yaml" --dump-losses "$dir/$name.txt" "$@")
  [[ $np -gt 1 ]] && cmd=(mpirun --oversubscribe -np "$np" "${cmd[@]}")
  if ! timeout 300 "${cmd[@]}" > "$dir/$name.log" 2>&1; then
    tail -20 "$dir/$name.log"
    echo "FAIL: run $name failed"
    exit 1
  fi
}
# resumed NAME CKPT_DIR: the run says it resumed from CKPT_DIR's step 10
resumed() {
  grep -q "resumed from $2/step_00000010 " "$dir/$1.log" \
    || { echo "FAIL $1: did not resume from $2/step_00000010: $(grep -i resum "$dir/$1.log")"; fail=1; }
}
# compare REF GOT LABEL TOL: losses of GOT's steps (exactly 11-20) against the same steps of REF
# (TOL 0: bitwise)
compare() {
  /usr/bin/python3 - "$@" <<'PY' || fail=1
import sys
ref_path, got_path, label, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
ref = dict(l.split() for l in open(ref_path) if l.strip())
got = [l.split() for l in open(got_path) if l.strip()]
if [int(s) for s, _ in got] != list(range(11, 20 + 1)):
    print(f"FAIL {label}: steps {[s for s, _ in got]}, expected 11-20"); sys.exit(1)
worst = 0.0
for step, loss in got:
    r, g = float(ref[step]), float(loss)
    if tol == 0 and ref[step] != loss:
        print(f"FAIL {label}: step {step} loss {loss} != uninterrupted {ref[step]}"); sys.exit(1)
    worst = max(worst, abs(r - g) / abs(r))
if worst > tol:
    print(f"FAIL {label}: worst relative loss difference {worst:.3g} > {tol}"); sys.exit(1)
print(f"PASS {label}: steps {got[0][0]}-{got[-1][0]}, worst relative difference {worst:.3g}")
PY
}

A="tp: 2, pp: 2, dp: 2, zero: 1"
train full8 8 "$A" --dump-params "$dir/full8.st" --checkpoint-dir "$dir/full8.ck"
train part8 8 "$A" --steps 10 --checkpoint-dir "$dir/ck8"
[[ $(ls "$dir/ck8") == $'latest\nstep_00000005\nstep_00000010' ]] || { echo "FAIL: ck8 holds $(ls "$dir/ck8")"; fail=1; }
cp -r "$dir/ck8" "$dir/ck8.saved"  # the resumed run below adds 15 and 20 and drops 5 (keep 2)
# Where it came from (provenance): the version, the job file with the flags that changed it, the
# step's loss as the run logged it; --job prints the job text as read.
"$loom" ckpt inspect "$dir/ck8" > "$dir/ck8_inspect.txt" || { echo "FAIL: inspect ck8"; fail=1; }
loss10=$(awk '$1 == 10 { printf "%.4f", $2 }' "$dir/part8.txt")
grep -qE "^saved        by loom [0-9.]+ at [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z, from $dir/part8.yaml with --steps 10 --checkpoint-dir $dir/ck8 \(job text recorded: loom ckpt inspect --job\); loss $loss10\$" "$dir/ck8_inspect.txt" \
  && echo "PASS provenance: $(grep '^saved  ' "$dir/ck8_inspect.txt")" \
  || { echo "FAIL provenance (loss at step 10: $loss10): $(grep -A1 '^step ' "$dir/ck8_inspect.txt")"; fail=1; }
"$loom" ckpt inspect --job "$dir/ck8" > "$dir/ck8_job.txt" \
  && head -1 "$dir/ck8_job.txt" | grep -q "^# $dir/part8.yaml, as read by the run that saved $dir/ck8/step_00000010; command-line overrides: --steps 10 --checkpoint-dir $dir/ck8\$" \
  && tail -n +2 "$dir/ck8_job.txt" | cmp -s - "$dir/part8.yaml" \
  && echo "PASS inspect --job: the job file, byte for byte" \
  || { echo "FAIL inspect --job: $(head -3 "$dir/ck8_job.txt")"; fail=1; }
train resume8 8 "$A" --checkpoint-dir "$dir/ck8" --dump-params "$dir/resume8.st"
resumed resume8 "$dir/ck8"
compare "$dir/full8.txt" "$dir/resume8.txt" "same layout ($A), resumed at step 11" 0
cmp -s "$dir/full8.st" "$dir/resume8.st" && echo "PASS same layout: final parameters bit-identical" \
  || { echo "FAIL same layout: final parameters differ"; fail=1; }

train full1 1 "" --dump-params "$dir/full1.st" --checkpoint-dir "$dir/full1.ck"
[[ $(ls "$dir/full1.ck") == $'latest\nstep_00000010\nstep_00000015\nstep_00000020' ]] \
  && echo "PASS retention: the newest 2 and the milestone step 10 kept" \
  || { echo "FAIL: retention kept $(ls "$dir/full1.ck" | tr '\n' ' ')"; fail=1; }
# `latest` edited to go back (DeepSpeed's and Megatron's way) is not how Loom chooses: the newest
# complete checkpoint is resumed, with a warning that says how to go back.
cp -r "$dir/full1.ck" "$dir/latest1.ck" && echo step_00000010 > "$dir/latest1.ck/latest"
train latest1 1 "" --checkpoint-dir "$dir/latest1.ck"
grep -q "WARN CKPT $dir/latest1.ck/latest names step_00000010, not the newest complete checkpoint (a save cut short before updating it, or it was edited): resumed from $dir/latest1.ck/step_00000020; to go back to step_00000010: --load $dir/latest1.ck/step_00000010" "$dir/latest1.log" \
  && grep -q "^resumed from $dir/latest1.ck/step_00000020: already at step 20 of 20" "$dir/latest1.log" \
  && echo "PASS an edited latest: the newest resumed, the warning names the way back" \
  || { echo "FAIL edited latest: $(grep -i 'latest\|resumed' "$dir/latest1.log")"; fail=1; }
# Other training data on a resume (another corpus, or the file edited): the checkpoint recorded
# its source and size, and the resume says the sample stream continues in other data.
corpus=$(sed -n 's#^data: {text: \([^,}]*\).*#\1#p' "$base")
head -c 300000 "$corpus" > "$dir/small corpus.txt"
sed "s#text: [^,}]*#text: $dir/small corpus.txt#" "$base" > "$dir/data1.yaml"
cp -r "$dir/full1.ck" "$dir/data1.ck"
timeout 300 "$loom" train --config "$dir/data1.yaml" --checkpoint-dir "$dir/data1.ck" > "$dir/data1.log" 2>&1
grep -q "data1.ck/step_00000020/metadata.json: the training data changed ($(realpath -s "$corpus") ([0-9]* training tokens) -> $dir/small corpus.txt (270000)): the sample stream continues after the 160 samples consumed" "$dir/data1.log" \
  && "$loom" ckpt inspect "$dir/full1.ck" > "$dir/data1.inspect" \
  && grep -q "^             from $(realpath -s "$corpus") ([0-9]* training tokens)$" "$dir/data1.inspect" \
  && ! grep -q "training data" "$dir/latest1.log" \
  && echo "PASS other training data on a resume: named with its size; the same data: nothing said" \
  || { echo "FAIL data source: $(grep -i 'data' "$dir/data1.log" | head -3)"; fail=1; }
train part1 1 "" --steps 10 --checkpoint-dir "$dir/ck1"
train resume1 1 "" --checkpoint-dir "$dir/ck1" --dump-params "$dir/resume1.st"
resumed resume1 "$dir/ck1"
compare "$dir/full1.txt" "$dir/resume1.txt" "same layout (one process), resumed at step 11" 0
cmp -s "$dir/full1.st" "$dir/resume1.st" && echo "PASS one process: final parameters bit-identical" \
  || { echo "FAIL one process: final parameters differ"; fail=1; }

# Without the optimizer state (--no-load-optimizer, Megatron's --no-load-optim): the weights, step
# and data position of step 10, fresh AdamW. Step 11 (its loss is taken before the update) is
# bit-identical to the uninterrupted run, step 12 is not (other moments); the save at step 12
# counts 2 AdamW updates and 12 steps of samples.
train noopt1 1 "" --load "$dir/ck1/step_00000010" --no-load-optimizer --checkpoint-dir "$dir/noopt1" --steps 12
grep -q "^resumed from $dir/ck1/step_00000010: continuing at step 11; without its optimizer state: AdamW starts fresh" "$dir/noopt1.log" \
  && [[ $(sed -n 1p "$dir/noopt1.txt") == $(grep '^11 ' "$dir/full1.txt") ]] \
  && [[ $(sed -n 2p "$dir/noopt1.txt") != $(grep '^12 ' "$dir/full1.txt") ]] \
  && grep -q '"step_count": "2"' "$dir/noopt1/step_00000012/metadata.json" \
  && grep -q '"consumed_samples": "96"' "$dir/noopt1/step_00000012/metadata.json" \
  && echo "PASS --no-load-optimizer: step 11 identical ($(sed -n 1p "$dir/noopt1.txt")), step 12 not; 2 updates, 96 samples recorded" \
  || { echo "FAIL --no-load-optimizer: $(grep -i resumed "$dir/noopt1.log"); $(cat "$dir/noopt1.txt")"; fail=1; }
train other8 8 "cp: 2, tp: 2, dp: 2, zero: 3" --load "$dir/ck8.saved" --checkpoint-dir "$dir/other8"
resumed other8 "$dir/ck8.saved"
compare "$dir/full8.txt" "$dir/other8.txt" "resumed from tp2 pp2 dp2 zero1 with cp2 tp2 dp2 zero3" 1e-5
train other1 1 "" --load "$dir/ck8.saved/step_00000010" \
  --checkpoint-dir "$dir/other1"
resumed other1 "$dir/ck8.saved"
compare "$dir/full8.txt" "$dir/other1.txt" "resumed from tp2 pp2 dp2 zero1 with one process" 1e-5

# Another global batch continues the sample stream (Megatron's consumed_samples). With lr 0 the
# weights stay those of step 10, so the loss of a 16-sample step is the mean of the two 8-sample
# steps that draw the same samples: step 11 of 16 = steps 11 and 12 of 8, and so on. (Drawing
# from index 16 x step instead would give other samples.)
sed 's/^optimizer: {lr: [^,}]*/optimizer: {lr: 0.0, min_lr: 0.0/' "$dir/job.yaml" > "$dir/lr0.yaml"
base=$dir/lr0.yaml
train still8 1 "" --load "$dir/ck8.saved" --checkpoint-dir "$dir/still8"
sed 's/global_batch: 8/global_batch: 16/' "$dir/lr0.yaml" > "$dir/lr0gb16.yaml"
base=$dir/lr0gb16.yaml
train still16 1 "" --load "$dir/ck8.saved" --checkpoint-dir "$dir/still16"
resumed still16 "$dir/ck8.saved"
grep -q "the optimizer settings changed (lr 0.001 -> 0, min_lr 0.0001 -> 0): step 11 on follows the job's" "$dir/still8.log" \
  || { echo "FAIL still8: the changed learning rate is not reported: $(grep -i optimizer "$dir/still8.log")"; fail=1; }
grep -q "optimizer settings changed" "$dir/resume8.log" && { echo "FAIL resume8: unchanged settings reported as changed"; fail=1; }
grep -q "global_batch 8 -> 16: the data continues after the 80 samples consumed" "$dir/still16.log" \
  || { echo "FAIL still16: the change of global batch is not reported"; fail=1; }
/usr/bin/python3 - "$dir/still8.txt" "$dir/still16.txt" "$dir/still16/step_00000020/metadata.json" <<'PY' || fail=1
import json, sys
l8 = {int(s): float(v) for s, v in (l.split() for l in open(sys.argv[1]) if l.strip())}
l16 = {int(s): float(v) for s, v in (l.split() for l in open(sys.argv[2]) if l.strip())}
if sorted(l16) != list(range(11, 21)) or sorted(l8) != list(range(11, 21)):
    print(f"FAIL global batch 16: steps {sorted(l16)} and {sorted(l8)}"); sys.exit(1)
worst = 0.0
for k in range(5):
    want = (l8[11 + 2 * k] + l8[12 + 2 * k]) / 2
    worst = max(worst, abs(l16[11 + k] - want) / abs(want))
if worst > 1e-5:
    print(f"FAIL global batch 16: the losses are not those of the continued sample stream "
          f"(worst relative difference {worst:.3g})"); sys.exit(1)
consumed = int(json.load(open(sys.argv[3]))["data"]["consumed_samples"])
if consumed != 80 + 10 * 16:
    print(f"FAIL global batch 16: step 20 records {consumed} consumed samples, expected 240"); sys.exit(1)
print(f"PASS global batch 8 -> 16 at step 10: steps 11-15 draw the samples of steps 11-20 at 8 "
      f"(worst relative difference {worst:.3g}); step 20 records 240 consumed samples")
PY

# The same command again (a requeue, a preemption): a run started with --load continues its own
# checkpoints instead of going back to the loaded one. Here a rewind inside the root, named with
# a trailing slash as shell completion gives it: --load rew/step_10/ of a root holding steps 10,
# 15 and 20. The first run (to step 10: nothing to train) sets 15 and 20 aside and points
# `latest` at step 10; the second (to 15) loads step 10 again (nothing of it saved yet) and saves
# 15; the third (to 20) continues from that 15, not from 10, with the losses of the
# uninterrupted run. The other-root case: other1's command run again continues other1.
base=$dir/job.yaml
cp -r "$dir/full1.ck" "$dir/rew"
train rewind10 1 "" --load "$dir/rew/step_00000010/" --checkpoint-dir "$dir/rew" --steps 10
[[ $(cat "$dir/rew/latest") == step_00000010 && -d $dir/rew/step_00000020.abandoned ]] \
  && echo "PASS rewind: newer checkpoints set aside, latest names the resumed step 10" \
  || { echo "FAIL rewind: latest says $(cat "$dir/rew/latest"); the root holds $(ls "$dir/rew" | tr '\n' ' ')"; fail=1; }
train rewind15 1 "" --load "$dir/rew/step_00000010/" --checkpoint-dir "$dir/rew" --steps 15
resumed rewind15 "$dir/rew"
train rewind20 1 "" --load "$dir/rew/step_00000010/" --checkpoint-dir "$dir/rew" --steps 20
grep -q "was resumed before; $dir/rew holds that run's checkpoints: continuing from them" "$dir/rewind20.log" \
  && grep -q "resumed from $dir/rew/step_00000015 " "$dir/rewind20.log" \
  && echo "PASS the same --load again continues the run it started (step 15)" \
  || { echo "FAIL rewind20: $(grep -iE 'resum|moved' "$dir/rewind20.log")"; fail=1; }
[[ ! -e $dir/rew/step_00000015.abandoned.2 ]] || { echo "FAIL rewind20: set aside its own step 15"; fail=1; }
[[ $(cat "$dir/rew/load_origin") == "$(realpath -m "$dir/rew/step_00000010")" ]] || { echo "FAIL rewind: load_origin says '$(cat "$dir/rew/load_origin")'"; fail=1; }
cat "$dir/rewind15.txt" "$dir/rewind20.txt" > "$dir/rewind.txt"
/usr/bin/python3 - "$dir/full1.txt" "$dir/rewind.txt" <<'PY' || fail=1
import sys
ref = dict(l.split() for l in open(sys.argv[1]) if l.strip())
got = [l.split() for l in open(sys.argv[2]) if l.strip()]
if [int(s) for s, _ in got] != list(range(11, 21)) or any(ref[s] != v for s, v in got):
    print(f"FAIL rewind: steps 11-20 over two runs differ from the uninterrupted run: {got}"); sys.exit(1)
print("PASS rewind: steps 11-20 over the two runs bit-identical to the uninterrupted run")
PY
train other1again 1 "" --load "$dir/ck8.saved/step_00000010" --checkpoint-dir "$dir/other1"
grep -q "nothing to train (already at step 20 of 20)" "$dir/other1again.log" \
  && grep -q "resumed from $dir/other1/step_00000020 " "$dir/other1again.log" \
  && echo "PASS the same --load into another root again continues that root" \
  || { echo "FAIL other1again: $(grep -iE 'resum|nothing|error' "$dir/other1again.log")"; fail=1; }

# A new run in a directory whose earlier run began from a load forgets that record: the same load
# into it later is another run's, refused, not continued.
rm -rf "$dir/other1/step_"* "$dir/other1/latest"
train fresh1 1 "" --checkpoint-dir "$dir/other1" --steps 5
[[ ! -e $dir/other1/load_origin ]] || { echo "FAIL fresh1: a new run kept $dir/other1/load_origin"; fail=1; }
if timeout 300 "$loom" train --config "$dir/other1again.yaml" --load "$dir/ck8.saved/step_00000010" \
    --checkpoint-dir "$dir/other1" > "$dir/stale.log" 2>&1; then
  echo "FAIL: a load into another run's directory continued it: $(grep -iE 'resum' "$dir/stale.log")"; fail=1
else
  grep -q "already holds checkpoints (newest: $dir/other1/step_00000005) of another run" "$dir/stale.log" \
    && echo "PASS the same load into a directory a new run has since used is refused" \
    || { echo "FAIL stale: $(tail -2 "$dir/stale.log")"; fail=1; }
fi

/usr/bin/python3 "$here/compare_runs.py" "$dir/full1.txt" "$dir/full1.st" "$dir/full8.txt" \
  "$dir/resume8.st" --label "8-rank resumed run vs one uninterrupted process" || fail=1

# One run at a time in a checkpoint directory: a second run started while the first holds it (the
# first stopped with SIGSTOP once it has saved, so it surely still runs) waits
# LOOM_CKPT_LOCK_WAIT_MS for the lock, is refused by name and touches nothing; the first then
# finishes, and its checkpoints verify.
sed "s/^steps: .*/steps: 400/" "$base" > "$dir/lock.yaml"  # seconds of training: time to stop it
timeout 300 "$loom" train --config "$dir/lock.yaml" --checkpoint-dir "$dir/lock_ck" > "$dir/lock1.log" 2>&1 &
guard=$!
first=""
for _ in $(seq 600); do
  [[ -z $first ]] && first=$(pgrep -P $guard -x loom)
  [[ -n $first && -e $dir/lock_ck/latest ]] && break
  sleep 0.1
done
kill -STOP "$first"
# kill returns before the stop takes effect: on a busy machine the run could still write for a
# moment. List the directory only once the process is stopped.
for _ in $(seq 1 50); do [[ $(ps -o state= -p "$first") == T* ]] && break; sleep 0.1; done
ls -lAR --time-style=full-iso "$dir/lock_ck" > "$dir/lock_before.txt"
if LOOM_CKPT_LOCK_WAIT_MS=1000 timeout 60 "$loom" train --config "$dir/lock.yaml" \
    --checkpoint-dir "$dir/lock_ck" > "$dir/lock2.log" 2>&1; then
  echo "FAIL: a second run in a directory in use started"; fail=1
else
  grep -q -- "--checkpoint-dir: '$dir/lock_ck' is in use by another run (it holds $dir/lock_ck/.loom.lock's lock; waited 1000 ms" "$dir/lock2.log" \
    && echo "PASS a second run in a checkpoint directory in use is refused by name" \
    || { echo "FAIL lock2: $(tail -2 "$dir/lock2.log")"; fail=1; }
fi
ls -lAR --time-style=full-iso "$dir/lock_ck" | cmp -s - "$dir/lock_before.txt" \
  && echo "PASS the refused run changed nothing in the directory" \
  || { echo "FAIL: the refused run changed $dir/lock_ck"; fail=1; }
[[ $(ps -o state= -p "$first") == T* ]] || { echo "FAIL: the first run was not stopped during the check"; fail=1; }
kill -CONT "$first"
wait $guard && grep -q "checkpoints: 80 saved to $dir/lock_ck" "$dir/lock1.log" \
  && "$loom" ckpt verify --all "$dir/lock_ck" > /dev/null \
  && echo "PASS the first run finished undisturbed, its checkpoints verify" \
  || { echo "FAIL lock1: $(tail -3 "$dir/lock1.log")"; fail=1; }

# loom ckpt diff of two steps of one run: they differ (exit 1) in every tensor state, and the
# metadata's step, optimizer step count and data position are named; a tolerance wider than
# the change accepts them (exit 0), a narrow one does not (exit 1); a missing checkpoint is an
# error (exit 2).
"$loom" ckpt diff "$dir/ck1/step_00000015" "$dir/ck1" > "$dir/diff.log" 2>&1
code=$?
[[ $code -eq 1 ]] && grep -q "^differ: 300 of 300 tensor states, " "$dir/diff.log" \
  && grep -q "^metadata differs: step: 15 vs 20$" "$dir/diff.log" \
  && grep -q "^metadata differs: optimizer.step_count: 15 vs 20$" "$dir/diff.log" \
  && grep -q "^metadata differs: data.consumed_samples: 120 vs 160$" "$dir/diff.log" \
  && [[ $(grep -c "^metadata differs" "$dir/diff.log") -eq 3 ]] \
  && grep -Eq "^wte +param +8224 +[0-9]+ " "$dir/diff.log" \
  && echo "PASS loom ckpt diff: steps 15 and 20 differ, named" \
  || { echo "FAIL loom ckpt diff 15 20 (exit $code):"; tail -5 "$dir/diff.log"; fail=1; }
"$loom" ckpt diff "$dir/ck1/step_00000015" "$dir/ck1" --atol 1 > "$dir/diff_tol.log" 2>&1
code=$?
[[ $code -eq 0 ]] && grep -q "^close: every element within rtol 0, atol 1 " "$dir/diff_tol.log" \
  && echo "PASS loom ckpt diff --atol 1 accepts them" \
  || { echo "FAIL loom ckpt diff --atol 1 (exit $code): $(tail -2 "$dir/diff_tol.log")"; fail=1; }
"$loom" ckpt diff "$dir/ck1/step_00000015" "$dir/ck1" --atol 1e-6 > "$dir/diff_tol.log" 2>&1
code=$?
[[ $code -eq 1 ]] && grep -Eq "^differ: [0-9]+ elements beyond rtol 0, atol 1e-06 " "$dir/diff_tol.log" \
  && echo "PASS loom ckpt diff --atol 1e-6 does not" \
  || { echo "FAIL loom ckpt diff --atol 1e-6 (exit $code): $(tail -2 "$dir/diff_tol.log")"; fail=1; }
"$loom" ckpt diff "$dir/ck1" "$dir/no_such_ck" > "$dir/diff_err.log" 2>&1
code=$?
[[ $code -eq 2 ]] && grep -q "loom ckpt diff: error: $dir/no_such_ck" "$dir/diff_err.log" \
  && echo "PASS loom ckpt diff: a missing checkpoint is an error (exit 2)" \
  || { echo "FAIL loom ckpt diff missing (exit $code): $(cat "$dir/diff_err.log")"; fail=1; }
"$loom" ckpt diff "$dir/ck1" "$dir/ck1" --rtol -1 > "$dir/diff_err.log" 2>&1
code=$?
[[ $code -eq 2 ]] && grep -q -- "--rtol: expected a number >= 0, got '-1'" "$dir/diff_err.log" \
  && echo "PASS loom ckpt diff: a negative tolerance is refused by name" \
  || { echo "FAIL loom ckpt diff --rtol -1 (exit $code): $(cat "$dir/diff_err.log")"; fail=1; }
exit $fail
