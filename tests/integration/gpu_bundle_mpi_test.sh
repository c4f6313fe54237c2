#!/usr/bin/env bash
# deploy/gpu/bundle_mpi.sh, the Open MPI runtime that the GPU bundle carries to machines without
# one: copied into WORK_DIR, it must start a real Loom MPI test program with four ranks, and pass,
# where this machine's own Open MPI is hidden (a private mount namespace in which its folders,
# programs and libraries are empty), as on the GPU machines. The test first checks that the
# system's mpirun and the program's libmpi are really out of reach there. Skipped, saying why,
# where no private mount namespace with bind mounts can be made (they need root or CAP_SYS_ADMIN).
# Usage: gpu_bundle_mpi_test.sh WORK_DIR MPI_TEST_PROGRAM
set -uo pipefail
dir=$1 prog=$2
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/../temp_dir.sh"  # temporary files (Open MPI's too) under $dir/tmp
root=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }

"$root/deploy/gpu/bundle_mpi.sh" "$dir/mpi" > "$dir/bundle.log" 2>&1 \
  || { cat "$dir/bundle.log"; fail "bundle_mpi.sh exited non-zero"; }
[[ -x $dir/mpi/mpirun && -x $dir/mpi/bin/orterun ]] || fail "no mpirun in $dir/mpi"
mkdir -p "$dir/probe"
if ! unshare -m mount --bind "$dir/probe" "$dir/probe" 2> /dev/null; then
  echo "SKIP: no private mount namespace with bind mounts here (unshare -m and mount need root or" \
       "CAP_SYS_ADMIN), so this machine's Open MPI cannot be hidden from the copy"
  exit 77
fi

# Inside the namespace: every folder of the system's Open MPI and PMIx made empty, and each of
# their programs and libraries (the files, not the links to them) an empty file; ssh and rsh too,
# which the GPU machines lack and Open MPI looks for.
cat > "$dir/hidden.sh" << 'HIDE'
set -uo pipefail
empty=$1/empty nothing=$1/nothing
shift
mkdir -p "$empty" && : > "$nothing"
# In a network namespace of its own (LO_UP=1), its loopback interface starts down.
if [[ ${LO_UP:-0} == 1 ]]; then ip link set lo up || { echo "hidden.sh: cannot bring lo up" >&2; exit 3; }; fi
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/share/openmpi /usr/lib/x86_64-linux-gnu/pmix2 \
         /etc/openmpi; do
  [[ -d $d ]] && { mount --bind "$empty" "$d" || { echo "hidden.sh: cannot hide $d" >&2; exit 3; }; }
done
for f in /usr/bin/orterun /usr/bin/orted /usr/bin/ssh /usr/bin/rsh /usr/lib/x86_64-linux-gnu/lib{mpi,open-rte,open-pal,pmix,hwloc,event_core-,event_pthreads-}*.so*; do
  [[ -f $f && ! -L $f ]] && { mount --bind "$nothing" "$f" || { echo "hidden.sh: cannot hide $f" >&2; exit 3; }; }
done
"$@"
HIDE

# The system's Open MPI is out of reach in there: its mpirun does not start, the program does not
# load its libmpi.
unshare -m bash "$dir/hidden.sh" "$dir" mpirun --version > "$dir/system_mpirun.log" 2>&1 \
  && fail "the system's mpirun still ran with Open MPI hidden: $(head -1 "$dir/system_mpirun.log")"
grep -q "mpirun: Permission denied" "$dir/system_mpirun.log" \
  || fail "the system's mpirun failed otherwise than by being hidden: $(head -3 "$dir/system_mpirun.log")"
unshare -m bash "$dir/hidden.sh" "$dir" "$prog" --gtest_list_tests > "$dir/system_prog.log" 2>&1 \
  && fail "$prog still loaded its libmpi with Open MPI hidden"
grep -q "error while loading shared libraries: .*libmpi" "$dir/system_prog.log" \
  || fail "$prog failed otherwise than by its hidden libmpi: $(head -3 "$dir/system_prog.log")"
# The copy's help texts are found (Open MPI prints one for --help, run as root or not).
unshare -m bash "$dir/hidden.sh" "$dir" "$dir/mpi/mpirun" --help > "$dir/help.log" 2>&1
grep -q "supposed to get help" "$dir/help.log" && { cat "$dir/help.log"; fail "the copy's help texts were not found"; }
[[ $(grep -c . "$dir/help.log") -ge 3 ]] || { cat "$dir/help.log"; fail "no help text from the copy's mpirun --help"; }

# The copy's mpirun starts the program with four ranks (the MPI tests' count), and every test
# passes; where a private network namespace can be made, in one whose only interface is the
# loopback, as on the GPU machines, which reach nothing outside.
net=() where="with this machine's network"
if unshare -n ip link set lo up 2> /dev/null; then net=(-n) where="with the loopback interface alone"; fi
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LO_UP=${#net[@]} timeout 240 \
  unshare -m "${net[@]}" bash "$dir/hidden.sh" "$dir" "$dir/mpi/mpirun" --oversubscribe -np 4 "$prog" \
  --gtest_color=no > "$dir/run.log" 2>&1
rc=$?
[[ $rc -eq 0 ]] || { tail -30 "$dir/run.log"; fail "the copy's mpirun -np 4 $prog exited $rc"; }
grep -q "PASSED" "$dir/run.log" || { tail -30 "$dir/run.log"; fail "no test passed in $dir/run.log"; }
echo "PASS: the copied Open MPI runtime ($(du -sh "$dir/mpi" | cut -f1)) ran $(basename "$prog") with four ranks, the system's hidden, $where"
rm -rf "$dir/mpi"
