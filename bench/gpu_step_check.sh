#!/usr/bin/env bash
# The device check of the single-GPU training step, as one script for a lent GPU machine: builds
# only the GPU targets, runs their tests (each fails on a GPU, or skips saying why without one),
# then the benchmark (GPT-2 124M, bf16, vs PyTorch on the same GPU when it has CUDA) and a short
# fp32 run. Exit status 0 when everything passed.
#
#   bench/gpu_step_check.sh                    # from the repository root
#   BUILD=build BENCH_ARGS="--batch 4" bench/gpu_step_check.sh
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build-gpu}
GEN="Unix Makefiles"
command -v ninja >/dev/null 2>&1 && GEN=Ninja
# sm_90 only (H100/H200): half the device-code compile time of the default 80;90.
cmake -S . -B "$BUILD" -G "$GEN" -DLOOM_CUDA=ON -DLOOM_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >"$BUILD.cmake.log" 2>&1 ||
  { tail -30 "$BUILD.cmake.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target core_cuda_train_kernels_test worker_gpu_gpt_test \
  gpu_step_bench || exit 1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader || true
rc=0
"$BUILD"/tests/core_cuda_train_kernels_test || rc=1
"$BUILD"/tests/worker_gpu_gpt_test || rc=1
# shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
"$BUILD"/bench/gpu_step_bench ${BENCH_ARGS:-} || rc=1
"$BUILD"/bench/gpu_step_bench --precision fp32 --batch 4 --warmup 2 --steps 5 --skip-torch || rc=1
echo "gpu_step_check: exit $rc"
exit $rc
