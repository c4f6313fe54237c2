#!/usr/bin/env bash
# How well `loom launch` predicts this machine's step time with the calibration it measures and
# caches itself (cli/launch_calibration.h): the demo job (examples/demo.yaml) on NP ranks (4, the
# demo's default: two per core here; or NP=2, a rank per core), the planner's own layout and
# fixed ones. Per layout: the prediction `loom launch` prints, and the median of the ms/step it
# logs every 5 steps after step 20 (STEPS steps, 150 by default). The calibration is measured once
# at the start into WORK_DIR/cache (a fresh one: the first launch measures it). With ROUNDS=R
# every layout is launched R times, the layouts in a rotating order, and the measured figure is
# the median of the rounds (each round's in the last column): on a VM whose speed drifts between
# minutes, one launch measures the minute as much as the layout. PRECISION=bf16 runs the job in
# bf16 (the calibration then measures its GEMMs in bf16).
# Usage: [NP=2] [ROUNDS=3] [STEPS=150] [PRECISION=fp32|bf16] bench/launch_accuracy_bench.sh
#        [BUILD_DIR] [WORK_DIR]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build} dir=${2:-$root/build/bench/launch_accuracy} np=${NP:-4}
rounds=${ROUNDS:-1} steps=${STEPS:-150} precision=${PRECISION:-fp32}
dir=$(realpath -m "$dir") build=$(realpath -m "$build")
rm -rf "$dir" && mkdir -p "$dir/tmp"
export TMPDIR="$dir/tmp" OMPI_MCA_btl_vader_backing_directory="$dir/tmp" LOOM_CACHE_DIR="$dir/cache"
unset LOOM_CALIBRATION
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
sed "s#text: \(.*\)#text: $root/data/tinyshakespeare.txt#; s#dir: .*\##dir: $dir/ck \##; s/^steps: .*/steps: $steps/; s/log_every: .*/log_every: 5/" \
  "$root/examples/demo.yaml" > "$dir/demo.yaml"
echo "precision: $precision" >> "$dir/demo.yaml"
echo "ranks: $np; rounds: $rounds; steps: $steps; precision: $precision; machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F)"
specs=("" "dp: 4, zero: 0" "tp: 2, dp: 2, sp: true" "pp: 2, dp: 2" "cp: 4" "tp: 4, sp: true")
[[ $np == 2 ]] && specs=("" "dp: 2, zero: 0" "tp: 2, sp: true" "pp: 2" "cp: 2" "dp: 2, zero: 3")
n=${#specs[@]}
# One job file per layout (fields given twice: the spec's kept).
for ((i = 0; i < n; i++)); do
  job="$dir/job$i.yaml"
  if [[ -z ${specs[i]} ]]; then cp "$dir/demo.yaml" "$job"; continue; fi
  sed "s/^steps:/parallel: {tp: 1, cp: 1, pp: 1, dp: 1, ${specs[i]}}\nsteps:/" "$dir/demo.yaml" > "$job"
  /usr/bin/python3 - "$job" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
def fix(m):
    d = {}
    for kv in m.group(1).split(","):
        k, v = (x.strip() for x in kv.split(":"))
        d[k] = v
    return "parallel: {" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"
open(p, "w").write(re.sub(r"parallel: \{([^}]*)\}", fix, s))
PY
done
# The median of numbers separated by spaces or newlines.
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
declare -a pred layout meas wait
failed=0
for ((r = 0; r < rounds; r++)); do
  for ((j = 0; j < n; j++)); do
    i=$(((j + r) % n))  # rotate: each layout early in one round, late in another
    rm -rf "$dir/ck"
    out=$("$build/loom" launch "$dir/job$i.yaml" --np "$np" 2>&1) || {
      echo "$out" | tail -5
      echo "FAIL: ${specs[i]}"
      failed=1
      continue
    }
    layout[i]=$(sed -n 's/.*| layout \(tp=[^(]*\) (.*/\1/p; s/.*| layout \(tp=.*\)$/\1/p' <<<"$out" | head -1 | sed 's/ vpp=1//; s/ sp=off//')
    p=$(sed -n 's/^  predicted \([0-9.]*\) ms\/step.*/\1/p' <<<"$out" | head -1)
    m=$(grep -E '^step +[0-9]+/' <<<"$out" | awk '{split($2, a, "/"); if (a[1] > 20) for (i = 1; i <= NF; i++) if ($(i+1) == "ms/step") print $i}' | median)
    if [[ -z $p || -z $m || $m == 0 ]]; then
      echo "$out" | grep -v '^\[' | tail -5
      echo "FAIL: ${specs[i]}: no prediction or no measured steps"
      failed=1
      continue
    fi
    pred[i]=$p
    meas[i]="${meas[i]:-} $m"
    # Where the measured step went (the coordinator's series: the time each rank's compute waited
    # on its collectives, transfer and late peers alike), the median after step 20 of the ranks'
    # mean.
    w=$(/usr/bin/python3 - "$dir/ck/series.jsonl" <<'PY'
import json, statistics, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1])]
except OSError:
    sys.exit()
steps = [r for r in rows if r.get("kind") == "step" and r.get("step", 0) > 20 and r.get("rank_wait_s")]
if steps:
    print(f"{1e3 * statistics.median(statistics.mean(r['rank_wait_s']) for r in steps):.1f}")
PY
)
    wait[i]="${wait[i]:-} ${w:-?}"
  done
done
printf '%-34s %12s %12s %8s  %-24s %s\n' layout "predicted ms" "measured ms" error "rounds (ms)" \
  "exposed comm ms per rank, by round"
worst=0
for ((i = 0; i < n; i++)); do
  [[ -z ${meas[i]:-} ]] && { worst=inf; continue; }
  m=$(median <<<"${meas[i]}")
  err=$(awk -v p="${pred[i]}" -v m="$m" 'BEGIN { printf "%+.1f%%", 100 * (p - m) / m }')
  worst=$(awk -v w="$worst" -v p="${pred[i]}" -v m="$m" 'BEGIN { if (w == "inf") { print w; exit } e = (p - m) / m; if (e < 0) e = -e; print (e > w) ? e : w }')
  printf '%-34s %12s %12s %8s  %-24s %s\n' "${specs[i]:-the planner choice}: ${layout[i]}" "${pred[i]}" "$m" "$err" \
    "$(xargs <<<"${meas[i]}")" "$(xargs <<<"${wait[i]}")"
done
echo "launch_accuracy_max_error=$worst"
exit $failed
