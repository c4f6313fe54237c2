#!/usr/bin/env bash
# precision: bf16 against fp32 on this CPU: the same job trained 50 steps in each precision must
# give the same loss curve within bf16 tolerance (2% at every step) without being the same run
# (the bf16 path ran); checkpoints hold fp32 master weights whatever the precision, and a
# checkpoint of either precision resumes in the other (its steps 26-50 within 2% of both
# uninterrupted runs). A bad --precision names the flag. `loom launch` plans and runs a bf16 job
# on this machine's built-in manifest, says it runs bf16 and prices it in bf16 whatever
# plan.precision says; `loom calibrate` measures a bf16 job in bf16 and refuses to merge it into a
# file of fp32 measurements; `loom plan` says which precision it priced.
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

# loom ckpt inspect says what each run trained in.
for p in fp32 bf16; do
  "$loom" ckpt inspect ck_$p > inspect_$p.log 2>&1 || { cat inspect_$p.log; fail "inspecting ck_$p"; }
  grep -q "^trained in   $p" inspect_$p.log || fail "loom ckpt inspect ck_$p: $(grep -m1 '^trained in' inspect_$p.log)"
done
echo "PASS loom ckpt inspect: $(grep '^trained in' inspect_bf16.log)"

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

# loom launch on this machine's built-in manifest (uncalibrated: temp_dir.sh) plans a bf16 job,
# says what it runs, and trains it.
out=$("$loom" launch job.yaml --np 2 --precision bf16 --steps 3 --checkpoint-dir launched 2>&1) \
  || { echo "$out" | tail -5; fail "loom launch --precision bf16 failed"; }
grep -q "^  predicted .*, bf16 compute with fp32 master weights$" <<<"$out" \
  || { echo "$out" | head -3; fail "the launch does not say it runs bf16"; }
grep -q "^done in .*: 3 steps" <<<"$out" || { echo "$out" | tail -5; fail "the bf16 launch did not run 3 steps"; }
echo "PASS loom launch --precision bf16 on the built-in manifest: $(grep '^  predicted' <<<"$out")"
# plan.precision is loom plan's what-if: a launch prices the precision it trains in.
{ cat job.yaml; echo "precision: bf16"; echo "plan: {precision: fp32}"; } > whatif.yaml
whatif=$("$loom" launch whatif.yaml --np 2 --steps 1 --checkpoint-dir whatif 2>&1) \
  || { echo "$whatif" | tail -5; fail "loom launch of a bf16 job with plan.precision fp32 failed"; }
[[ $(grep '^  predicted' <<<"$whatif") == $(grep '^  predicted' <<<"$out") ]] \
  || fail "plan.precision fp32 changed the launch's prediction: $(grep '^  predicted' <<<"$whatif")"
echo "PASS a launch prices the precision it trains in, not plan.precision"
# Its precision was in the job file, not a flag: inspect reads the recorded job.
"$loom" ckpt inspect whatif > inspect_whatif.log 2>&1 || { cat inspect_whatif.log; fail "inspecting whatif"; }
grep -q "^trained in   bf16" inspect_whatif.log || fail "loom ckpt inspect whatif: $(grep -m1 '^trained in' inspect_whatif.log)"

# loom calibrate: a bf16 job's GEMMs are measured in bf16 and the file says so; merging them into
# a file of fp32 measurements is refused before measuring, naming the file and field, the file
# left as it was; loom plan prices the bf16 job with the bf16 file, and says that an fp32 file's
# samples do not price it.
sed 's/^steps: .*/&\nprecision: bf16/' job.yaml > job16.yaml
cal() { "$loom" calibrate --passes 1 --seconds 0.05 "$@"; }
cal --job job.yaml --output cal_fp32.json > cal_fp32.log 2>&1 || { cat cal_fp32.log; fail "calibrating fp32"; }
cal --job job16.yaml --output cal_bf16.json > cal_bf16.log 2>&1 || { cat cal_bf16.log; fail "calibrating bf16"; }
/usr/bin/python3 - cal_fp32.json cal_bf16.json <<'PY' || exit 1
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
if (a.get("precision"), b.get("precision")) != ("fp32", "bf16"):
    sys.exit(f"FAIL: precisions {a.get('precision')}, {b.get('precision')}; expected fp32, bf16")
shapes = lambda c: [(g["m"], g["n"], g["k"]) for g in c["compute"]["gemm"]]
if not shapes(b) or shapes(a) != shapes(b):
    sys.exit(f"FAIL: GEMM samples {len(shapes(a))} fp32 and {len(shapes(b))} bf16, not the same shapes")
print(f"PASS calibrate: {len(shapes(b))} GEMM shapes measured in each precision")
PY
# --precision measures an fp32 job file in bf16, as loom launch --precision bf16 asks it to.
cal --job job.yaml --precision bf16 --output cal_flag.json > cal_flag.log 2>&1 || { cat cal_flag.log; fail "calibrate --precision bf16"; }
grep -q '"precision": "bf16"' cal_flag.json || fail "calibrate --precision bf16 wrote $(grep '"precision"' cal_flag.json)"
cp cal_fp32.json cal_fp32.before
if cal --job job16.yaml --merge cal_fp32.json > merge.log 2>&1; then fail "a bf16 run merged into an fp32 file"; fi
grep -q "cal_fp32.json: field 'precision': the file was measured in fp32, this run measures bf16" merge.log \
  || { cat merge.log; fail "the refused merge does not name the file, field and precisions"; }
! grep -q "GEMMs, attention" merge.log || fail "the refused merge measured first"
cmp -s cal_fp32.json cal_fp32.before || fail "the refused merge changed cal_fp32.json"
echo "PASS calibrate --merge across precisions refused: $(tail -1 merge.log)"
# A run of the collectives alone (--skip-compute) adds no samples of a precision: merged, the
# file keeps its own.
cp cal_fp32.before cal_comm.json
cal --job job16.yaml --skip-compute --merge cal_comm.json > comm.log 2>&1 || { cat comm.log; fail "a --skip-compute run was not merged"; }
grep -q '"precision": "fp32"' cal_comm.json || fail "a --skip-compute merge changed the file's precision"
for c in bf16 fp32; do
  "$loom" plan --job job16.yaml --np 2 --calibration cal_$c.json > plan_$c.log 2>&1 \
    || { cat plan_$c.log; fail "loom plan of the bf16 job with the $c calibration"; }
done
! grep -q "measured in" plan_bf16.log || { cat plan_bf16.log; fail "the bf16 calibration was set aside"; }
grep -q "^calibration: its GEMM samples (and on GPUs its attention samples) were measured in fp32: this bf16 job's are priced" \
  plan_fp32.log || { cat plan_fp32.log; fail "loom plan does not say the fp32 samples do not price bf16"; }
# loom plan --json names the precision it priced; --precision overrides the job's.
for p in "" fp32; do
  got=$("$loom" plan --job job16.yaml --np 2 --json ${p:+--precision $p} \
    | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["precision"])') \
    || fail "loom plan --json ${p:+--precision $p}"
  [[ $got == "${p:-bf16}" ]] || fail "loom plan --json ${p:+--precision $p} priced $got, expected ${p:-bf16}"
done
echo "PASS loom plan of the bf16 job: its bf16 calibration used; an fp32 one $(grep -o 'measured in fp32.*priced at [^(]*' plan_fp32.log)"
