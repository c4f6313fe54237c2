#!/usr/bin/env bash
# Configures and builds Loom into build/ (Release, ccache when present, CUDA when nvcc exists).
# Extra arguments go to CMake's configure step, e.g. -DLOOM_CUDA=OFF or -DLOOM_WERROR=ON.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$root/build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$root/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
elif [[ $# -gt 0 ]]; then
  cmake -S "$root" -B "$root/build" "$@"
fi
cmake --build "$root/build" -j "$(nproc)"
