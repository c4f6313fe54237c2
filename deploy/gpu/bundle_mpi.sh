#!/usr/bin/env bash
# Copies this machine's Open MPI runtime (Debian's: mpirun, its plugins, help texts and PMIx, and
# the libraries they load that are not glibc's) into DEST, relocatable, with DEST/mpirun a
# wrapper that points Open MPI and PMIx there. The GPU machines lent to this project carry CUDA
# and PyTorch but no mpirun; with this, the NCCL tests run there under mpirun with more than one
# rank. Plugins that need InfiniBand, UCX, libfabric or PSM are left out (Debian's own settings
# turn most of them off, and those machines have no such network); the shared-memory and TCP
# transports remain. DEST is replaced, and only once the copy is whole.
# Usage: deploy/gpu/bundle_mpi.sh DEST
# Then: DEST/mpirun -np 2 PROGRAM   (as root: --allow-run-as-root, or the OMPI_ALLOW_* variables)
set -euo pipefail
dest=${1:?usage: bundle_mpi.sh DEST}
orterun=$(command -v orterun || command -v mpirun.openmpi) \
  || { echo "bundle_mpi.sh: no Open MPI mpirun (orterun) here" >&2; exit 2; }
orterun=$(readlink -f "$orterun")
# Where this build of Open MPI keeps its plugins and help texts, as it reports them.
info=$(ompi_info --path all --parsable)
# (awk reads everything: a reader that stops early would fail the pipe under pipefail.)
field() { awk -v key="path:$1:" 'index($0, key) == 1 && !found {print substr($0, length(key) + 1); found = 1}' <<< "$info"; }
prefix=$(field prefix) pkglibdir=$(field pkglibdir) pkgdatadir=$(field pkgdatadir)
sysconfdir=$(field sysconfdir)
[[ -n $prefix && -d $pkglibdir && -d $pkgdatadir ]] \
  || { echo "bundle_mpi.sh: ompi_info did not give the plugin and help folders" >&2; exit 2; }
[[ $pkglibdir == "$prefix"/* && $pkgdatadir == "$prefix"/* ]] \
  || { echo "bundle_mpi.sh: $pkglibdir or $pkgdatadir is outside $prefix (cannot relocate)" >&2; exit 2; }
# PMIx: the folder that holds libpmix and its plugin folder (Debian: .../pmix2/lib/pmix).
pmix_lib=$(ldconfig -p | awk '/libpmix\.so\.2 / && !found {print $NF; found = 1}')
[[ -n $pmix_lib ]] && pmix_lib=$(readlink -f "$pmix_lib")
[[ -f $pmix_lib ]] || { echo "bundle_mpi.sh: libpmix.so.2 not found" >&2; exit 2; }
pmix_prefix=$(dirname "$(dirname "$pmix_lib")")

# Built beside DEST, then moved into place.
mkdir -p "$(dirname "$dest")"
stage=$(mktemp -d "$dest.partial.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/etc" "$stage/pmix/lib"
cp "$orterun" "$stage/bin/orterun"
orted=$(dirname "$orterun")/orted
[[ -x $orted ]] && cp "$orted" "$stage/bin/orted"
plugins=$stage/${pkglibdir#"$prefix"/}
mkdir -p "$plugins"
# (OpenSHMEM's plugins go too: Loom does not use it, and it links UCX.)
skip='libucp|libuct|libucs|libucm|libfabric|libibverbs|librdmacm|libpsm|libinfinipath|libefa|liboshmem'
for p in "$pkglibdir"/*.so; do
  # (ldd's whole output first: grep -q stopping early would fail the pipe under pipefail.)
  deps=$(ldd "$p" 2>/dev/null || true)
  grep -Eq "$skip" <<< "$deps" && continue
  cp "$p" "$plugins/"
done
mkdir -p "$stage/${pkgdatadir#"$prefix"/}"
cp -r "$pkgdatadir"/. "$stage/${pkgdatadir#"$prefix"/}/"
[[ -f $sysconfdir/openmpi-mca-params.conf ]] && cp "$sysconfdir/openmpi-mca-params.conf" "$stage/etc/"
touch "$stage/etc/openmpi-mca-params.conf"
if [[ -d $pmix_prefix/lib/pmix ]]; then cp -r "$pmix_prefix/lib/pmix" "$stage/pmix/lib/"; fi
if [[ -d $pmix_prefix/share ]]; then cp -r "$pmix_prefix/share" "$stage/pmix/"; fi
# The MPI libraries of the programs it starts (Loom's link the C++ bindings' too), by the names
# they are asked for; every library the programs and plugins load that is not glibc's (libpmix
# among them).
libdir=$(field libdir)
for l in libmpi libmpi_cxx; do
  real=$(readlink -f "$libdir/$l.so") || continue
  [[ -f $real ]] && cp "$real" "$stage/lib/$(objdump -p "$real" | awk '$1 == "SONAME" {print $2}')"
done
printf '%s\n' "$stage"/bin/* "$plugins"/*.so "$stage"/pmix/lib/pmix/*.so \
  | "$(dirname "$0")/copy_libs.sh" "$stage/lib"
[[ -f $stage/lib/libpmix.so.2 ]] || cp -L "$pmix_lib" "$stage/lib/libpmix.so.2"
cat > "$stage/mpirun" <<'WRAP'
#!/usr/bin/env bash
# Open MPI's mpirun from this folder (deploy/gpu/bundle_mpi.sh): plugins, help texts, PMIx and
# libraries are read from here, and the ranks it starts inherit the same settings. Ranks start on
# this machine only, without ssh or rsh (which Open MPI otherwise looks for, even for one node,
# and which the GPU machines lack).
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_MCA_plm=${OMPI_MCA_plm:-isolated}
# Shared memory without CMA's single copy (process_vm_readv), which container runtimes often
# forbid: the ranks exchange only a few small set-up messages through MPI.
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export OPAL_PREFIX=$here PMIX_PREFIX=$here/pmix
export PMIX_PKGLIBDIR=$here/pmix/lib/pmix PMIX_PKGDATADIR=$here/pmix/share/pmix
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_MCA_mca_base_param_files=$here/etc/openmpi-mca-params.conf
exec "$here/bin/orterun" "$@"
WRAP
chmod +x "$stage/mpirun"
chmod 755 "$stage"
rm -rf "$dest"
mv "$stage" "$dest"
echo "bundle_mpi.sh: Open MPI runtime in $dest ($(du -sh "$dest" | cut -f1))"
