#!/usr/bin/env bash
# Crash safety: a rank is SIGKILLed at a random point while checkpoints are being saved (inside a
# data write, after an fsync, after its index fragment, and on rank 0 before the metadata, before
# and after the rename, after replacing `latest`). After every kill:
#   * every committed checkpoint (step_<N> with metadata) passes `loom ckpt verify`, the previous
#     one included, and no partial save is ever listed as a checkpoint;
#   * training resumes from the newest committed checkpoint, removes the partial save (and the
#     latest.tmp.<pid> a kill inside the `latest` update leaves, planted before each resume), and its
#     losses are bit-identical to an uninterrupted run.
# Trials are seeded (TRIALS, default 24; SEED, default 1): each picks a rank and one of the crash
# points that rank reaches (counted by a traced run).
# Usage: checkpoint_crash_test.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
trials=${TRIALS:-24} RANDOM=${SEED:-1}
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
np=4
sed "s#text: \([^,}]*\)#text: $jobdir/\1#; s/^steps: .*/parallel: {tp: 2, pp: 2, zero: 0}\ncheckpoint: {every: 2}\nsteps: 8/" \
  "$job" > "$dir/job.yaml"
mpi() { timeout 300 mpirun --oversubscribe -np $np "$loom" train --config "$dir/job.yaml" "$@"; }
mpi --checkpoint-dir "$dir/reference" --dump-losses "$dir/reference.txt" > "$dir/reference.log" 2>&1 \
  || { tail "$dir/reference.log"; echo "FAIL: reference run"; exit 1; }
mpi --checkpoint-dir "$dir/base" --steps 4 > "$dir/base.log" 2>&1 || { echo "FAIL: base run"; exit 1; }
# Count the crash points each rank reaches while saving steps 6 and 8.
cp -r "$dir/base" "$dir/count"
LOOM_FAULT_CKPT_TRACE=1 mpi --checkpoint-dir "$dir/count" > "$dir/count.log" 2>&1 \
  || { echo "FAIL: traced run"; exit 1; }
# Every crash point reached, as "rank n where"; trials cycle through the kinds of point (a data
# write, an fsync, a fragment, the commit steps) and pick one of that kind at random.
grep -o 'checkpoint crash point [0-9]* on rank [0-9]* (.*)' "$dir/count.log" |
  sed 's/^checkpoint crash point \([0-9]*\) on rank \([0-9]*\) (\(.*\))$/\2 \1 \3/' > "$dir/points.txt"
mapfile -t kinds < <(cut -d' ' -f3- "$dir/points.txt" | sort -u)
echo "crash points reached while saving steps 6 and 8: $(wc -l < "$dir/points.txt") of ${#kinds[@]} kinds"
[[ ${#kinds[@]} -ge 7 ]] || { echo "FAIL: expected at least 7 kinds of crash point"; exit 1; }
fail=0 killed=0 hit=()
for ((t = 1; t <= trials; t++)); do
  kind=${kinds[t % ${#kinds[@]}]}
  mapfile -t of_kind < <(grep -F " $kind" "$dir/points.txt")
  read -r rank n _ <<<"${of_kind[RANDOM % ${#of_kind[@]}]}"
  td="$dir/trial$t"
  cp -r "$dir/base" "$td.ck"
  LOOM_FAULT_CKPT_KILL=$rank:$n LOOM_ABORT_GRACE_MS=500 mpi --checkpoint-dir "$td.ck" \
    > "$td.crash.log" 2>&1 && { echo "FAIL trial $t: rank $rank point $n: the run was not killed"; fail=1; continue; }
  where=$(grep -o "killed at crash point .*" "$td.crash.log" | head -1)
  [[ -n $where ]] && killed=$((killed + 1)) && hit+=("$(sed 's/.*(\(.*\))$/\1/' <<<"$where")")
  committed=()
  for d in "$td.ck"/step_*; do
    [[ -f $d/metadata.json && $d != *.tmp* ]] && committed+=("$d")
  done
  for d in "${committed[@]}"; do
    "$loom" ckpt verify "$d" > /dev/null 2>"$td.verify.log" \
      || { echo "FAIL trial $t ($where): $d does not verify: $(cat "$td.verify.log")"; fail=1; }
  done
  newest=${committed[-1]}
  [[ -f $td.ck/step_00000004/metadata.json ]] || { echo "FAIL trial $t: the previous checkpoint is gone"; fail=1; }
  # What a kill inside a `latest` replacement leaves (rank 0's committer writes it while its writer
  # thread may hit a crash point): the resumed run must remove it like any partial save.
  echo step_00000002 > "$td.ck/latest.tmp.99999"
  mpi --checkpoint-dir "$td.ck" --dump-losses "$td.losses" > "$td.resume.log" 2>&1 \
    || { tail "$td.resume.log"; echo "FAIL trial $t ($where): resume failed"; fail=1; continue; }
  grep -q "resumed from $newest:" "$td.resume.log" \
    || { echo "FAIL trial $t ($where): did not resume from the newest committed $newest"; fail=1; }
  if ls -d "$td.ck"/*.tmp* > /dev/null 2>&1; then
    echo "FAIL trial $t ($where): partial save left after the resumed run:"
    ls -la --time-style=full-iso "$td.ck" "$td.ck"/*.tmp*  # kept, with the logs, for a look
    fail=1
    continue
  fi
  while read -r line; do
    grep -qxF "$line" "$dir/reference.txt" || { echo "FAIL trial $t: loss line '$line' not in the reference"; fail=1; }
  done < "$td.losses"
  # Exactly the steps after the resumed one (none when step 8 itself was committed).
  expected=""
  for ((s = 10#${newest##*step_} + 1; s <= 8; s++)); do expected+="$s "; done
  got=$(cut -d' ' -f1 "$td.losses" | tr '\n' ' ')
  [[ $got == "$expected" ]] \
    || { echo "FAIL trial $t: the resumed run trained steps '$got', expected '$expected'"; fail=1; }
  echo "trial $t: rank $rank, crash point $n ($kind) -> resumed from $(basename "$newest")"
  rm -rf "$td.ck"
done
echo "$killed of $trials trials killed a rank while saving"
[[ $killed -ge 20 ]] || { echo "FAIL: fewer than 20 kills"; fail=1; }
# The point numbers come from a traced run; two threads of rank 0 count them, so a trial can land
# on a neighbouring kind. Most kinds must still have been hit.
mapfile -t hit_kinds < <(printf '%s\n' "${hit[@]}" | sort -u)
echo "kinds of crash point hit: ${#hit_kinds[@]} of ${#kinds[@]} ($(printf '%s; ' "${hit_kinds[@]}"))"
[[ ${#hit_kinds[@]} -ge $((${#kinds[@]} - 1)) ]] || { echo "FAIL: too few kinds of crash point hit"; fail=1; }
[[ $fail -eq 0 ]] && echo "PASS: every kill left only complete checkpoints, and the newest was resumed exactly"
exit $fail
