#!/usr/bin/env bash
# Preemption (checkpoint.signal): a signal makes every rank stop at the same step boundary, save a
# checkpoint, wait for its commit and exit 128 + the signal; the same command then resumes it.
#   1. SIGUSR1 to mpirun (which forwards it to every rank) during a 4-rank tp2 dp2 run with
#      asynchronous saves every 25 steps: exit 138, "stopped after step S", step_S committed and
#      verified; resumed for 5 more steps, the losses are bit-identical to an uninterrupted run.
#   2. SIGUSR1 to one rank only: the ranks agree, all stop at the same step after saving it.
#   3. Under `loom launch`: SIGUSR1 to its mpirun, or to loom launch itself (which passes it on);
#      every worker reports the stop and the
#      checkpoint it saved, which verifies; the launcher names it and exits 138 as loom train does.
#   4. checkpoint.signal: SIGUSR2 stops on SIGUSR2 instead (exit 140).
#   (and) checkpoint.exit_after_minutes: the time limit stops the same way, exit 75, under
#      loom train (twice: the same command resumes) and under loom launch.
#   5. checkpoint.signal: none: SIGUSR1 keeps its default action (the run dies, nothing stopped
#      cleanly); Ctrl-C on a plain loom train ends it at once (exit 130) naming the newest
#      committed checkpoint, which the same command resumes; a bad value is an error naming the
#      field.
# Usage: checkpoint_preempt_test.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
sed "s#text: \([^,}]*\)#text: $jobdir/\1#; s/^runtime: .*//; s/^steps: .*/parallel: {tp: 2, dp: 2}\nruntime: {threads: 1, log_every: 1}\ncheckpoint: {every: 25}\nsteps: 3000/" \
  "$job" > "$dir/job.yaml"
fail=0
# start NAME YAML [args]: a 4-rank run in the background ($run_pid, its mpirun $mpirun_pid),
# log NAME.log.
start() {
  local name=$1 yaml=$2
  shift 2
  timeout 300 mpirun --oversubscribe -np 4 "$loom" train --config "$yaml" \
    --checkpoint-dir "$dir/$name" --dump-losses "$dir/$name.txt" "$@" > "$dir/$name.log" 2>&1 &
  run_pid=$!
  mpirun_pid=""
  for _ in $(seq 1 100); do  # this run's mpirun (never another test's)
    mpirun_pid=$(pgrep -P "$run_pid" -x mpirun) && [[ -n $mpirun_pid ]] && return 0
    sleep 0.1
  done
  echo "FAIL: run $name: no mpirun"
  exit 1
}
# at_step NAME N: waits until run NAME has logged step N or a later one (at most 120 s).
at_step() {
  local last
  for _ in $(seq 1 1200); do
    # (mpirun gives the ranks a pty: lines start with \r; loom launch logs every few steps)
    last=$(grep -oE "step +[0-9]+/" "$dir/$1.log" 2>/dev/null | tail -1 | tr -dc 0-9)
    [[ -n $last && $last -ge $2 ]] && return 0
    sleep 0.1
  done
  echo "FAIL: run $1 never reached step $2: $(tail -3 "$dir/$1.log")"
  exit 1
}
# stopped NAME RC SIGNAL: the run exited RC after saving the step it says it stopped after.
stopped() {
  local name=$1 want=$2 sig=$3 rc
  wait "$run_pid"
  rc=$?
  [[ $rc == "$want" ]] || { echo "FAIL: run $name exited $rc, expected $want"; tail -5 "$dir/$name.log"; fail=1; }
  stop_step=$(sed -n "s/^stopped after step \([0-9]*\) on $sig: saved .*/\1/p" "$dir/$name.log")
  [[ -n $stop_step ]] || { echo "FAIL: run $name does not say it stopped on $sig"; fail=1; return; }
  local ck
  ck="$dir/$name/$(printf 'step_%08d' "$stop_step")"
  "$loom" ckpt verify "$ck" > /dev/null || { echo "FAIL: run $name: $ck does not verify"; fail=1; }
  [[ $(cat "$dir/$name/latest" 2>/dev/null) == $(basename "$ck") ]] \
    || { echo "FAIL: run $name: latest is not $(basename "$ck")"; fail=1; }
  [[ $(wc -l < "$dir/$name.txt") == "$stop_step" ]] \
    || { echo "FAIL: run $name ran $(wc -l < "$dir/$name.txt") steps, said $stop_step"; fail=1; }
  echo "run $name: exit $rc, stopped after step $stop_step on $sig, $(basename "$ck") committed"
}

