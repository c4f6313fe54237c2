#!/usr/bin/env bash
# precision: bf16 against fp32 on this CPU: the same job trained 50 steps in each precision must
# give the same loss curve within bf16 tolerance (2% at every step) without being the same run
# (the bf16 path ran); checkpoints hold fp32 master weights whatever the precision, and a
# checkpoint of either precision resumes in the other (its steps 26-50 within 2% of both
# uninterrupted runs). A bad --precision names the flag.
# Usage: precision_test.sh LOOM WORK_DIR JOB
set -uo pipefail
loom=$1 dir=$2 job=$3
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files under $dir/tmp
jobdir=$(cd "$(dirname "$job")" && pwd)
sed "s#text: \([^,}]*\)#text: $jobdir/\1#; s/^steps: .*/steps: 50/" "$job" > "$dir/job.yaml"
echo "checkpoint: {every: 25, keep: 0}" >> "$dir/job.yaml"
cd "$dir" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

for p in fp32 bf16; do
  "$loom" train --config job.yaml --precision $p --checkpoint-dir ck_$p --dump-losses $p.txt \
    > $p.log 2>&1 || { tail -5 $p.log; fail "the $p run failed"; }
done
grep -q "bf16 compute, fp32 master weights" bf16.log || fail "the bf16 run's start line does not say bf16"

# Losses: within 2% at every step, and not the same numbers.
/usr/bin/python3 - fp32.txt bf16.txt <<'PY' || exit 1
import sys
a = [float(l.split()[1]) for l in open(sys.argv[1]) if l.strip()]
b = [float(l.split()[1]) for l in open(sys.argv[2]) if l.strip()]
if len(a) != 50 or len(b) != 50:
    sys.exit(f"FAIL: {len(a)} fp32 and {len(b)} bf16 losses, expected 50 each")
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
if worst > 0.02:
    sys.exit(f"FAIL: bf16 loss differs from fp32 by {worst:.3g} relative (> 0.02)")
if a == b:
    sys.exit("FAIL: bf16 and fp32 losses are identical: the bf16 path did not run")
print(f"PASS bf16 vs fp32 over 50 steps: worst relative loss difference {worst:.3g} "
      f"(first {a[0]:.4f}/{b[0]:.4f}, last {a[-1]:.4f}/{b[-1]:.4f})")
PY

# Checkpoints hold fp32 master weights and optimizer state, whatever the precision.
/usr/bin/python3 - ck_bf16/step_00000025/metadata.json <<'PY' || exit 1
import json, sys
tensors = json.load(open(sys.argv[1]))["tensors"]
bad = sorted({t["dtype"] for t in tensors} - {"F32"})
if not tensors or bad:
    sys.exit(f"FAIL: {sys.argv[1]} holds {bad or 'no tensors'}, expected F32 only")
print(f"PASS the bf16 run's checkpoint holds {len(tensors)} F32 tensors")
PY

# Each precision's step-25 checkpoint resumes in the other one.
for pair in "bf16 fp32" "fp32 bf16"; do
  set -- $pair
  from=$1 to=$2
  "$loom" train --config job.yaml --precision $to --load ck_$from/step_00000025 \
    --checkpoint-dir resumed_$to --dump-losses resumed_$to.txt > resumed_$to.log 2>&1 \
    || { tail -5 resumed_$to.log; fail "resuming the $from checkpoint in $to failed"; }
  grep -q "resum" resumed_$to.log || fail "the $to run did not say it resumed"
  /usr/bin/python3 - resumed_$to.txt fp32.txt bf16.txt "$from -> $to" <<'PY' || exit 1
import sys
def losses(path):
    return {int(l.split()[0]): float(l.split()[1]) for l in open(path) if l.strip()}
got, a, b = losses(sys.argv[1]), losses(sys.argv[2]), losses(sys.argv[3])
if sorted(got) != list(range(26, 51)):
    sys.exit(f"FAIL {sys.argv[4]}: resumed steps {sorted(got)[:3]}..., expected 26-50")
worst = max(abs(got[s] - r[s]) / abs(r[s]) for s in got for r in (a, b))
if worst > 0.02:
    sys.exit(f"FAIL {sys.argv[4]}: resumed losses differ by {worst:.3g} relative (> 0.02)")
print(f"PASS resumed {sys.argv[4]} at step 25: steps 26-50 within {worst:.3g} of both runs")
PY
done

# A bad flag names itself.
if "$loom" train --config job.yaml --precision fp16 > bad.log 2>&1; then fail "--precision fp16 accepted"; fi
grep -q -- "--precision" bad.log || { cat bad.log; fail "the error does not name --precision"; }
echo "PASS --precision fp16 refused: $(head -1 bad.log)"
