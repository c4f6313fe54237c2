#!/usr/bin/env bash
# Installs every Debian package Loom needs to build, test and benchmark. Idempotent: packages
# already present are skipped, and apt is only called when something is missing.
# Usage: deploy/install-deps.sh          (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libopenblas-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libgtest-dev
  libopenmpi-dev openmpi-bin libboost-dev libprotobuf-dev protobuf-compiler
  libisal-dev python3-torch python3-numpy python3-yaml
  slurmctld slurmd slurm-client munge
  prometheus-cpp-dev libjs-chart.js prometheus chromium fonts-dejavu-core libdnnl-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