start p "$dir/job.yaml" --steps 3000
at_step p 30
kill -USR1 "$mpirun_pid"
stopped p 138 SIGUSR1
s=$stop_step
if [[ -n $s ]]; then
  timeout 300 mpirun --oversubscribe -np 4 "$loom" train --config "$dir/job.yaml" \
    --checkpoint-dir "$dir/p" --steps $((s + 5)) --dump-losses "$dir/p_resumed.txt" > "$dir/p_resumed.log" 2>&1 \
    || { tail -5 "$dir/p_resumed.log"; echo "FAIL: resuming p"; fail=1; }
  grep -q "^resumed from $dir/p/$(printf 'step_%08d' "$s"): continuing at step $((s + 1))" "$dir/p_resumed.log" \
    || { echo "FAIL: p did not resume from the step it stopped after"; fail=1; }
  timeout 300 mpirun --oversubscribe -np 4 "$loom" train --config "$dir/job.yaml" \
    --checkpoint-dir "$dir/reference" --steps $((s + 5)) --dump-losses "$dir/reference.txt" > "$dir/reference.log" 2>&1 \
    || { tail -5 "$dir/reference.log"; echo "FAIL: reference run"; fail=1; }
  tail -5 "$dir/reference.txt" > "$dir/reference_tail.txt"
  cmp -s "$dir/p_resumed.txt" "$dir/reference_tail.txt" \
    && echo "resumed steps $((s + 1))-$((s + 5)): losses bit-identical to the uninterrupted run" \
    || { echo "FAIL: resumed losses differ:"; paste "$dir/p_resumed.txt" "$dir/reference_tail.txt"; fail=1; }
fi

