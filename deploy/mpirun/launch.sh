#!/usr/bin/env bash
# `loom launch` on hosts without Slurm: the coordinator runs here, mpirun starts the workers on
# the hosts of the manifest (loom launch writes their hostfile itself, as ./hostfile, and passes
# --hostfile). Every host needs the loom binary and the job's data at the same paths, and mpirun
# must reach each one (ssh without a password). Run it on one of the hosts, or on a machine they
# can reach: the coordinator listens on every address (0.0.0.0) and the workers connect to this
# host's name (--advertise to give another).
#   deploy/mpirun/launch.sh JOB [loom launch flags]
# Environment: LOOM (the binary; default: loom on PATH, else build/loom of this checkout),
# LOOM_CLUSTER (the manifest; default: deploy/mpirun/cluster.yaml).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
loom=${LOOM:-$(command -v loom || echo "$here/../../build/loom")}
job=${1:?usage: launch.sh JOB [loom launch flags]}
shift
exec "$loom" launch "$job" --cluster "${LOOM_CLUSTER:-$here/cluster.yaml}" --launcher mpirun \
  --address 0.0.0.0 "$@"
