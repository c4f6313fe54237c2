#!/usr/bin/env bash
# On a GPU machine: runs every GPU test and benchmark of a bundle made by deploy/gpu/bundle.sh
# (the NCCL tests once more with two ranks, under the bundle's mpirun) and writes four files to
# $OUT (./gpu-results without it): machine.txt (nvidia-smi, the libraries found), tests.log
# (every test's output), bench.txt (the benchmarks'), summary.txt (one line per program with its
# exit status). Each program has a time limit; the script's own
# exit status is 1 when a test failed. Usage: BUNDLE/check.sh [BUNDLE]
# Limits, for a lease of a few minutes: LOOM_GPU_TEST_TIMEOUT (s per test, 300),
# LOOM_GPU_BENCH_TIMEOUT (s per benchmark run, 420), LOOM_GPU_BENCH_ARGS (extra benchmark flags,
# e.g. "--warmup 2 --steps 5"); LOOM_GPU_MEMCHECK=1 also runs each test under compute-sanitizer's
# memcheck (sanitizer.log), where the machine has it, LOOM_GPU_MEMCHECK_TIMEOUT (s per test there,
# the test limit by default); LOOM_GPU_PROFILE=1 times every kernel of two bf16 steps of the
# benchmark under ncu (ncu_bf16.txt, and ncu_summary.txt: milliseconds per step by kernel).
# LOOM_GPU_CHECKS: which parts run, a comma-separated list of tests (every test program, one
# rank), np2 (the NCCL tests with two ranks) and bench; all three by default.
set -uo pipefail
checks=",${LOOM_GPU_CHECKS:-tests,np2,bench},"
for c in ${checks//,/ }; do
  case $c in tests|np2|bench) ;; *) echo "check.sh: LOOM_GPU_CHECKS: unknown part '$c' (expected tests, np2 or bench)" >&2; exit 2 ;; esac
