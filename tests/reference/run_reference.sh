#!/usr/bin/env bash
# Runs one PyTorch reference comparison: Loom dumps weights, batch and its results for the given
# model flags, then check_reference.py replays the same steps in PyTorch and compares.
# Usage: run_reference.sh DUMP_BINARY WORK_DIR [reference_dump flags...]
set -euo pipefail
dump=$1 dir=$2
shift 2
rm -rf "$dir"
"$dump" --out "$dir" "$@"
exec /usr/bin/python3 "$(dirname "$0")/check_reference.py" "$dir"
