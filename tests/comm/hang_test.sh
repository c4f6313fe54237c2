#!/usr/bin/env bash
# A rank that stops participating makes the others fail within their deadline (2 s here) with an
# error naming the op, group, members and sequence number; the job ends instead of hanging.
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
grep -q "rank 3: DeadlineExceeded: all_reduce #3 on group 'dp' \[1, 3\] (4096 bytes) did not complete within" <<<"$out" \
  || { echo "FAIL: rank 3 did not name op, group, members and sequence number"; exit 1; }
echo PASS
