#!/usr/bin/env bash
# The anomaly detector under plain mpirun (`loom train` on 4 ranks, tp2 dp2, no launcher;
# docs/FAULTS.md): world rank 3 freezes (SIGSTOP) before step 10. Rank 0's detector names it in
# one line, once, well before the communication deadline (60 s here); every other rank's error
# says it was stopped because of rank 3; no rank reports a deadline; the job ends with an error.
set -uo pipefail
loom=$1 dir=$2 data=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
cat > "$dir/job.yaml" <<YAML
model: {vocab: 257, max_seq: 64, layers: 2, heads: 4, hidden: 64}
data: {text: $data, seq: 32, global_batch: 8}
optimizer: {lr: 1.0e-3}
steps: 40
eval: {every: 0, batches: 1}
runtime: {threads: 1}
parallel: {tp: 2, dp: 2}
YAML
start=$(date +%s)
out=$(LOOM_FAULT_STOP=3:10 LOOM_COMM_TIMEOUT_MS=60000 LOOM_ABORT_GRACE_MS=2000 \
      timeout 120 mpirun --oversubscribe -np 4 "$loom" train --config "$dir/job.yaml" 2>&1)
code=$? elapsed=$(( $(date +%s) - start ))
grep -E "fault injection|hang:|error" <<<"$out" | head -20
echo "exit $code after ${elapsed}s"
fail=0
[[ $code -ne 0 && $code -ne 124 ]] || { echo "FAIL: the job did not end with an error (or hung)"; fail=1; }
n=$(grep -c "^loom train: hang: rank 3 (.*) hung: it stopped responding" <<<"$out")
[[ $n -eq 1 ]] || { echo "FAIL: $n lines name rank 3 as hung (expected one)"; fail=1; }
n=$(grep -c "was stopped: stopped because rank 3 hung (named by the detector on rank 0)" <<<"$out")
[[ $n -eq 3 ]] || { echo "FAIL: $n ranks say they were stopped because of rank 3 (expected 3)"; fail=1; }
! grep -q "did not complete within" <<<"$out" || { echo "FAIL: a communication deadline passed"; fail=1; }
[[ $elapsed -lt 50 ]] || { echo "FAIL: took ${elapsed}s, the deadline's time"; fail=1; }
exit $fail