# One rank only: the vote carries it to all.
start one "$dir/job.yaml"
at_step one 30
ranks=($(pgrep -P "$mpirun_pid" -x loom))  # this run's four ranks, children of its mpirun
[[ ${#ranks[@]} -eq 4 ]] || { echo "FAIL: run one: expected 4 ranks under mpirun $mpirun_pid, got ${#ranks[@]}"; exit 1; }
kill -USR1 "${ranks[3]}"
stopped one 138 SIGUSR1

# launch_bg NAME [CHECKPOINT EXTRA [STEPS]]: `loom launch` of the job saving into $dir/NAME (and the
# checkpoint fields EXTRA, e.g. ", signal: none") in the background, log NAME.log; sets
# $lb_pid (its timeout), $lb_loom (loom launch) and $lb_mpirun.
launch_bg() {
  local name=$1 extra=${2:-} steps=${3:-3000}
  sed "s#^checkpoint: {every: 25}#checkpoint: {every: 25, dir: $dir/$name$extra}#; s/^steps: 3000$/steps: $steps/" "$dir/job.yaml" > "$dir/$name.yaml"
  if [[ -n ${NO_SNAPSHOTS:-} ]]; then
    sed -i "s/^steps:/snapshot: {enabled: false}\nsteps:/" "$dir/$name.yaml"
  fi
  timeout 300 "$loom" launch "$dir/$name.yaml" --np 4 > "$dir/$name.log" 2>&1 &
  lb_pid=$! lb_loom="" lb_mpirun=""
  for _ in $(seq 1 100); do  # timeout / loom launch / mpirun
    lb_loom=$(pgrep -P "$lb_pid" -x loom)
    [[ -n $lb_loom ]] && lb_mpirun=$(pgrep -P "$lb_loom" -x mpirun) && [[ -n $lb_mpirun ]] && return 0
    sleep 0.1
  done
  echo "FAIL: $name: loom launch started no mpirun"
  exit 1
}
# Under loom launch: the workers stop the same way and the launcher names the saved checkpoint.
# launched NAME TARGET: SIGUSR1 to its mpirun (TARGET mpirun) or to loom launch itself (TARGET
# launch, as `sbatch --signal=B:USR1` and a trap in the batch script deliver it), which passes
# it on.
launched() {
  local name=$1 target=$2
  launch_bg "$name"
  local launch_pid=$lb_pid loom_pid=$lb_loom mpirun_pid=$lb_mpirun
  at_step "$name" 30
  if [[ $target == mpirun ]]; then kill -USR1 "$mpirun_pid"; else kill -USR1 "$loom_pid"; fi
  wait "$launch_pid"
  local rc=$?
  [[ $rc == 138 ]] || { echo "FAIL: $name: loom launch exited $rc after the stop, expected 138"; fail=1; }
  # The launcher reports a stop only when every rank stopped after the same step on the signal.
  local step
  step=$(sed -n 's/^stopped after step \([0-9]*\) of [0-9]* in .* on SIGUSR1 (all 4 ranks): saved .*; the same command resumes it$/\1/p' "$dir/$name.log")
  if [[ -z $step ]]; then
    echo "FAIL: $name: loom launch does not name the stop: $(tail -5 "$dir/$name.log")"; fail=1; return
  fi
  local ck
  ck="$dir/$name/$(printf 'step_%08d' "$step")"
  grep -q "saved $ck; the same command resumes it\$" "$dir/$name.log" \
    || { echo "FAIL: $name: the launcher does not name $ck"; fail=1; }
  "$loom" ckpt verify "$ck" > /dev/null || { echo "FAIL: $name: $ck does not verify"; fail=1; }
  [[ $(cat "$dir/$name/latest" 2>/dev/null) == $(basename "$ck") ]] \
    || { echo "FAIL: $name: latest is not $(basename "$ck")"; fail=1; }
  echo "run $name (SIGUSR1 to $target): loom launch exited 138, all 4 ranks stopped after step $step, $(basename "$ck") committed"
}
launched launched mpirun

# The time limit (checkpoint.exit_after_minutes, --exit-after-minutes; Megatron's
# --exit-duration-in-mins): no signal; the ranks agree, save the step and exit 75 (EX_TEMPFAIL);
# the same command resumes from it and stops again at its own limit.
start tl "$dir/job.yaml" --exit-after-minutes 0.15 --steps 100000  # (not done within the limit)
stopped tl 75 "the time limit"
s=$stop_step
if [[ -n $s ]]; then
  timeout 300 mpirun --oversubscribe -np 4 "$loom" train --config "$dir/job.yaml" \
    --checkpoint-dir "$dir/tl" --exit-after-minutes 0.15 --steps 100000 > "$dir/tl_again.log" 2>&1
  rc=$?
  s2=$(sed -n "s/^stopped after step \([0-9]*\) on the time limit: saved .*/\1/p" "$dir/tl_again.log")
  [[ $rc == 75 ]] && grep -q "^resumed from $dir/tl/$(printf 'step_%08d' "$s"): continuing at step $((s + 1))" "$dir/tl_again.log" \
    && [[ -n $s2 && $s2 -gt $s ]] && "$loom" ckpt verify "$dir/tl/$(printf 'step_%08d' "$s2")" > /dev/null \
    && echo "run tl again: resumed after step $s, stopped after step $s2 on the time limit (exit 75)" \
    || { echo "FAIL: tl again (exit $rc): $(grep -v '^step' "$dir/tl_again.log" | tail -4)"; fail=1; }
fi
# From the job file, under loom launch: every worker stops; the launcher says so and exits 75.
launch_bg tl_launch ", exit_after_minutes: 0.15" 100000
wait "$lb_pid"
rc=$?
[[ $rc == 75 ]] && grep -q "^stopped after step [0-9]* of 100000 in .* on the time limit (all 4 ranks): saved $dir/tl_launch/step_" "$dir/tl_launch.log" \
  && echo "run tl_launch: loom launch exited 75 on the time limit" \
  || { echo "FAIL: tl_launch (exit $rc): $(tail -4 "$dir/tl_launch.log")"; fail=1; }
# Without a directory to save into it is refused, naming the flag.
out=$("$loom" train --config "$dir/job.yaml" --exit-after-minutes 1 2>&1)
[[ $? -eq 1 && $out == *"--exit-after-minutes: set, but no checkpoint.dir (or --checkpoint-dir) to save the step it stops after"* ]] \
  && echo "--exit-after-minutes without a checkpoint directory: refused" \
  || { echo "FAIL: --exit-after-minutes without a directory: $out"; fail=1; }
launched launched_self launch
grep -q "loom launch: SIGUSR1: the workers save the step they are at and stop" "$dir/launched_self.log" \
  || { echo "FAIL: launched_self: the launcher does not say it passed the signal on"; fail=1; }
# With `signal: none` SIGUSR1 to loom launch interrupts it: it stops its workers (none left
# running), names the newest checkpoint and exits 138.
launch_bg launched_none ", signal: none"
ln_pid=$lb_pid ln_loom=$lb_loom ln_mpirun=$lb_mpirun
at_step launched_none 30
for _ in $(seq 1 300); do  # step 25's save commits in the background: wait for it to be named
  [[ -f $dir/launched_none/latest ]] && break
  sleep 0.1
done
ln_ranks=($(pgrep -P "$ln_mpirun"))
kill -USR1 "$ln_loom"
wait "$ln_pid"
rc=$?
alive() {  # the processes among $@ still running (a zombie left to init has ended)
  for p in "$@"; do
    st=$(ps -o stat= -p "$p" 2>/dev/null)
    [[ -n $st && $st != Z* ]] && echo "$p"
  done
}
for _ in $(seq 1 50); do
  left=$(alive "$ln_mpirun" "${ln_ranks[@]}")
  [[ -z $left ]] && break
  sleep 0.1
done
# The checkpoint is named once the workers are gone (before, they could still commit, and
# retention delete the one named), and it exists.
named=$(sed -n 's/^loom launch: workers stopped; the newest committed checkpoint is \([^ ]*\) (the same command resumes from it)$/\1/p' "$dir/launched_none.log")
if [[ $rc == 138 && -z $left && $named == "$dir/launched_none/step_"* && -d $named ]] && grep -q "interrupted (User defined signal 1): stopping 4 workers now" "$dir/launched_none.log"; then
  echo "run launched_none: SIGUSR1 to loom launch with signal none: workers stopped, exit 138, newest checkpoint ($named) named"
else
  echo "FAIL: launched_none: exit $rc, still running: '$left': $(tail -3 "$dir/launched_none.log")"; fail=1
  for p in $left; do kill -9 "$p" 2>/dev/null; done
fi

# A rank killed (-9) under loom launch, in a job without in-memory snapshots (with them the
# launcher restarts the job: docs/SNAPSHOTS.md, ctest snapshot_trials): the launcher fails naming
# the newest committed checkpoint (the newest there once it has exited), and the same command
# resumes from it (stopped there by SIGUSR1).
NO_SNAPSHOTS=1 launch_bg launched_kill
lk_pid=$lb_pid lk_mpirun=$lb_mpirun
at_step launched_kill 30
for _ in $(seq 1 300); do [[ -f $dir/launched_kill/latest ]] && break; sleep 0.1; done
kill -9 "$(pgrep -P "$lk_mpirun" | head -1)"
wait "$lk_pid"
rc=$?
named=$(sed -n 's/^  the newest committed checkpoint is \([^ ]*\) (the same command resumes from it)$/\1/p' "$dir/launched_kill.log")
newest=$(ls -d "$dir/launched_kill/step_"* | grep -E '/step_[0-9]{8}$' | sort | tail -1)
if [[ $rc == 1 && $named == "$newest" ]]; then
  echo "run launched_kill: a rank killed: loom launch exited 1 naming $named"
else
  echo "FAIL: launched_kill: exit $rc, named '$named': $(tail -4 "$dir/launched_kill.log")"; fail=1
fi
timeout 300 "$loom" launch "$dir/launched_kill.yaml" --np 4 > "$dir/launched_kill2.log" 2>&1 &
lk_pid=$!
for _ in $(seq 1 600); do grep -q "resumed from " "$dir/launched_kill2.log" && break; sleep 0.1; done
at_step launched_kill2 $(( $(basename "$named" | sed 's/step_0*//') + 1 ))
kill -USR1 "$(pgrep -P "$lk_pid" -x loom)"
wait "$lk_pid"
rc=$?
grep -q "resumed from $named" "$dir/launched_kill2.log" && [[ $rc == 138 ]] \
  && echo "run launched_kill2: the same command resumed from $named" \
  || { echo "FAIL: launched_kill2: exit $rc: $(grep -i resum "$dir/launched_kill2.log" | head -2)"; fail=1; }

sed "s/^checkpoint: {every: 25}/checkpoint: {every: 25, signal: SIGUSR2}/" "$dir/job.yaml" > "$dir/usr2.yaml"
start usr2 "$dir/usr2.yaml"
at_step usr2 30
kill -USR2 "$mpirun_pid"
stopped usr2 140 SIGUSR2

sed "s/^checkpoint: {every: 25}/checkpoint: {every: 25, signal: none}/" "$dir/job.yaml" > "$dir/none.yaml"
start none "$dir/none.yaml"
at_step none 30
kill -USR1 "$mpirun_pid"
# (The exit code cannot tell the two apart: mpirun also reports 128 + 10 for a rank that SIGUSR1's
# default action killed; the missing "stopped after step" line does.)
wait "$run_pid" && { echo "FAIL: with signal none, SIGUSR1 did not end the run"; fail=1; }
grep -q "^stopped after step" "$dir/none.log" && { echo "FAIL: with signal none, the run stopped cleanly"; fail=1; }
echo "run none: SIGUSR1 ended it without a save (default action)"

# Ctrl-C on a plain loom train (SIGINT, not its checkpoint.signal): the run ends at once, as
# before (exit 130), naming the newest committed checkpoint, which the same command resumes.
grep -v "^parallel:" "$dir/job.yaml" > "$dir/single.yaml"
timeout 300 "$loom" train --config "$dir/single.yaml" --checkpoint-dir "$dir/ctrlc" > "$dir/ctrlc.log" 2>&1 &
run_pid=$!
at_step ctrlc 30
for _ in $(seq 1 300); do [[ -f $dir/ctrlc/latest ]] && break; sleep 0.1; done
kill -INT "$(pgrep -P "$run_pid" -x loom)"
wait "$run_pid"
rc=$?
named=$(sed -n 's/^loom train: interrupted (Interrupt); the newest committed checkpoint is \([^ ]*\) (the same command resumes from it)$/\1/p' "$dir/ctrlc.log")
# (A save may commit between the listing and the end of the process: the newest or the one before.)
newest=$(ls -d "$dir/ctrlc/step_"* | grep -E '/step_[0-9]{8}$' | sort | tail -2 | tr '\n' ' ')
if [[ $rc == 130 && -n $named && " $newest" == *" $named "* ]]; then
  timeout 300 "$loom" train --config "$dir/single.yaml" --checkpoint-dir "$dir/ctrlc" \
    --steps $(( $(basename "$named" | sed 's/step_0*//') + 2 )) > "$dir/ctrlc2.log" 2>&1 \
    && grep -q "^resumed from $named:" "$dir/ctrlc2.log" \
    && echo "run ctrlc: Ctrl-C: exit 130 naming $named, which the same command resumed" \
    || { echo "FAIL: ctrlc: the same command did not resume $named: $(grep -i resum "$dir/ctrlc2.log")"; fail=1; }
else
  echo "FAIL: ctrlc: exit $rc, named '$named', newest '$newest': $(tail -2 "$dir/ctrlc.log")"; fail=1
fi

# A signal ignored from the start (nohup, a script's background job) stays ignored. (No
# `timeout` here: it gives its command the default actions back; ctest's limit applies.)
(trap '' INT HUP; exec "$loom" train --config "$dir/single.yaml" --checkpoint-dir "$dir/nohup" --steps 300 > "$dir/nohup.log" 2>&1) &
run_pid=$!
at_step nohup 30
kill -INT "$run_pid"
kill -HUP "$run_pid"
wait "$run_pid"
rc=$?
[[ $rc == 0 ]] && grep -q "^done in" "$dir/nohup.log" && ! grep -q "interrupted" "$dir/nohup.log" \
  && echo "run nohup: SIGINT and SIGHUP ignored from the start stay ignored: the run finished" \
  || { echo "FAIL: nohup: exit $rc: $(tail -2 "$dir/nohup.log")"; fail=1; }

sed "s/^checkpoint: {every: 25}/checkpoint: {every: 25, signal: SIGHUP}/" "$dir/job.yaml" > "$dir/bad.yaml"
"$loom" train --config "$dir/bad.yaml" > "$dir/bad.log" 2>&1 && { echo "FAIL: signal SIGHUP accepted"; fail=1; }
grep -q "bad.yaml:.*field 'checkpoint.signal': expected SIGUSR1, SIGUSR2, SIGTERM, SIGINT or none, got 'SIGHUP'" "$dir/bad.log" \
  || { echo "FAIL: bad signal: $(cat "$dir/bad.log")"; fail=1; }

[[ $fail -eq 0 ]] && echo "PASS: a signal stops every rank at one step, saved and committed, and the run resumes exactly"
exit $fail
