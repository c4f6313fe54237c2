#!/usr/bin/env bash
# A rank that stops participating (rank 1; deadline 2 s): rank 3, its dp peer, reports an error
# naming the op, group, members and sequence number, for an operation that never started the
# call it was queued behind, and the queued and the next operation fail unstarted, naming the
# one that timed out; the job ends (exit non-zero) before the 120 s guard.
set -uo pipefail
bin=$1
start=$(date +%s)
out=$(LOOM_COMM_TIMEOUT_MS=2000 LOOM_TEST_HANG_RANK=1 timeout 120 mpirun --oversubscribe -np 4 "$bin" 2>&1)
code=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
echo "exit $code after ${elapsed}s"
[[ $code -ne 0 && $code -ne 124 ]] || { echo "FAIL: job did not fail (or hung until the 120 s guard)"; exit 1; }
# Rank 3 shares dp group [1, 3] with the hung rank 1.
grep -q "rank 3: dp: DeadlineExceeded: all_reduce #3 on group 'dp' \[1, 3\] (4096 bytes) did not complete within [0-9]* ms (world rank 3 waiting; a member is hung or dead)" <<<"$out" \
  || { echo "FAIL: rank 3 did not name op, group, members and sequence number"; exit 1; }
# Its tp operation was queued behind dp #3 and never started: the error names the call.
grep -q "rank 3: tp: DeadlineExceeded: all_reduce #0 on group 'tp' \[2, 3\] (4 bytes) did not complete within [0-9]* ms (world rank 3 waiting; not started: this rank is still in all_reduce #3 on group 'dp' \[1, 3\])" <<<"$out" \
  || { echo "FAIL: rank 3's unstarted tp operation did not name the call it was queued behind"; exit 1; }
grep -q "rank 3: tp1: FailedPrecondition: all_reduce #1 on group 'tp' \[2, 3\] was not started: all_reduce #0 on group 'tp' \[2, 3\] passed its deadline on this rank before it" <<<"$out" \
  || { echo "FAIL: rank 3's queued tp operation did not fail unstarted once another timed out"; exit 1; }
grep -q "rank 3: next: FailedPrecondition: all_reduce #4 on group 'dp' \[1, 3\] was not started: all_reduce #0 on group 'tp' \[2, 3\] passed its deadline on this rank before it" <<<"$out" \
  || { echo "FAIL: rank 3's next operation did not fail unstarted, naming the timed-out one"; exit 1; }
echo PASS
