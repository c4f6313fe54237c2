#!/usr/bin/env bash
# Equivalence with single-process training: the same job (seed, data, global batch) trained under
# each layout given on the command line must follow the single-process run (compare_runs.py).
# Usage: equivalence_test.sh LOOM WORK_DIR JOB "tp=2 sp=1" "dp=2 zero=3" "pp=4 first=1 last=1" ...
# (first=/last=: parallel.first_stage_layers / last_stage_layers, uneven pipeline stages)
# Environment: COMPARE_ARGS (extra compare_runs.py flags: its tolerances), VAL_TOL (the validation
# loss's absolute bound, 2e-4 by default).
set -uo pipefail
loom=$1 dir=$2 job=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
compare_args=${COMPARE_ARGS:-} val_tol=${VAL_TOL:-2e-4}
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
# Generated job files live in $dir: make the corpus path absolute.
jobdir=$(cd "$(dirname "$job")" && pwd)
sed "s#text: \([^,}]*\)#text: $jobdir/\1#" "$job" > "$dir/job.yaml"
job="$dir/job.yaml"
"$loom" train --config "$job" --dump-losses "$dir/single.txt" --dump-params "$dir/single.st" \
  > "$dir/single.log" 2>&1 || { cat "$dir/single.log"; echo "FAIL: single-process run"; exit 1; }
fail=0
for spec in "$@"; do
  tp=1 cp=1 dp=1 pp=1 vpp=1 sp=false zero=0 schedule="" micro=keep stages=""
  for kv in $spec; do
    case $kv in
      tp=*) tp=${kv#tp=} ;; dp=*) dp=${kv#dp=} ;; zero=*) zero=${kv#zero=} ;; sp=1) sp=true ;;
      pp=*) pp=${kv#pp=} ;; cp=*) cp=${kv#cp=} ;; vpp=*) vpp=${kv#vpp=} ;; schedule=*) schedule=", schedule: ${kv#schedule=}" ;;
      micro=none) micro=none ;;  # the job without data.micro_batch: its default (global_batch / dp)
      first=*) stages="$stages, first_stage_layers: ${kv#first=}" ;;  # uneven pipeline stages
      last=*) stages="$stages, last_stage_layers: ${kv#last=}" ;;
      *) echo "bad layout item '$kv'"; exit 2 ;;
    esac
  done
  name=$(tr ' =' '_-' <<<"$spec")
  np=$((tp * cp * dp * pp))
  sed "s/^steps:/parallel: {tp: $tp, cp: $cp, dp: $dp, pp: $pp, vpp: $vpp, sp: $sp, zero: $zero$schedule$stages}\nsteps:/" "$job" > "$dir/$name.yaml"
  if [[ $micro == none ]]; then
    sed -i 's/, micro_batch: [0-9]*//' "$dir/$name.yaml"
    grep -q micro_batch "$dir/$name.yaml" && { echo "FAIL $spec: micro_batch still in the job"; exit 1; }
  fi
  if ! timeout 600 mpirun --oversubscribe -np $np "$loom" train --config "$dir/$name.yaml" \
      --dump-losses "$dir/$name.txt" --dump-params "$dir/$name.st" > "$dir/$name.log" 2>&1; then
    tail -20 "$dir/$name.log"
    echo "FAIL $spec: the run failed"
    fail=1
    continue
  fi
  /usr/bin/python3 "$here/compare_runs.py" "$dir/single.txt" "$dir/single.st" "$dir/$name.txt" \
    "$dir/$name.st" --label "$spec (np $np)" $compare_args || fail=1
  # Evaluation is defined by the job alone (eval.batches global batches, whatever the layout and
  # the micro-batch): the same validation loss as one process (printed with 4 decimals).
  a=$(sed -n 's/^done .*| val loss \([0-9.]*\).*/\1/p' "$dir/single.log")
  b=$(sed -n 's/.*done .*| val loss \([0-9.]*\).*/\1/p' "$dir/$name.log" | tail -1)
  if ! [[ -n $a && -n $b ]] || ! awk -v a="$a" -v b="$b" -v t="$val_tol" 'BEGIN { d = a - b; exit !(d < t && d > -t) }'; then
    echo "FAIL $spec: validation loss '$b', one process's '$a'"; fail=1
  fi
  if [[ $micro == none ]]; then
    # Without data.micro_batch too: as one process that has none either.
    if [[ ! -f $dir/single_nomicro.log ]]; then
      sed 's/, micro_batch: [0-9]*//' "$job" > "$dir/single_nomicro.yaml"
      "$loom" train --config "$dir/single_nomicro.yaml" > "$dir/single_nomicro.log" 2>&1 \
        || { tail -5 "$dir/single_nomicro.log"; echo "FAIL: single-process run without micro_batch"; exit 1; }
    fi
    a=$(sed -n 's/^done .*| val loss \([0-9.]*\).*/\1/p' "$dir/single_nomicro.log")
    b=$(sed -n 's/.*done .*| val loss \([0-9.]*\).*/\1/p' "$dir/$name.log" | tail -1)
    if [[ -n $a && -n $b ]] && awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d < 2e-4 && d > -2e-4) }'; then
      echo "PASS $spec: validation loss $b, as one process's ($a)"
    else
      echo "FAIL $spec: validation loss '$b', one process's '$a'"; fail=1
    fi
  fi
done
exit $fail
