#!/usr/bin/env bash
# `loom launch` and `loom coordinator` end to end on this machine (real mpirun, real sockets):
#  1. a 4-rank job with a fixed layout runs through the coordinator and ends exactly as
#     `mpirun loom train` of the same job does (same final losses), while random bytes, an
#     oversized frame, a malformed message and another job's token are sent to the service;
#  2. the planner chooses the layout when the job has none, and the job trains;
#  3. a worker that hangs: without snapshots the job stops, exit 1, the failing ranks and the
#     reason named; with them (the default) the job restarts from its snapshots and finishes;
#  4. Ctrl-C: exit 130, every worker stopped;
#  5. malformed manifests, a bad job and a bad launcher are refused before anything starts;
#  6. `loom coordinator` with workers started by hand under mpirun;
#  7. a job launched again resumes: the summary names the steps trained, or nothing to train; a
#     slow checkpoint load is not taken for a stalled job.
# Usage: launch_test.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
sed "s#text: \([^,}]*\)#text: $jobdir/\1#" "$job" > "$dir/job.yaml"
fail=0
. "$(dirname "$0")/expect.sh"
wait_for() {  # wait_for FILE PATTERN: up to 60 s
  for _ in $(seq 600); do grep -q "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# 1. Fixed layout, garbage on the wire, same result as loom train.
sed "s/^steps: .*/steps: 200/; s/micro_batch: 2/micro_batch: 2/" "$dir/job.yaml" > "$dir/long.yaml"
sed "s/^steps:/parallel: {tp: 2, dp: 2, cp: 1, pp: 1, vpp: 1, zero: 1, sp: false}\nsteps:/" \
  "$dir/long.yaml" > "$dir/fixed.yaml"
"$loom" launch "$dir/fixed.yaml" > "$dir/fixed.log" 2>&1 &
pid=$!
if wait_for "coordinator at" "$dir/fixed.log"; then
  port=$(sed -n 's/.*coordinator at 127.0.0.1:\([0-9]*\).*/\1/p' "$dir/fixed.log")
  /usr/bin/python3 - "$port" <<'PY'
import os, socket, struct, sys
port = int(sys.argv[1])
def send(data):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(data)
    try:
        s.recv(64)
    except OSError:
        pass
    s.close()
send(os.urandom(16) + b"\xff" * 48)              # random bytes (a huge size)
send(struct.pack("<I", 64 << 20))                # an oversized frame
send(struct.pack("<I", 6) + b"\xff" * 6)         # not a message
token = b"\x0a\x05other"                         # another job's token ...
send(struct.pack("<I", len(token) + 2) + token + b"\x32\x00")  # ... with a Done
PY
fi
wait $pid
code=$?
[[ $code -eq 0 ]] || { echo "FAIL fixed layout: exit $code"; tail -20 "$dir/fixed.log"; fail=1; }
expect "launch with a fixed layout" "$dir/fixed.log" \
  "4 ranks via mpirun | layout tp=2 cp=1 pp=1 vpp=1 dp=2 zero=1 sp=off (the job's parallel section)" \
  "step   200/200" "done in" \
  "coordinator: rejected 4 connection(s) (wrong token 1, malformed 1, oversized 2, protocol 0)"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun --oversubscribe -np 4 \
  "$loom" train --config "$dir/fixed.yaml" > "$dir/train.log" 2>&1 || { echo "FAIL: loom train"; fail=1; }
want=$(grep -o "train loss [0-9.]* (first" "$dir/train.log" | cut -d' ' -f3)
got=$(grep -o "train loss [0-9.]* |" "$dir/fixed.log" | cut -d' ' -f3)
[[ -n $want && $want == "$got" ]] && echo "PASS launch trains exactly as loom train (final loss $got)" \
  || { echo "FAIL: launch final loss '$got', loom train '$want'"; fail=1; }

# 2. The planner chooses (and a stale coordinator address in the environment does not leak in).
LOOM_COORDINATOR=127.0.0.1:9 LOOM_JOB_TOKEN=stale "$loom" launch "$dir/job.yaml" --np 2 > "$dir/planned.log" 2>&1 \
  || { echo "FAIL: planned launch"; tail "$dir/planned.log"; fail=1; }
expect "planner-chosen layout" "$dir/planned.log" "2 ranks via mpirun" "(planner: best of" \
  "predicted" "done in"

# 3. A hung worker, in a job without snapshots (nothing to restart from).
sed "s/^steps:/snapshot: {enabled: false}\nsteps:/" "$dir/fixed.yaml" > "$dir/nosnap.yaml"
LOOM_FAULT_HANG=1:3 LOOM_COMM_TIMEOUT_MS=3000 LOOM_ABORT_GRACE_MS=1000 \
  timeout 120 "$loom" launch "$dir/nosnap.yaml" > "$dir/hang.log" 2>&1
code=$?
[[ $code -eq 1 ]] || { echo "FAIL hung worker: exit $code"; fail=1; }
expect "a hung worker stops the job" "$dir/hang.log" "loom launch: error: mpirun (the workers' launcher) exited" \
  "failed after step 2:" "did not complete within " "ended without reporting"
# The message gives the time actually waited: the 3 s deadline, plus a little on a busy machine.
waited=$(grep -o "did not complete within [0-9]* ms" "$dir/hang.log" | head -1 | grep -o "[0-9][0-9]*")
[[ -n $waited && $waited -ge 3000 && $waited -lt 6000 ]] \
  && echo "PASS the hang is reported after the 3 s deadline (${waited} ms)" \
  || { echo "FAIL hung worker: waited '${waited}' ms, expected 3000..6000"; fail=1; }
# The ranks that never reported are named; the hung rank 1 is one of them.
grep -Eq "ranks? ([0-9]+, )*1(, [0-9]+)*( and [0-9]+ more)? ended without reporting" "$dir/hang.log" \
  && echo "PASS the silent ranks are named, the hung rank 1 among them" \
  || { echo "FAIL hung worker: rank 1 not named among the silent ranks"; fail=1; }

# ... and with in-memory snapshots (the default): the hang stops the first incarnation, the job
# restarts from its snapshots and finishes, trained exactly as without the hang.
sed "s/^steps: .*/steps: 8/" "$dir/fixed.yaml" > "$dir/short.yaml"
"$loom" launch "$dir/short.yaml" > "$dir/short.log" 2>&1 || { echo "FAIL: short"; fail=1; }
LOOM_FAULT_HANG=1:3 LOOM_COMM_TIMEOUT_MS=3000 LOOM_ABORT_GRACE_MS=1000 \
  timeout 120 "$loom" launch "$dir/short.yaml" > "$dir/hang_restart.log" 2>&1
code=$?
[[ $code -eq 0 ]] || { echo "FAIL hung worker with snapshots: exit $code"; tail -20 "$dir/hang_restart.log"; fail=1; }
expect "a hung worker's job restarts from its snapshots" "$dir/hang_restart.log" \
  "restarting from the in-memory snapshots (restart 1 of at most 3)" \
  "restart 1 recovered from in-memory snapshot of step" "done in"
# (The final train loss is the mean of the run's own last steps: the restarted run has fewer.)
want=$(grep -o "val loss [0-9.]*" "$dir/short.log")
got=$(grep -o "val loss [0-9.]*" "$dir/hang_restart.log")
[[ -n $want && $want == "$got" ]] && echo "PASS the restarted job trains as the uninterrupted one ($got)" \
  || { echo "FAIL restarted: '$got', uninterrupted: '$want'"; fail=1; }

# 4. Ctrl-C.
sed "s/^steps: .*/steps: 100000/" "$dir/fixed.yaml" > "$dir/endless.yaml"
"$loom" launch "$dir/endless.yaml" --token ctrl-c-test > "$dir/int.log" 2>&1 &
pid=$!
wait_for "step " "$dir/int.log" || echo "(no progress seen before the interrupt)"
kill -INT $pid
wait $pid
code=$?
[[ $code -eq 130 ]] || { echo "FAIL Ctrl-C: exit $code"; fail=1; }
expect "Ctrl-C stops the job" "$dir/int.log" "interrupted (Interrupt): stopping 4 workers"
sleep 1
if grep -l "LOOM_JOB_TOKEN=ctrl-c-test" /proc/[0-9]*/environ 2>/dev/null | grep -q .; then
  echo "FAIL Ctrl-C: workers are still running"; fail=1
else
  echo "PASS no worker left after Ctrl-C"
fi

# SIGTERM (e.g. from a batch system): exit 143, workers stopped.
"$loom" launch "$dir/endless.yaml" --token term-test > "$dir/term.log" 2>&1 &
pid=$!
wait_for "step " "$dir/term.log" || echo "(no progress seen before SIGTERM)"
kill -TERM $pid
wait $pid
code=$?
[[ $code -eq 143 ]] && echo "PASS SIGTERM: exit 143" || { echo "FAIL SIGTERM: exit $code"; fail=1; }
sleep 1
if grep -l "LOOM_JOB_TOKEN=term-test" /proc/[0-9]*/environ 2>/dev/null | grep -q .; then
  echo "FAIL SIGTERM: workers are still running"; fail=1
fi

# 5. Bad input, refused before anything starts.
bad_cluster() {  # bad_cluster NAME YAML EXPECTED
  printf '%s\n' "$2" > "$dir/$1.yaml"
  if "$loom" launch "$dir/job.yaml" --cluster "$dir/$1.yaml" > "$dir/$1.log" 2>&1; then
    echo "FAIL manifest $1 accepted"; fail=1
  else
    expect "manifest $1" "$dir/$1.log" "$3"
  fi
}
good_types='device_types: {cpu: {memory: 1e9, memory_bandwidth: 1e10, peak_flops: {fp32: 1e10}}}'
bad_cluster no_types 'name: x
nodes: [{name: a, devices: 2, type: cpu}]' "$dir/no_types.yaml"
bad_cluster bad_devices "$good_types
nodes: [{name: a, devices: -2, type: cpu}]
links: {intra_node: {bandwidth: 1e9, latency: 1e-6}}" "$dir/bad_devices.yaml:2: field 'nodes[0].devices'"
bad_cluster bad_type "$good_types
nodes: [{name: a, devices: 2, type: gpu}]
links: {intra_node: {bandwidth: 1e9, latency: 1e-6}}" "$dir/bad_type.yaml:2: field 'nodes[0].type'"
bad_cluster bad_bandwidth "$good_types
nodes: [{name: a, devices: 2, type: cpu}]
links: {intra_node: {bandwidth: fast, latency: 1e-6}}" "$dir/bad_bandwidth.yaml:3: field 'links.intra_node.bandwidth'"
bad_cluster unknown_key "$good_types
nodes: [{name: a, devices: 2, type: cpu, gpus: 8}]
links: {intra_node: {bandwidth: 1e9, latency: 1e-6}}" "unknown field"
sed 's/^steps:/colour: blue\nsteps:/' "$dir/job.yaml" > "$dir/bad_job.yaml"
"$loom" launch "$dir/bad_job.yaml" > "$dir/bad_job.log" 2>&1 && { echo "FAIL: bad job accepted"; fail=1; }
expect "bad job" "$dir/bad_job.log" "field 'colour': unknown field"
grep -q "coordinator at" "$dir/bad_job.log" && { echo "FAIL: started with a bad job"; fail=1; }
"$loom" launch "$dir/job.yaml" --launcher pbs > "$dir/bad_launcher.log" 2>&1 && { echo "FAIL: pbs"; fail=1; }
expect "bad launcher" "$dir/bad_launcher.log" "expected mpirun, srun or none, got 'pbs'"

# 6. The coordinator alone; workers started by hand.
"$loom" coordinator "$dir/fixed.yaml" --token by-hand > "$dir/coord.log" 2>&1 &
pid=$!
if wait_for "coordinator at" "$dir/coord.log"; then
  endpoint=$(sed -n 's/.*coordinator at \(127.0.0.1:[0-9]*\).*/\1/p' "$dir/coord.log")
  LOOM_COORDINATOR=$endpoint LOOM_JOB_TOKEN=by-hand OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun --oversubscribe -np 4 "$loom" worker \
    > "$dir/by_hand_workers.log" 2>&1 || { echo "FAIL: workers by hand"; fail=1; }
fi
wait $pid || { echo "FAIL: loom coordinator exit $?"; fail=1; }
expect "loom coordinator with workers started by hand" "$dir/coord.log" \
  "4 ranks via none" "start 4 workers" "done in"

# 7. Run again with checkpoints: the summary says which steps this run trained, and a finished
#    job says there is nothing to train (not "step 0 | loss 0.0000").
sed "s#^steps: .*#checkpoint: {dir: $dir/again_ck, every: 2}\nsteps: 4#" "$dir/job.yaml" > "$dir/again.yaml"
"$loom" launch "$dir/again.yaml" --np 2 > "$dir/again1.log" 2>&1 || { echo "FAIL: again1"; tail -3 "$dir/again1.log"; fail=1; }
sed -i 's/^steps: 4/steps: 6/' "$dir/again.yaml"
"$loom" launch "$dir/again.yaml" --np 2 > "$dir/again2.log" 2>&1 || { echo "FAIL: again2"; tail -3 "$dir/again2.log"; fail=1; }
"$loom" launch "$dir/again.yaml" --np 2 > "$dir/again3.log" 2>&1 || { echo "FAIL: again3"; tail -3 "$dir/again3.log"; fail=1; }
expect "a fresh run's summary" "$dir/again1.log" ": 4 steps | train loss"
expect "a resumed run's summary" "$dir/again2.log" ": steps 5-6 (resumed at step 4) | train loss"
expect "a finished job run again" "$dir/again3.log" ": nothing to train (already at step 6 of 6)"
grep -q "loss 0.0000" "$dir/again3.log" && { echo "FAIL: a placeholder progress line: $(grep 'loss 0.0000' "$dir/again3.log")"; fail=1; }
# Loading a checkpoint takes as long as the file system does: a slow load (10 s here) before the
# first step is not taken for a stuck job, though no step completes for longer than the 5 s of
# silence allowed (heartbeats still come; 5 s also bounds registering, on a busy machine).
sed -i 's/^steps: 6/steps: 8/' "$dir/again.yaml"
LOOM_FAULT_CKPT_SLOW_MS=10000 "$loom" launch "$dir/again.yaml" --np 2 --silence-s 5 --heartbeat-ms 200 \
  > "$dir/again4.log" 2>&1 || { echo "FAIL: a slow load was taken for a stall: $(grep -i error "$dir/again4.log")"; fail=1; }
expect "a slow load is not a stall" "$dir/again4.log" ": steps 7-8 (resumed at step 6) | train loss"
# ... but only while the ranks say they are loading: a rank stuck in its first step of a run
# that saves checkpoints (a collective deadline far away) is still found within the 5 s.
sed "s#again_ck#hang1_ck#; s/^steps:/snapshot: {enabled: false}\nsteps:/" "$dir/again.yaml" > "$dir/hang1.yaml"
LOOM_FAULT_HANG=1:1 LOOM_COMM_TIMEOUT_MS=600000 LOOM_ABORT_GRACE_MS=1000 timeout 120 \
  "$loom" launch "$dir/hang1.yaml" --np 2 --silence-s 5 --heartbeat-ms 200 > "$dir/hang1.log" 2>&1
code=$?
[[ $code -eq 1 ]] || { echo "FAIL hang in step 1: exit $code"; fail=1; }
expect "a rank stuck in step 1 of a checkpointing run" "$dir/hang1.log" \
  "no step completed for 5 s (none yet: starting, or loading a checkpoint)" "no checkpoint has been committed"
# The closing line says what a rerun starts from: the load again when nothing was committed
# under dir; no "resumes from it" when the job would refuse the checkpoints there.
sed "s#again_ck#hang2_ck#; s#every: 2}#every: 2, load: $dir/again_ck}#; s/^steps: 8/snapshot: {enabled: false}\nsteps: 12/" "$dir/again.yaml" > "$dir/hang2.yaml"
LOOM_FAULT_HANG=1:9 LOOM_COMM_TIMEOUT_MS=600000 LOOM_ABORT_GRACE_MS=1000 timeout 120 \
  "$loom" launch "$dir/hang2.yaml" --np 2 --silence-s 5 --heartbeat-ms 200 > "$dir/hang2.log" 2>&1
expect "after a failure, what the same command loads" "$dir/hang2.log" "resumed from $dir/again_ck/step_00000008" \
  "no checkpoint has been committed under $dir/hang2_ck; the same command loads $dir/again_ck again"
sed "s#every: 2}#every: 2, resume: false}#" "$dir/again.yaml" > "$dir/noresume.yaml"
"$loom" launch "$dir/noresume.yaml" --np 2 > "$dir/noresume.log" 2>&1 && { echo "FAIL: resume false over checkpoints started"; fail=1; }
expect "a refused directory is named without a resume promise" "$dir/noresume.log" \
  "already holds checkpoints" "the newest committed checkpoint is $dir/again_ck/step_00000008"
grep -q "the same command resumes from it" "$dir/noresume.log" && { echo "FAIL: noresume promises a resume"; fail=1; }

# 8. The job settings loom train takes as flags, given to loom launch: they reach every worker;
#    paths are relative to where the command runs (here a subdirectory), not to the job file.
mkdir -p "$dir/sub"
(cd "$dir/sub" && "$loom" launch ../job.yaml --np 2 --steps 4 --checkpoint-dir flags_ck) \
  > "$dir/flags1.log" 2>&1 || { echo "FAIL: flags1"; tail -3 "$dir/flags1.log"; fail=1; }
expect "launch --steps --checkpoint-dir" "$dir/flags1.log" ": 4 steps | train loss" \
  "saved $dir/sub/flags_ck/step_00000004"
# The checkpoints record the job file as given and the flags with their values, as loom train's
# do (not the launcher's rewrite of it).
# (grep, not grep -q, reads to the end: under pipefail an early exit could fail inspect's writes.)
"$loom" ckpt inspect "$dir/sub/flags_ck" | grep "^saved        by loom .*, from $dir/job.yaml with --steps 4 --checkpoint-dir $dir/sub/flags_ck (job text recorded" > /dev/null \
  && "$loom" ckpt inspect --job "$dir/sub/flags_ck" | tail -n +2 | cmp -s - "$dir/job.yaml" \
  && echo "PASS launch: provenance names the job file and the flags; --job gives the file" \
  || { echo "FAIL launch provenance: $("$loom" ckpt inspect "$dir/sub/flags_ck" | grep '^saved ')"; fail=1; }
# --steps does not move the LR decay (the job file's steps: 10), as under loom train.
grep -q '"decay_steps": "10"' "$dir/sub/flags_ck/step_00000004/metadata.json" \
  && echo "PASS launch --steps keeps the job file's decay" \
  || { echo "FAIL: launch --steps moved the decay: $(grep decay_steps "$dir/sub/flags_ck/step_00000004/metadata.json")"; fail=1; }
(cd "$dir/sub" && "$loom" launch ../job.yaml --np 2 --steps 6 --load flags_ck --checkpoint-dir flags_ck2) \
  > "$dir/flags2.log" 2>&1 || { echo "FAIL: flags2"; tail -3 "$dir/flags2.log"; fail=1; }
expect "launch --load" "$dir/flags2.log" "resumed from $dir/sub/flags_ck/step_00000004" \
  ": steps 5-6 (resumed at step 4) | train loss" "saved $dir/sub/flags_ck2/step_00000006"
"$loom" launch "$dir/job.yaml" --np 2 --load "$dir/nope" > "$dir/flags3.log" 2>&1 \
  && { echo "FAIL: launch --load of a missing checkpoint started"; fail=1; }
expect "launch --load of nothing" "$dir/flags3.log" "--load: no checkpoint in '$dir/nope': no such file or directory"
"$loom" launch "$dir/job.yaml" --np 2 --load "$dir/sub/flags_ck" --no-resume > "$dir/flags4.log" 2>&1 \
  && { echo "FAIL: launch --load --no-resume started"; fail=1; }
expect "launch --load --no-resume" "$dir/flags4.log" "--load: set, but --no-resume is given"
# The workers' own errors name the flag too (sent with the plan), here rank 0's refusal to
# continue a directory that holds checkpoints with --no-resume; and a directory inside a
# checkpoint is refused by the launcher before any worker starts.
"$loom" launch "$dir/job.yaml" --np 2 --checkpoint-dir "$dir/sub/flags_ck" --no-resume > "$dir/flags5.log" 2>&1 \
  && { echo "FAIL: launch --no-resume over checkpoints started"; fail=1; }
expect "launch: the workers name the flags" "$dir/flags5.log" \
  "rank 0 (" "--checkpoint-dir: '$dir/sub/flags_ck' already holds checkpoints" "drop --no-resume to continue it"
"$loom" launch "$dir/job.yaml" --np 2 --checkpoint-dir "$dir/sub/flags_ck/step_00000004" > "$dir/flags6.log" 2>&1 \
  && { echo "FAIL: launch into a checkpoint started"; fail=1; }
expect "launch --checkpoint-dir inside a checkpoint" "$dir/flags6.log" \
  "loom launch: error: --checkpoint-dir '$dir/sub/flags_ck/step_00000004': inside the checkpoint"
grep -q "rank 0 (" "$dir/flags6.log" && { echo "FAIL: workers started for a checkpoint directory inside a checkpoint"; fail=1; }
exit $fail
