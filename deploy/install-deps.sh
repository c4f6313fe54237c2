#!/usr/bin/env bash
# Installs every Debian package Loom needs to build, test and benchmark, and the one npm package
# a test reads exports with (Hugging Face's tokenizers, into build/npm). Idempotent: what is
# present is skipped, and apt and npm are only called when something is missing.
# Usage: deploy/install-deps.sh          (as root, or with sudo available)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libopenblas-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libgtest-dev
  libopenmpi-dev openmpi-bin libboost-dev libprotobuf-dev protobuf-compiler
  libisal-dev python3-torch python3-numpy python3-yaml
  slurmctld slurmd slurm-client munge
  prometheus-cpp-dev libjs-chart.js prometheus chromium fonts-dejavu-core libdnnl-dev
)

# Node.js and npm: Debian's, unless a node with its npm is installed already (NodeSource's
# nodejs carries npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then PACKAGES+=(nodejs npm); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Hugging Face's tokenizers, its Node binding (prebuilt, the same Rust library as Python's): the
# test of the exported tokenizer (tests/reference/run_hf_tokenizer_check.sh) reads it from here.
npm_dir="$root/build/npm" tokenizers=0.23.2
if [[ $(cat "$npm_dir/node_modules/tokenizers/package.json" 2>/dev/null) != *"\"version\": \"$tokenizers\""* ]]; then
  echo "install-deps: npm install tokenizers@$tokenizers into $npm_dir"
  mkdir -p "$npm_dir"
  # Only that test needs it: without the registry, it fails alone and says so; the rest runs.
  for attempt in 1 2 3; do
    npm install --prefix "$npm_dir" --no-audit --no-fund --no-save --loglevel=error \
      "tokenizers@$tokenizers" && break
    if [[ $attempt == 3 ]]; then
      echo "install-deps: warning: npm install tokenizers@$tokenizers failed;" \
        "reference_ckpt_hf_tokenizer will fail until it is installed" >&2
    else
      sleep 5
    fi
  done
fi
