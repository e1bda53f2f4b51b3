#!/usr/bin/env bash
# The peers of bench/run.sh --with and bench/instructions.sh --with, built from source as a site
# would build them: IPM (without PAPI), mpiP (its default stack walk with libunwind and binutils'
# BFD for source lines; "mpiP -k0" is the same library run with MPIP="-k 0") and DLB with its
# TALP module. One build per MPI family: Open MPI (Debian's mpicc), and MPICH (mpicc.mpich) when
# installed, each into PREFIX/FAMILY/{ipm,mpip,dlb}. PREFIX/VERSIONS records what was built: each
# source's commit, the MPI, the compiler and the options. The benches' --with for them:
# bench/README.md, "Peers".
#
#   bench/peers.sh SRC_ROOT PREFIX [openmpi|mpich|ipm|mpip|dlb]...
#
# SRC_ROOT holds the three sources as ipm/, mpip/ and dlb/: git repositories (bare or not: their
# committed HEAD is built, and its id recorded) or plain trees (copied). The words after PREFIX
# choose MPI families and peers (default: all three peers for both families, MPICH when
# mpicc.mpich exists); a build replaces that peer's earlier one. Each is built in a scratch copy;
# the sources are not touched, and a library that does not link the family's MPI stops the script. Needs a C and Fortran compiler, autoconf, automake, libtool,
# binutils-dev and libunwind-dev (Debian names); MAKEFLAGS passes through (e.g. -j2).
set -euo pipefail
shopt -s inherit_errexit

usage() { echo "usage: $0 SRC_ROOT PREFIX [openmpi|mpich|ipm|mpip|dlb]..." >&2; exit 2; }
(($# >= 2)) || usage
src_root=$(realpath "$1") prefix=$2
shift 2
families=() peers=()
for word in "$@"; do
    case $word in
        openmpi | mpich) families+=("$word") ;;
        ipm | mpip | dlb) peers+=("$word") ;;
        *) usage ;;
    esac
