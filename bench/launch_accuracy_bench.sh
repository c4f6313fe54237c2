#!/usr/bin/env bash
# How well `loom launch` predicts this machine's step time with the calibration it measures and
# caches itself (cli/launch_calibration.h): the demo job (examples/demo.yaml) on NP ranks (4, the
# demo's default: two per core here; or NP=2, a rank per core), the planner's own layout and
# fixed ones. Per layout: the prediction `loom launch` prints, and
# the median of the ms/step it logs every 5 steps after step 20 (150 steps). The calibration is
# measured once at the start into WORK_DIR/cache (a fresh one: the first launch measures it).
# Usage: [NP=2] bench/launch_accuracy_bench.sh [BUILD_DIR] [WORK_DIR]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build} dir=${2:-$root/build/bench/launch_accuracy} np=${NP:-4}
dir=$(realpath -m "$dir") build=$(realpath -m "$build")
rm -rf "$dir" && mkdir -p "$dir/tmp"
export TMPDIR="$dir/tmp" OMPI_MCA_btl_vader_backing_directory="$dir/tmp" LOOM_CACHE_DIR="$dir/cache"
unset LOOM_CALIBRATION
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
sed "s#text: \(.*\)#text: $root/data/tinyshakespeare.txt#; s#dir: .*\##dir: $dir/ck \##; s/^steps: .*/steps: 150/; s/log_every: .*/log_every: 5/" \
  "$root/examples/demo.yaml" > "$dir/demo.yaml"
echo "ranks: $np; machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F)"
printf '%-34s %12s %12s %8s %s\n' layout "predicted ms" "measured ms" error \
  "  measured: exposed comm ms per rank"
worst=0
specs=("" "dp: 4, zero: 0" "tp: 2, dp: 2, sp: true" "pp: 2, dp: 2" "cp: 4" "tp: 4, sp: true")
[[ $np == 2 ]] && specs=("" "dp: 2, zero: 0" "tp: 2, sp: true" "pp: 2" "cp: 2" "dp: 2, zero: 3")
for spec in "${specs[@]}"; do
  job="$dir/demo.yaml"
  if [[ -n $spec ]]; then
    job="$dir/fixed.yaml"
    sed "s/^steps:/parallel: {tp: 1, cp: 1, pp: 1, dp: 1, $spec}\nsteps:/" "$dir/demo.yaml" |
      sed 's/{tp: 1, cp: 1, pp: 1, dp: 1, tp: \([0-9]\)/{cp: 1, pp: 1, dp: 1, tp: \1/' > "$job"
    # Fields given twice: keep the last (the spec's).
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
  fi
  rm -rf "$dir/ck"
  out=$("$build/loom" launch "$job" --np "$np" 2>&1) || { echo "$out" | tail -5; echo "FAIL: $spec"; continue; }
  layout=$(sed -n 's/.*| layout \(tp=[^(]*\) (.*/\1/p; s/.*| layout \(tp=.*\)$/\1/p' <<<"$out" | head -1 | sed 's/ vpp=1//; s/ sp=off//')
  pred=$(sed -n 's/^  predicted \([0-9.]*\) ms\/step.*/\1/p' <<<"$out" | head -1)
  meas=$(grep -E '^step +[0-9]+/' <<<"$out" | awk '{split($2, a, "/"); if (a[1] > 20) for (i = 1; i <= NF; i++) if ($(i+1) == "ms/step") print $i}' |
         sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
  if [[ -z $pred || -z $meas || $meas == 0 ]]; then
    echo "$out" | grep -v '^\[' | tail -5
    echo "FAIL: $spec: no prediction or no measured steps"
    worst=inf
    continue
  fi
  err=$(awk -v p="$pred" -v m="$meas" 'BEGIN { printf "%+.1f%%", 100 * (p - m) / m }')
  worst=$(awk -v w="$worst" -v p="$pred" -v m="$meas" 'BEGIN { e = (p - m) / m; if (e < 0) e = -e; print (e > w) ? e : w }')
  # Where the measured step went (the coordinator's series: the time each rank's compute waited
  # on its collectives, transfer and late peers alike), the median after step 20 of the ranks'
  # mean.
  split=$(/usr/bin/python3 - "$dir/ck/series.jsonl" <<'PY'
import json, statistics, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1])]
except OSError:
    print("  (no series)"); sys.exit()
steps = [r for r in rows if r.get("kind") == "step" and r.get("step", 0) > 20]
if not steps:
    print("  (no steps)"); sys.exit()
wait = statistics.median(statistics.mean(r["rank_wait_s"]) for r in steps if r.get("rank_wait_s"))
print(f"  {1e3 * wait:.1f}")
PY
)
  printf '%-34s %12s %12s %8s %s\n' "${spec:-the planner choice}: $layout" "$pred" "$meas" "$err" "$split"
done
echo "launch_accuracy_max_error=$worst"
