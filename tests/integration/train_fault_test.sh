#!/usr/bin/env bash
# Faults in a real training job:
#  1. tp2 dp2 zero2 on 4 processes, world rank 1 stops participating at step 3: the others fail
#     within their deadline (3 s) with errors naming the operation, group, members and sequence
#     number (at least two ranks); the job ends, no hang;
#  2. the same rank comes back after the others' deadline, under tp2 dp2 zero2 and under pp2 dp2
#     zero3: still their errors and the abort's exit 1, no crash (what they abandoned completes
#     late inside MPI); on 2 processes a bad LOOM_COMM_TIMEOUT_MS is refused by name;
#  3. tp3 on 3 processes, a layout that does not divide: refused before training, naming the
#     constraint.
set -uo pipefail
loom=$1 dir=$2 job=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
sed "s#text: \([^,}]*\)#text: $jobdir/\1#; s/^steps:/parallel: {tp: 2, dp: 2, zero: 2}\nsteps:/" "$job" > "$dir/job.yaml"
start=$(date +%s)
out=$(LOOM_FAULT_HANG=1:3 LOOM_COMM_TIMEOUT_MS=3000 LOOM_ABORT_GRACE_MS=5000 \
      timeout 120 mpirun --oversubscribe -np 4 "$loom" train --config "$dir/job.yaml" 2>&1)
code=$? elapsed=$(( $(date +%s) - start ))
echo "$out" | grep -E "fault injection|error|DeadlineExceeded" | head -20
echo "exit $code after ${elapsed}s"
fail=0
[[ $code -ne 0 && $code -ne 124 ]] || { echo "FAIL: the job did not end with an error (or hung)"; fail=1; }
grep -q "fault injection: rank 1 stops participating at step 3" <<<"$out" || { echo "FAIL: no injection"; fail=1; }
grep -Eq "loom train: error: [a-z_]+ #[0-9]+ on group '(tp|dp|world)' \[[0-9, ]+\] \([0-9]+ bytes.*\) did not complete within [0-9]+ ms" <<<"$out" \
  || { echo "FAIL: no deadline error naming op, group, members and sequence number"; fail=1; }
# Rank 0 (tp peer of rank 1) and rank 3 (dp peer of rank 1) both report.
n=$(grep -c "did not complete within" <<<"$out")
[[ $n -ge 2 ]] || { echo "FAIL: only $n ranks reported the hang"; fail=1; }

# A rank that comes back after the others gave up (a 5 s stall, 3 s deadline): the collectives
# they abandoned then complete inside MPI, into buffers and communicators they no longer use.
# The job must still end with the deadline errors and the abort's exit status, not a crash.
# Twice: tp2 dp2 zero2 (collectives), and pp2 dp2 zero3 (pipeline receives into the step's
# buffers, ZeRO-3 gathers).
late_rank() {  # late_rank LABEL PARALLEL
  sed "s/^parallel: .*/parallel: {$2}/" "$dir/job.yaml" > "$dir/late_$1.yaml"
  out=$(LOOM_FAULT_HANG=1:3:5000 LOOM_COMM_TIMEOUT_MS=3000 LOOM_ABORT_GRACE_MS=8000 \
        timeout 120 mpirun --oversubscribe -np 4 "$loom" train --config "$dir/late_$1.yaml" 2>&1)
  code=$?
  echo "$out" | grep -E "fault injection|error|Segmentation|signal" | head -20
  echo "late rank ($2): exit $code"
  [[ $code -eq 1 ]] || { echo "FAIL: a late rank ($2) ended the job with exit $code, expected the abort's 1"; fail=1; }
  grep -Eq "Segmentation fault|exited on signal" <<<"$out" && { echo "FAIL: a rank crashed after the deadline ($2)"; fail=1; }
  grep -q "stops participating at step 3 for 5000 ms" <<<"$out" || { echo "FAIL: no late-rank injection"; fail=1; }
  n=$(grep -c "did not complete within" <<<"$out")
  [[ $n -ge 2 ]] || { echo "FAIL: only $n ranks reported the deadline with a late rank ($2)"; fail=1; }
}
late_rank collectives "tp: 2, dp: 2, zero: 2"
late_rank pipeline "pp: 2, dp: 2, zero: 3"

# A bad deadline setting is refused by name on every rank, before anything starts.
out=$(LOOM_COMM_TIMEOUT_MS=abc timeout 60 mpirun --oversubscribe -np 2 "$loom" train --config "$dir/job.yaml" 2>&1)
code=$?
grep -q "environment variable LOOM_COMM_TIMEOUT_MS: expected a number of ms, a whole number from 1 to" <<<"$out" \
  && [[ $code -ne 0 ]] && ! grep -Eq "Segmentation fault|exited on signal" <<<"$out" \
  && echo "bad LOOM_COMM_TIMEOUT_MS: refused (exit $code)" \
  || { echo "FAIL: a bad LOOM_COMM_TIMEOUT_MS was not refused cleanly (exit $code): $out"; fail=1; }
# Other tunables: a value that is not a whole number in range is refused, not read as 0 or as
# its default (a lock wait of "10s" used to become 10 ms; LOOM_THREADS=0 became "all cores").
for bad in LOOM_CKPT_LOCK_WAIT_MS=10s LOOM_CKPT_TIMEOUT_MS=0 LOOM_THREADS=0 LOOM_ABORT_GRACE_MS=-1 \
           LOOM_COMM_TIMEOUT_MS=3000abc LOOM_CKPT_DIRECT_IO=yes LOOM_LOG_LEVEL=verbose; do
  out=$(env "$bad" timeout 60 "$loom" train --config "$dir/job.yaml" --steps 1 2>&1)
  code=$?
  [[ $code -eq 2 ]] && grep -q "^loom: error: environment variable ${bad%%=*}: expected .*, got '${bad#*=}'" <<<"$out" \
    && ! grep -q "step 1" <<<"$out" && echo "bad $bad: refused" \
    || { echo "FAIL: $bad was not refused by name with exit 2 (exit $code): $out"; fail=1; }
done

sed "s/^parallel: .*/parallel: {tp: 3}/" "$dir/job.yaml" > "$dir/bad.yaml"
out=$(timeout 60 mpirun --oversubscribe -np 3 "$loom" train --config "$dir/bad.yaml" 2>&1)
code=$?
n=$(grep -c "model.heads (4) must be divisible by tp (3)" <<<"$out")
echo "bad layout: exit $code, $n ranks named the constraint"
[[ $code -ne 0 && $n -ge 1 ]] || { echo "FAIL: bad layout not refused: $out"; fail=1; }
grep -q "step " <<<"$out" && { echo "FAIL: training started with a bad layout"; fail=1; }
[[ $fail -eq 0 ]] && echo PASS
exit $fail