done
if ((${#families[@]} == 0)); then
    families=(openmpi)
    command -v mpicc.mpich >/dev/null && families+=(mpich)
fi
((${#peers[@]})) || peers=(ipm mpip dlb)
for peer in "${peers[@]}"; do [[ -d $src_root/$peer ]] || { echo "$0: no $src_root/$peer" >&2; exit 2; }; done
mkdir -p "$prefix"
prefix=$(realpath "$prefix")

work=$(mktemp -d "${TMPDIR:-/tmp}/mpistat-peers.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The version of a source tree: its commit and the nearest tag, or that it is a plain tree.
version_of() { # DIR
    local git=(git -C "$1")
    git --git-dir="$1" rev-parse -q --verify HEAD >/dev/null 2>&1 && git=(git --git-dir="$1")
    if "${git[@]}" rev-parse -q --verify HEAD >/dev/null 2>&1; then
        echo "commit $("${git[@]}" rev-parse HEAD) ($("${git[@]}" describe --tags --always 2>/dev/null))"
    else
        echo "plain tree (no git)"
    fi
}
# A scratch copy of a source tree: DIR DESTINATION (its committed HEAD for a git repository).
copy_source() {
    local git=(git -C "$1")
    git --git-dir="$1" rev-parse -q --verify HEAD >/dev/null 2>&1 && git=(git --git-dir="$1")
    mkdir -p "$2"
    if "${git[@]}" rev-parse -q --verify HEAD >/dev/null 2>&1; then
        "${git[@]}" archive HEAD | tar -x -C "$2"
    else
        cp -a "$1/." "$2"
    fi
}

# One peer for one family: PEER FAMILY LIBRARY CONFIGURE-OPTION...; the log stays in PREFIX. A
# peer that fails is removed and noted in $failed, and the others are built.
failed=()
build() {
    local peer=$1 family=$2 library=$3 tree=$work/$2/$1 log=$prefix/$2/$1.build.log
    shift 3
    [[ " ${peers[*]} " == *" $peer "* ]] || return 0
    local options=("$@" --prefix="$prefix/$family/$peer")
    rm -rf "${prefix:?}/$family/$peer" "$prefix/$family/$peer.version"
    mkdir -p "$prefix/$family"
    copy_source "$src_root/$peer" "$tree"
    echo "peers: building $peer for $family (log: $log)"
    if ! (
        cd "$tree"
        # mpiP's wrapper generator writes the builder's name into its headers.
        export LOGNAME=${LOGNAME:-$(id -un)}
        if [[ -x bootstrap.sh ]]; then ./bootstrap.sh; elif [[ -x bootstrap ]]; then ./bootstrap; fi
        ./configure "${options[@]}"
        make
        make install
    ) >"$log" 2>&1; then
        echo "$0: $peer for $family failed; the end of its log:" >&2
        tail -n 30 "$log" >&2
        failed+=("$peer for $family")
        rm -rf "${prefix:?}/$family/$peer"
        return
    fi
    # A configure that finds the other MPI's compiler on its own builds for that MPI.
    local linked
    linked=$(ldd "$prefix/$family/$peer/lib/$library" | grep -Eo 'lib(mpi|mpich)\.so' | sort -u | tr '\n' ' ')
    if [[ $linked != "$mpi_library " ]]; then
        echo "$0: $peer for $family: lib/$library links ${linked:-no MPI}, not $mpi_library" >&2
        failed+=("$peer for $family")
        rm -rf "${prefix:?}/$family/$peer"
        return
    fi
    {
        echo "$family $peer: $(version_of "$src_root/$peer"); $mpi; $($cc --version | head -n 1)"
        printf '  configure'
        printf ' %q' "${options[@]}"
        echo
    } >"$prefix/$family/$peer.version"
}

for family in "${families[@]}"; do
    # Absolute paths: DLB's configure takes a compiler by name only from its own list (mpicc),
    # and would find Open MPI's for an MPICH build.
    if [[ $family == openmpi ]]; then
        cc=$(command -v mpicc) f77=$(command -v mpif77) fc=$(command -v mpifort) mpiexec=$(command -v mpiexec)
        mpi=$(mpirun --version | head -n 1) mpi_library=libmpi.so
    else
        cc=$(command -v mpicc.mpich) f77=$(command -v mpif77.mpich) fc=$(command -v mpifort.mpich)
        mpiexec=$(command -v mpiexec.mpich)
        mpi=$(mpichversion | head -n 1 | tr -s " \t" " ") mpi_library=libmpich.so
    fi
    # IPM: the MPI module only (no PAPI, no POSIX I/O), C and Fortran wrappers (libipm.so,
    # libipmf.so). Its configure checks none of the compilers (AC_PROG_CC and AC_PROG_FC are
    # commented out), so libtool would compile without -fPIC and link with a bare -soname, and
    # autoconf's default -O2 would be missing: say they are GNU's, with autoconf's flags.
    build ipm "$family" libipm.so MPICC="$cc" MPIF77="$f77" MPIFC="$fc" GCC=yes G77=yes ac_cv_fc_compiler_gnu=yes \
        CFLAGS="-g -O2" FFLAGS="-g -O2" FCFLAGS="-g -O2" --enable-shared --disable-static
    # mpiP: its defaults (libunwind stack walk, BFD source lookup, all MPI-3 families wrapped).
    build mpip "$family" libmpiP.so --with-cc="$cc" --with-f77="$f77"
    # DLB: its defaults, which build TALP into libdlb_mpi.so (enabled at run time: DLB_ARGS=--talp).
    build dlb "$family" libdlb_mpi.so MPICC="$cc" MPIFC="$fc" MPIEXEC="$mpiexec" --with-mpi
done
cat "$prefix"/*/*.version >"$prefix/VERSIONS" 2>/dev/null || true
echo "peers: built into $prefix:"
cat "$prefix/VERSIONS"
if ((${#failed[@]})); then
    printf 'peers: not built: %s\n' "${failed[@]}" >&2
    exit 1
fi
