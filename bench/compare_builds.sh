#!/usr/bin/env bash
# Two builds side by side, for a change that must leave speed alone (a redesign): runs the step,
# communication and overlap benchmarks of build A and build B alternately, ROUNDS times each, and
# prints every run and the medians, B against A:
#   train_step_bench (Loom vs PyTorch in the same run), mpirun -np 2 comm_bench (all-reduce vs
#   plain MPI), mpirun -np 2 overlap_bench (dp = 2, ZeRO-2, overlap on and off).
# Usage: bench/compare_builds.sh BUILD_A BUILD_B [ROUNDS]   (build directories, e.g. an older
# commit's checkout built with deploy/build.sh, and build/). Last line:
#   train_ratio_a=... train_ratio_b=... loom_ms_b_vs_a=... comm_ratio_a=... comm_ratio_b=...
#   overlap_on_b_vs_a=... overlap_off_b_vs_a=...
set -euo pipefail
a=$1 b=$2 rounds=${3:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The last line's key=value pairs of a benchmark, one per line.
run() {
  local label=$1; shift
  "$@" 2>/dev/null | tail -1 | tr ' ' '\n' | grep = | sed "s/^/$label /"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "A: $a"
echo "B: $b"
for r in $(seq "$rounds"); do
  for side in a b; do
    dir=$a; [[ $side == b ]] && dir=$b
    run "$side train" "$dir/bench/train_step_bench" >> "$out/all"
    run "$side comm" mpirun -np 2 "$dir/bench/comm_bench" >> "$out/all"
    run "$side overlap" mpirun -np 2 "$dir/bench/overlap_bench" >> "$out/all"
  done
  echo "round $r of $rounds done"
done

# Medians per (side, bench, key).
median() {  # side bench key
  grep "^$1 $2 $3=" "$out/all" | sed 's/.*=//' | sort -g |
    awk '{v[NR] = $1} END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
                            else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
printf '%-26s %12s %12s %8s\n' "median of $rounds runs" "A" "B" "B/A"
for spec in "train loom_ms" "train pytorch_ms" "train ratio" "comm comm_allreduce_ratio" \
            "overlap overlap_on_ms" "overlap overlap_off_ms" "overlap exposed_fraction"; do
  set -- $spec
  ma=$(median a "$1" "$2") mb=$(median b "$1" "$2")
  printf '%-26s %12s %12s %8s\n' "$1 $2" "$ma" "$mb" \
    "$(awk -v x="$ma" -v y="$mb" 'BEGIN { if (x + 0 == 0) print "-"; else printf "%.3f", y / x }')"
done
echo "every run (side bench key=value):"
cat "$out/all"
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (x + 0 == 0) print "nan"; else printf "%.3f", y / x }'; }
echo "train_ratio_a=$(median a train ratio) train_ratio_b=$(median b train ratio)" \
     "loom_ms_b_vs_a=$(ratio "$(median a train loom_ms)" "$(median b train loom_ms)")" \
     "comm_ratio_a=$(median a comm comm_allreduce_ratio) comm_ratio_b=$(median b comm comm_allreduce_ratio)" \
     "overlap_on_b_vs_a=$(ratio "$(median a overlap overlap_on_ms)" "$(median b overlap overlap_on_ms)")" \
     "overlap_off_b_vs_a=$(ratio "$(median a overlap overlap_off_ms)" "$(median b overlap overlap_off_ms)")"
