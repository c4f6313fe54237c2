#!/usr/bin/env bash
# README command 2: install what is missing, build (warnings are errors), and run every test.
# Arguments go to ctest, e.g. `deploy/test.sh -L unit`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"
"$root/deploy/build.sh" -DLOOM_WERROR=ON
cd "$root/build"
exec ctest --output-on-failure -j 2 "$@"
