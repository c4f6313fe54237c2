#!/usr/bin/env bash
# A save copies each rank's shard while training goes on: under ZeRO-1/2 the parameters are
# all-gathered in place in the background after every update, and an all-gather may pass other
# ranks' chunks through a rank's own chunk while it runs (Open MPI's Bruck algorithm, for a
# data-parallel group whose size is not a power of two). The copy must wait for that bucket's
# gather: checkpoints saved every step by dp = 3 with ZeRO-2 and overlap (gathers in flight
# during the copies) must be bit-identical to those of the same run without overlap (every
# gather waited for at once), step by step. Found by the in-memory snapshot trials, which
# compare a restart's parameters with an uninterrupted run's.
# Usage: checkpoint_zero_gather_test.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
fail=0
for overlap in true false; do
  sed "s#text: \([^,}]*\)#text: $jobdir/\1#; s/global_batch: 8, micro_batch: 2/global_batch: 12, micro_batch: 2/; s#^steps: .*#parallel: {dp: 3, zero: 2, overlap: $overlap}\ncheckpoint: {dir: $dir/ck_$overlap, every: 1}\nsteps: 12#" \
    "$job" > "$dir/$overlap.yaml"
  timeout 300 mpirun --oversubscribe -np 3 "$loom" train --config "$dir/$overlap.yaml" \
    > "$dir/$overlap.log" 2>&1 || { echo "FAIL: overlap $overlap: $(tail -3 "$dir/$overlap.log")"; fail=1; }
done
same=0
for step in $(seq 1 12); do
  s=$(printf "step_%08d" "$step")
  if "$loom" ckpt diff "$dir/ck_true/$s" "$dir/ck_false/$s" > "$dir/diff_$step.log" 2>&1; then
    same=$((same + 1))
  else
    echo "FAIL: step $step saved with gathers in flight differs: $(tail -1 "$dir/diff_$step.log")"
    fail=1
  fi
done
[[ $same -eq 12 ]] && echo "PASS all 12 checkpoints saved beside in-flight gathers are bit-identical"
exit $fail
