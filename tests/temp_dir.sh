#!/usr/bin/env bash
# The shell half of tests/temp_dir.h: a test's temporary files go to a directory of its own in the
# build tree, never to /tmp or /dev/shm. That covers what the test and the programs it starts
# write to $TMPDIR (loom launch's host file, Python's tempfile), and Open MPI's session directory
# (/tmp/ompi.*) and shared-memory segments (/dev/shm/vader_segment.*): Open MPI removes them when
# a job ends, but a job killed by ctest's timeout (SIGKILL, no cleanup) left them behind. In the
# build tree they are removed by the test's next run, which empties its directory first.
#
# Sourced by a test script right after it has emptied its work directory $dir:
#   rm -rf "$dir" && mkdir -p "$dir"
#   . "$(dirname "$0")/../temp_dir.sh"        # temporary files under $dir/tmp
# Run, for a test that is a program (ctest COMMAND):
#   tests/temp_dir.sh DIR COMMAND [ARGS...]    # empties DIR, runs COMMAND with them under DIR/tmp

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  [[ $# -ge 2 ]] || { echo "usage: $0 DIR COMMAND [ARGS...]" >&2; exit 2; }
  dir=$1
  shift
  rm -rf "$dir" && mkdir -p "$dir" || exit 2
fi
mkdir -p "$dir/tmp" || exit 2
export TMPDIR="$dir/tmp" OMPI_MCA_btl_vader_backing_directory="$dir/tmp"
# `loom launch` on this machine measures it for the planner once and caches that under $HOME
# (cli/launch_calibration.h): tests plan uncalibrated unless they ask (demo_training_test.sh
# measures into its own directory), and never write outside the build tree.
export LOOM_CALIBRATION=${LOOM_CALIBRATION-none} LOOM_CACHE_DIR="$dir/cache"
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  exec "$@"
fi
