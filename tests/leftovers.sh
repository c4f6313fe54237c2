#!/usr/bin/env bash
# Runs ctest with a /tmp, a /dev/shm and a System V IPC namespace of its own, and lists everything
# the tests left there: the proof that the suite cleans up after itself, free of what other
# programs on the machine write to /tmp meanwhile. /tmp is a fresh directory on /tmp's own file
# system (the O_DIRECT tests depend on it), /dev/shm a fresh tmpfs; both are private to the run.
# Needs root (unshare -m). Exit status: ctest's, or 1 when anything was left behind.
# Usage: tests/leftovers.sh BUILD_DIR [ctest arguments...]   e.g. tests/leftovers.sh build -L unit
set -uo pipefail
[[ $# -ge 1 && -d $1 ]] || { echo "usage: $0 BUILD_DIR [ctest arguments...]" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
private_tmp=$(mktemp -d /tmp/loom-leftovers.XXXXXX) || exit 2
trap 'rm -rf "$private_tmp"' EXIT
# The script is an argument, not stdin: mpirun passes its stdin on to rank 0, which would eat it.
inner=$(cat <<'EOF'
private_tmp=$1 build=$2
shift 2
mount --bind "$private_tmp" /tmp && chmod 1777 /tmp && mount -t tmpfs tmpfs /dev/shm || exit 2
ipc_before=$(ipcs -a)
(cd "$build" && ctest "$@" < /dev/null)
rc=$?
left=$(find /tmp /dev/shm -mindepth 1 | sort)
ipc_after=$(ipcs -a)
echo "== left in /tmp and /dev/shm: $(grep -c . <<<"$left") entries"
[[ -n $left ]] && echo "$left"
echo "== System V IPC (ipcs -a) after the run"
echo "$ipc_after"
[[ $ipc_after == "$ipc_before" ]] || { echo "FAIL: System V IPC objects were left"; rc=1; }
[[ -z $left ]] || { echo "FAIL: the tests left files behind"; rc=1; }
exit $rc
EOF
)
unshare -m -i --propagation private bash -c "$inner" leftovers "$private_tmp" "$build" "$@"
