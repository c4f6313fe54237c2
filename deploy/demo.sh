#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the demo job through the coordinator:
# `loom launch` plans a layout for 4 ranks on this machine (built-in localhost manifest), starts
# them under mpirun and shows the progress (examples/demo.yaml: a 3.3M-parameter GPT learning the
# bundled Shakespeare corpus, with checkpoints every 50 steps).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"
"$root/deploy/build.sh"
# A fresh demo every time: without this the run would resume from the last demo's checkpoints.
rm -rf "$root/runs/demo/checkpoints"
"$root/build/loom" launch "$root/examples/demo.yaml" "$@"
echo
echo "Checkpoints: $root/runs/demo/checkpoints (try: build/loom ckpt inspect runs/demo/checkpoints)"
