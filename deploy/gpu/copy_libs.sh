#!/usr/bin/env bash
# Copies into DIR the shared libraries that the programs and libraries named on standard input
# (one path a line; names of files that do not exist are passed over) load, as this machine's
# loader finds them (ldd), less glibc's and GCC's runtime, which every Linux has, and those whose
# file names match SKIP (an extended regular expression, e.g. CUDA's libraries, which the GPU
# machines have). What bundle.sh and bundle_mpi.sh carry to machines without Loom's libraries.
# Usage: printf '%s\n' FILE... | deploy/gpu/copy_libs.sh DIR [SKIP]
set -euo pipefail
dir=${1:?usage: copy_libs.sh DIR [SKIP] < FILES}
skip=${2:-}
mkdir -p "$dir"
system='^(libc|libm|libdl|librt|libpthread|libgcc_s)\.so|^ld-linux'
# (ldd's output is read whole by awk, and the list whole by sort: a reader that stopped early
# would fail the pipe under pipefail.)
while read -r f; do
  if [[ -f $f ]]; then ldd "$f" 2> /dev/null | awk '$3 ~ /^\// {print $3}' || true; fi
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  [[ $name =~ $system ]] && continue
  [[ -n $skip && $name =~ $skip ]] && continue
  cp -L "$lib" "$dir/"
done
