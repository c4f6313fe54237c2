#!/usr/bin/env bash
# Builds Loom's GPU tests and benchmarks here and gathers them, with the shared libraries a GPU
# machine's CUDA image lacks, into one compressed archive to carry there (about 17 MB; the
# unpacked 100 MB would not fit beside the repository in what a device call carries):
# OUT_DIR/loom-gpu.tar.xz and OUT_DIR/run.sh, which unpacks it on that machine and runs
# deploy/gpu/check.sh from it. The build is portable (no -march=native: the GPU
# machine's CPU differs), for sm_80 and sm_90, with oneDNN: the CPU bf16 model that the GPU's bf16
# step is compared with needs its bf16 GEMM (a 38 MB library, 7 MB of the archive). CUDA's
# own libraries (cudart, cuBLAS, cuBLASLt, NCCL) are not carried: the GPU
# machine has them (its CUDA toolkit and its Python's nvidia-* packages). Open MPI's runtime is
# (deploy/gpu/bundle_mpi.sh, in mpi/): the NCCL backend's test runs there with two ranks.
# Usage: deploy/gpu/bundle.sh OUT_DIR [BUILD_DIR]   (BUILD_DIR defaults to build-gpu/)
# There: OUT_DIR/run.sh   (results in $OUT, or ./gpu-results)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: bundle.sh OUT_DIR [BUILD_DIR]}
build=${2:-$root/build-gpu}
[[ -x /usr/local/cuda/bin/nvcc ]] || { echo "bundle.sh: no nvcc in /usr/local/cuda" >&2; exit 2; }
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA=ON -DLOOM_NATIVE=OFF \
  -DLOOM_DNNL=ON -DLOOM_WERROR=ON > "$build/bundle-configure.log" 2>&1 \
  || { cat "$build/bundle-configure.log"; exit 1; }
# Every executable behind a test labelled gpu, and the GPU benchmarks.
mapfile -t tests < <(cd "$build" && ctest -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p' \
                     | sed 's/_np[0-9]*$//' | sort -u)
targets=("${tests[@]}")
# (The target list is read whole first: grep -q would stop reading early, and the SIGPIPE that
# ninja then gets fails the pipeline under pipefail, silently leaving the benchmark out.)
all_targets=$(ninja -C "$build" -t targets all)
if grep -q "^gpu_step_bench:" <<< "$all_targets"; then targets+=(gpu_step_bench); fi
ninja -C "$build" "${targets[@]}"
rm -rf "$out" && mkdir -p "$out"
stage=$(mktemp -d "$out/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/loom-gpu/bin" "$stage/loom-gpu/lib"
for t in "${targets[@]}"; do
  f=$(find "$build" -maxdepth 2 -type f -name "$t" -perm -u+x | head -1)
  [[ -n $f ]] || { echo "bundle.sh: built $t but cannot find it" >&2; exit 1; }
  cp "$f" "$stage/loom-gpu/bin/"
done
# The libraries they load that are neither glibc's nor CUDA's.
printf '%s\n' "$stage"/loom-gpu/bin/* \
  | "$root/deploy/gpu/copy_libs.sh" "$stage/loom-gpu/lib" '^(libcuda|libcudart|libcublas|libnccl|libnvidia)'
# Open MPI's runtime (those machines have none), for the NCCL test with two ranks.
"$root/deploy/gpu/bundle_mpi.sh" "$stage/loom-gpu/mpi" > /dev/null
cp "$root/deploy/gpu/check.sh" "$root/deploy/gpu/ncu_summary.py" "$stage/loom-gpu/"
# The benchmark's PyTorch side, found beside the binary's source tree or in ./bench/.
mkdir -p "$stage/loom-gpu/bench" "$stage/loom-gpu/tests/reference"
cp "$root/bench/torch_train_step.py" "$stage/loom-gpu/bench/"
cp "$root/tests/reference/torch_gpt.py" "$stage/loom-gpu/tests/reference/"
tar -cJf "$out/loom-gpu.tar.xz" -C "$stage" loom-gpu
cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# On the GPU machine: unpacks loom-gpu.tar.xz beside this script into a fresh folder and runs its
# check.sh there (results in $OUT, or ./gpu-results).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export OUT=${OUT:-$PWD/gpu-results}
work=$(mktemp -d)
tar -xJf "$here/loom-gpu.tar.xz" -C "$work"
cd "$work/loom-gpu"
status=0
./check.sh "$work/loom-gpu" || status=$?
rm -rf "$work"
exit $status
RUN
chmod +x "$out/run.sh"
du -sh "$out/loom-gpu.tar.xz"
echo "bundle in $out: $(ls "$stage/loom-gpu/bin" | tr '\n' ' ')"
