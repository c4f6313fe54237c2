#!/usr/bin/env bash
# Planner accuracy on this machine: predicted (`loom plan` after `loom calibrate`) against measured
# (`loom train`) step time of the demo-sized GPT in six fully fixed layouts — one rank (reference)
# and five of two ranks: dp2 (ZeRO 0), tp2, pp2 (1F1B), cp2 (ring attention), dp2 + ZeRO 3.
#
#   bench/plan_accuracy_bench.sh [--build DIR] [--rounds R] [--steps N] [--warmup W]
#                                [--calibrations K] [--calibration FILE] [--work DIR]
#                                [--micro-batch B]
#                                [--layouts "single dp2 ..."] [--quiet-timeout S]
#
# Calibration: `loom calibrate` alone, then `mpirun -np 2 loom calibrate --merge` (one file for
# every layout), K times (default 3) spread over the rounds and merged into one file (the planner
# takes the median of repeated samples: the VM's speed at one moment does not decide every
# prediction); --calibration FILE uses an existing file instead.
# Measurement: R rounds (default 6); each round trains every layout for N steps (default 12,
# progress line every step), in an order rotated from round to round, so the VM's drift (up to 2x
# within minutes) falls on every layout alike; a run's figure is the median step after W warm-up
# steps (default 3), a layout's the median over its rounds (the rounds are printed too). Every
# run waits for a quiet machine and is repeated (twice at most) if other processes took more
# than 0.1 core meanwhile. Last line: plan_accuracy_max_error=<max |predicted/measured - 1|> over
# the two-rank layouts.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
rounds=6
steps=12
warmup=3
calibration=
work=
layouts="single dp2 tp2 pp2 cp2 dp2z3"
quiet_timeout=600
calibrations=3
micro_batch=4
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --calibration) calibration=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --layouts) layouts=$2; shift 2 ;;
    --quiet-timeout) quiet_timeout=$2; shift 2 ;;
    --calibrations) calibrations=$2; shift 2 ;;
    --micro-batch) micro_batch=$2; shift 2 ;;
    *) echo "plan_accuracy_bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if (( steps <= warmup )); then
  echo "plan_accuracy_bench: --steps must exceed --warmup" >&2
  exit 2
fi
loom=$build/loom
[[ -x $loom ]] || { echo "plan_accuracy_bench: $loom not built" >&2; exit 2; }
[[ -n $work ]] || work=$(mktemp -d /tmp/plan_accuracy.XXXXXX)
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun -np 2)
cluster=$root/deploy/clusters/localhost.yaml

# The demo model (examples/demo.yaml) with every field the planner reads fixed, as in
# examples/plan/demo-tp2.yaml: 16 sequences of 128 tokens, micro-batches of --micro-batch (4).
# Arguments: name, world size, parallel section.
write_job() {
  cat > "$work/$1.yaml" <<EOF
model: {vocab: 256, max_seq: 128, layers: 4, heads: 8, hidden: 256}
data: {text: $root/data/tinyshakespeare.txt, seq: 128, global_batch: 16, micro_batch: $micro_batch}
optimizer: {lr: 2.0e-3, min_lr: 2.0e-4}
steps: $steps
eval: {batches: 1}
runtime: {recompute: none, log_every: 1}
parallel: {$3}
EOF
  echo "$2" > "$work/$1.world"
}
write_job single 1 "tp: 1, cp: 1, pp: 1, vpp: 1, dp: 1, zero: 0, sp: false"
write_job dp2 2 "tp: 1, cp: 1, pp: 1, vpp: 1, dp: 2, zero: 0, sp: false"
write_job tp2 2 "tp: 2, cp: 1, pp: 1, vpp: 1, dp: 1, zero: 0, sp: false"
write_job pp2 2 "tp: 1, cp: 1, pp: 2, vpp: 1, dp: 1, zero: 0, sp: false, schedule: 1f1b"
write_job cp2 2 "tp: 1, cp: 2, pp: 1, vpp: 1, dp: 1, zero: 0, sp: false"
write_job dp2z3 2 "tp: 1, cp: 1, pp: 1, vpp: 1, dp: 2, zero: 3, sp: false"

# CPU seconds (user, system, interrupts) the whole machine has spent so far, steal excluded.
busy_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" {print ($2 + $3 + $4 + $7 + $8) / hz; exit}' /proc/stat
}

# Other engineers' builds and tests share the two cores. Before a run, wait (up to
# --quiet-timeout seconds) until the machine has been idle for two seconds.
wait_quiet() {
  local waited=0 a b
  while ((waited < quiet_timeout)); do
    a=$(busy_seconds); sleep 2; b=$(busy_seconds)
    if awk -v a="$a" -v b="$b" 'BEGIN {exit !((b - a) / 2 < 0.15)}'; then return 0; fi
    waited=$((waited + 2))
  done
  echo "plan_accuracy_bench: machine still busy after ${quiet_timeout}s; measuring anyway" >&2
}