done
test_timeout=${LOOM_GPU_TEST_TIMEOUT:-300}
bench_timeout=${LOOM_GPU_BENCH_TIMEOUT:-420}
read -r -a bench_args <<< "${LOOM_GPU_BENCH_ARGS:-}"
bundle=$(cd "${1:-$(dirname "$0")}" && pwd)
out=${OUT:-gpu-results}
mkdir -p "$out"
# CUDA's libraries: the toolkit's, then the Python packages' (nvidia-nccl-cu13 and friends).
libs="$bundle/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [[ -d $d ]] && libs+=":$d"; done
py_libs=$(python3 - <<'PY' 2>/dev/null
import glob, os, site
dirs = set()
for sp in site.getsitepackages():
    for lib in glob.glob(os.path.join(sp, "nvidia", "*", "lib")):
        dirs.add(lib)
print(":".join(sorted(dirs)))
PY
)
[[ -n $py_libs ]] && libs+=":$py_libs"
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  date -u
  nvidia-smi 2>&1 | head -20
  nvidia-smi --query-gpu=index,name,compute_mode,mig.mode.current --format=csv 2>&1
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  for f in "$bundle"/bin/*; do
    missing=$(ldd "$f" 2>&1 | grep "not found")
    [[ -n $missing ]] && echo "$(basename "$f"): $missing"
  done
} > "$out/machine.txt" 2>&1
: > "$out/tests.log"
: > "$out/summary.txt"
failed=0
# One line of summary.txt for a program whose output is in $out/last.log (appended to tests.log):
# "skipped" when gtest skipped every test it ran.
summarize() {  # summarize NAME RC START
  local note=""
  grep -q "\[  SKIPPED \]" "$out/last.log" && ! grep -q "\[       OK \]" "$out/last.log" && note=" skipped"
  cat "$out/last.log" >> "$out/tests.log"
  echo "$1 rc=$2 $(( $(date +%s) - $3 )) s$note" >> "$out/summary.txt"
  [[ $2 -ne 0 ]] && failed=1
  rm -f "$out/last.log"
}
for t in "$bundle"/bin/*_test; do
  [[ $checks == *,tests,* ]] || break
  name=$(basename "$t")
  echo "===== $name" >> "$out/tests.log"
  start=$(date +%s)
  timeout -k 10 "$test_timeout" "$t" --gtest_color=no > "$out/last.log" 2>&1
  summarize "$name" $? "$start"
done
# The NCCL tests with two ranks, under the bundle's own mpirun (deploy/gpu/bundle_mpi.sh); on a
# machine of one GPU the two ranks share it (tests/comm/nccl_backend_test.cc says how). Their
# calls give up after 30 s (the deadline test's after 20), so a hang costs at most the limit
# here, not the lease. Unbound: NCCL's threads and the engine's share no single core. Every
# rank prints, tagged, with NCCL's set-up and network lines: the log is all a lease leaves.
# A GPU in an exclusive compute mode takes one process: with fewer GPUs than ranks the second
# could not start, so those runs are left out, saying why.
gpus=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null || true)
shared_ok=1
[[ $(grep -c . <<< "$gpus") -lt 2 ]] && grep -qi "exclusive" <<< "$gpus" && shared_ok=0
for t in comm_nccl_backend_test:180 comm_nccl_deadline_test:120; do
  [[ $checks == *,np2,* ]] || break
  name=${t%%:*} limit=${t##*:}
  if [[ ! -x $bundle/mpi/mpirun || ! -x $bundle/bin/$name ]]; then
    echo "${name}_np2 not run: no mpi/mpirun or bin/$name in the bundle" >> "$out/summary.txt"
    continue
  fi
  if [[ $shared_ok == 0 ]]; then
    echo "${name}_np2 not run: one GPU, in compute mode '$gpus' (one process only)" >> "$out/summary.txt"
    continue
  fi
  echo "===== $name under mpirun -np 2" >> "$out/tests.log"
  start=$(date +%s)
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LOOM_TEST_EVERY_RANK_PRINTS=1 \
    NCCL_DEBUG=${NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET} \
    timeout -k 10 "$limit" "$bundle/mpi/mpirun" --oversubscribe --bind-to none --tag-output \
    -np 2 "$bundle/bin/$name" --gtest_color=no > "$out/last.log" 2>&1
  summarize "${name}_np2" $? "$start"
done
: > "$out/bench.txt"
for b in "$bundle"/bin/*_bench; do
  [[ $checks == *,bench,* && -x $b ]] || continue
  for precision in bf16 fp32; do
    echo "===== $(basename "$b") --precision $precision" >> "$out/bench.txt"
    PYTHONUNBUFFERED=1 timeout "$bench_timeout" "$b" --precision "$precision" "${bench_args[@]}" >> "$out/bench.txt" 2>&1
    echo "$(basename "$b") --precision $precision rc=$?" >> "$out/summary.txt"
  done
done
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [[ ${LOOM_GPU_PROFILE:-0} == 1 && -n $ncu && -x $bundle/bin/gpu_step_bench ]]; then
  timeout "$bench_timeout" "$ncu" --clock-control none --metrics gpu__time_duration.sum \
    --print-summary per-kernel "$bundle/bin/gpu_step_bench" --skip-torch --warmup 1 --steps 1 \
    --precision bf16 > "$out/ncu_bf16.txt" 2>&1
  echo "ncu gpu_step_bench --precision bf16 rc=$?" >> "$out/summary.txt"
  python3 "$bundle/ncu_summary.py" "$out/ncu_bf16.txt" 2 > "$out/ncu_summary.txt" 2>&1
fi
if [[ ${LOOM_GPU_MEMCHECK:-0} == 1 ]] && command -v compute-sanitizer >/dev/null; then
  : > "$out/sanitizer.log"
  for t in "$bundle"/bin/*_test; do
    echo "===== memcheck $(basename "$t")" >> "$out/sanitizer.log"
    timeout "${LOOM_GPU_MEMCHECK_TIMEOUT:-$test_timeout}" compute-sanitizer --tool memcheck --error-exitcode 3 "$t" \
      --gtest_color=no --gtest_brief=1 >> "$out/sanitizer.log" 2>&1
    echo "memcheck $(basename "$t") rc=$?" >> "$out/summary.txt"
  done
fi
cat "$out/summary.txt"
exit $failed
