#!/usr/bin/env bash
# A disk that fills up while saving (2 ranks, dp2 zero1, a save every 5 steps keeping 2):
#   * at the start rank 0 warns that checkpoint.dir has less room than the saves will need;
#   * the save that finds the disk full fails the job with the error naming the file;
#   * its partial files are removed at once (no step_<N>.tmp left taking the space), the
#     checkpoints committed before it still verify, and `latest` names the newest of them;
#   * once there is room again, the same command resumes from that checkpoint and finishes.
# The disk is a real tmpfs mounted just big enough for two checkpoints. Where mounting is refused
# (not root), the same failure comes from a file-size limit (ulimit -f: "File too large") on a
# run resumed from step 10, and the warning is not checked (it needs a small file system).
# Usage: checkpoint_disk_full_test.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
mnt=$dir/mnt
umount "$mnt" 2>/dev/null
rm -rf "$dir" && mkdir -p "$mnt"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
fail=0
. "$(dirname "$0")/expect.sh"
# job NAME CKPT_DIR: the job saving under CKPT_DIR
job() {
  sed "s#text: \([^,}]*\)#text: $jobdir/\1#; s#^steps: .*#parallel: {dp: 2, zero: 1}\ncheckpoint: {every: 5, keep: 2, dir: $2}\nsteps: 20#" \
    "$job" > "$dir/$1.yaml"
}
train() {  # train NAME [args...]: 2 ranks; the exit status is the run's
  local name=$1
  shift
  timeout 300 mpirun --oversubscribe -np 2 "$loom" train --config "$dir/$name.yaml" "$@" > "$dir/$name.log" 2>&1
}

# The size of one checkpoint of this job, measured.
job size "$dir/size_ck"
train size --steps 5 || { tail "$dir/size.log"; echo "FAIL: sizing run"; exit 1; }
one_kb=$(du -sk "$dir/size_ck/step_00000005" | cut -f1)
echo "one checkpoint: ${one_kb} KB"

ck=$mnt/ck
job full "$ck"
if mount -t tmpfs -o size=$(( one_kb * 47 / 20 ))k loom_disk_full_test "$mnt" 2>/dev/null; then
  trap 'umount "$mnt" 2>/dev/null' EXIT
  echo "tmpfs of $(( one_kb * 47 / 20 )) KB at $mnt: room for two checkpoints, not three"
  train full && { echo "FAIL: the run with a full disk succeeded"; fail=1; }
  expect "rank 0 warns of the missing room" "$dir/full.log" \
    "WARN CKPT checkpoint.dir $ck: " "MB free, but this run's saves need about" "3 checkpoints of"
  expect "the full disk fails the job, naming the file" "$dir/full.log" \
    "loom train: error: checkpoint step 15: write '$ck/step_00000015.tmp/rank_0000" "No space left on device"
  mode=tmpfs
else
  echo "NOTE: mounting a tmpfs was refused: a file-size limit stands in for the full disk"
  train full --steps 10 || { tail "$dir/full.log"; echo "FAIL: the run to step 10"; exit 1; }
  # On the ranks only (mpirun's own files must not hit it), with SIGXFSZ ignored: an oversized
  # write fails with EFBIG instead.
  timeout 300 mpirun --oversubscribe -np 2 bash -c \
    "trap '' XFSZ; ulimit -f $(( one_kb / 4 )); exec '$loom' train --config '$dir/full.yaml'" \
    > "$dir/full.log" 2>&1 && { echo "FAIL: the run past its file-size limit succeeded"; fail=1; }
  expect "the failed write fails the job, naming the file" "$dir/full.log" \
    "loom train: error: checkpoint step 15: write '$ck/step_00000015.tmp/rank_0000" "File too large"
  mode=ulimit
fi
left=$(find "$ck" -name '*.tmp' | head -3)
[[ -z $left ]] && echo "PASS the failed save's files are gone" \
  || { echo "FAIL: the failed save left $left"; fail=1; }
[[ $(cat "$ck/latest" 2>/dev/null) == step_00000010 ]] && echo "PASS latest names step 10" \
  || { echo "FAIL: latest is '$(cat "$ck/latest" 2>/dev/null)', expected step_00000010"; fail=1; }
"$loom" ckpt verify --all "$ck" > "$dir/verify.log" 2>&1 && echo "PASS the committed checkpoints verify" \
  || { tail "$dir/verify.log"; echo "FAIL: the committed checkpoints do not verify"; fail=1; }

# Room again: the same command resumes from step 10 and finishes.
[[ $mode == tmpfs ]] && mount -o remount,size=$(( one_kb * 4 ))k "$mnt"
mv "$dir/full.log" "$dir/full_failed.log"  # kept; the rerun writes full.log anew
train full && echo "PASS the same command finishes once there is room" \
  || { tail "$dir/full.log"; echo "FAIL: the rerun failed"; fail=1; }
expect "the rerun resumes from step 10" "$dir/full.log" "resumed from $ck/step_00000010"
[[ -d $ck/step_00000020 ]] || { echo "FAIL: no step 20 checkpoint after the rerun"; fail=1; }
[[ $fail -eq 0 ]] && echo PASS
exit $fail