# Runs "$@" (output to $log) and sets `foreign` to the CPU cores other processes used on average
# meanwhile: the machine's busy time minus this run's own (children's rusage), over wall time.
timed_run() {
  local a b
  a=$(busy_seconds)
  /usr/bin/time -f '%e %U %S' -o "$log.time" "$@" > "$log" 2>&1
  b=$(busy_seconds)
  foreign=$(awk -v a="$a" -v b="$b" '{printf "%.2f", (b - a - $2 - $3) / $1}' "$log.time")
}

# Median of the per-step times (ms) after the warm-up, from `loom train`'s progress lines.
median_step() {
  grep -o '[0-9.]* ms/step' "$1" | awk '{print $1}' | tail -n +"$((warmup + 1))" | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# Runs "$@" until other processes took at most 0.1 core meanwhile (three attempts; the last one
# counts). Output in $log.
quiet_run() {
  for attempt in 1 2 3; do
    wait_quiet
    timed_run "$@"
    awk -v f="$foreign" 'BEGIN {exit !(f > 0.1)}' || return 0
    retried=$((retried + 1))
  done
}

# One run of loom calibrate ("$@": the launcher, if any) merged into $calibration, measured again
# like a training run if other processes used the cores (from a copy: a rejected run leaves no
# samples behind).
calibrate_once() {
  local next=$work/next.json out
  for attempt in 1 2 3; do
    if [[ -f $calibration ]]; then cp "$calibration" "$next"; out=(--merge "$next")
    else rm -f "$next"; out=(--output "$next"); fi
    wait_quiet
    timed_run "$@" "$loom" calibrate --job "$work/tp2.yaml" "${out[@]}"
    if ((attempt == 3)) || ! awk -v f="$foreign" 'BEGIN {exit !(f > 0.1)}'; then break; fi
    retried=$((retried + 1))
  done
  mv "$next" "$calibration"
  tail -1 "$log"
}

# One calibration: alone (two threads), then both ranks (one thread each). The planner takes the
# median of what repeated calibrations measured.
calibrate() {
  log=$work/calibrate.$1.log
  calibrate_once
  log=$work/calibrate.$1.mpi.log
  calibrate_once "${mpirun[@]}"
}

read -r -a order <<< "$layouts"
n=${#order[@]}
declare -A runs
retried=0
calibrate_at=" "
if [[ -z $calibration ]]; then
  calibration=$work/calibration.json
  rm -f "$calibration"
  # Before the first round, and spread over the others.
  for ((k = 0; k < calibrations; k++)); do calibrate_at+="$((k * rounds / calibrations)) "; done
fi
for ((r = 0; r < rounds; r++)); do
  if [[ $calibrate_at == *" $r "* ]]; then
    echo "== loom calibrate before round $((r + 1)) (1 rank, then 2 ranks merged) -> $calibration"
    calibrate "$r"
  fi
  line="round $((r + 1))/$rounds:"
  for ((i = 0; i < n; i++)); do
    l=${order[$(((i + r) % n))]}
    log=$work/$l.round$r.log
    launcher=()
    [[ $(cat "$work/$l.world") == 1 ]] || launcher=("${mpirun[@]}")
    # A run during which other processes took more than 0.1 core is measured again (twice at
    # most; the last attempt counts, marked with its foreign load).
    quiet_run "${launcher[@]}" "$loom" train --config "$work/$l.yaml"
    ms=$(median_step "$log") || { echo "plan_accuracy_bench: no step times in $log" >&2; exit 1; }
    runs[$l]="${runs[$l]:-} $ms"
    line+=" $l $ms"
    if awk -v f="$foreign" 'BEGIN {exit !(f > 0.1)}'; then line+="(busy $foreign)"; fi
  done
  echo "$line"
done

declare -A predicted
for l in $layouts; do
  "$loom" plan --cluster "$cluster" --calibration "$calibration" --job "$work/$l.yaml" --json \
    > "$work/$l.plan.json"
  predicted[$l]=$(jq -r '.plans[0].step_seconds * 1000' "$work/$l.plan.json")
done

echo
echo "$rounds rounds x $steps steps (median after $warmup warm-up steps), $retried run(s) repeated" \
  "because other processes used the cores; calibration $calibration"
printf '%-8s %12s %12s %8s   %s\n' layout predicted_ms measured_ms error "rounds (ms)"
max=0
for l in $layouts; do
  measured=$(tr ' ' '\n' <<< "${runs[$l]}" | grep . | sort -g |
    awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
  err=$(awk -v p="${predicted[$l]}" -v m="$measured" 'BEGIN {printf "%+.1f", (p / m - 1) * 100}')
  printf '%-8s %12.1f %12.1f %7s%%  %s\n' "$l" "${predicted[$l]}" "$measured" "$err" "${runs[$l]}"
  if [[ $(cat "$work/$l.world") == 2 ]]; then
    max=$(awk -v a="$max" -v e="$err" 'BEGIN {e = e < 0 ? -e : e; print (e / 100 > a) ? e / 100 : a}')
  fi
done
printf 'plan_accuracy_max_error=%.3f\n' "$max"
