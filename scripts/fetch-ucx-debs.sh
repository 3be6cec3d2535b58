#!/usr/bin/env bash
# Carries Debian 12's UCX runtime to a machine that has none (e.g. an Ubuntu 24.04 GPU host), so a shoal
# built here against libucx-dev runs there. Run it HERE (Debian, apt configured), not on the target:
#
#   bash scripts/fetch-ucx-debs.sh <folder>
#
# It downloads the .debs with `apt-get download` (no root, nothing installed) and unpacks them with
# `dpkg-deb -x` into <folder>, then prints the environment to use on the target, also written to
# <folder>/env.sh (source it there, after copying <folder> to the same path or fixing UCX_ROOT in it).
#
# What it takes: libucx0 (libucp, libuct, libucs, libucm and the transport modules in lib/ucx/),
# libucx-dev (headers and pkg-config files, to build shoal there: pass <folder>/core/usr in
# CMAKE_PREFIX_PATH; the .pc files are rewritten to point inside <folder>) and libnuma1, which libucs
# needs and a minimal Ubuntu lacks. The InfiniBand module (libuct_ib) also needs
# rdma-core's libibverbs1, librdmacm1, ibverbs-providers and libnl-3; those go into a separate folder
# that env.sh adds only when the target has no libibverbs of its own, because a host with a NIC should
# keep its own verbs stack and providers. Without verbs UCX skips that module (TCP and shared memory
# still work). UCX looks for its modules next to libucs (lib/ucx/); env.sh sets UCX_MODULE_DIR anyway.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 <folder to unpack UCX into>" >&2
  exit 2
fi
dest=$(realpath -m "$1")
core=(libucx0 libucx-dev libnuma1)
verbs=(libibverbs1 librdmacm1 ibverbs-providers libnl-3-200 libnl-route-3-200)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/core" "$work/verbs"
chmod 755 "$work" "$work/core" "$work/verbs"  # apt downloads as its own _apt user when it can
(cd "$work/core" && apt-get download "${core[@]}")
(cd "$work/verbs" && apt-get download "${verbs[@]}")

mkdir -p "$dest/core" "$dest/verbs"
for deb in "$work"/core/*.deb; do dpkg-deb -x "$deb" "$dest/core"; done
for deb in "$work"/verbs/*.deb; do dpkg-deb -x "$deb" "$dest/verbs"; done

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
lib=$dest/core/usr/lib/$multiarch
rm -f "$lib"/*.a  # static archives: not needed to build or run shoal
# The .pc files say prefix=/usr; make them relative to where they lie, wherever the folder is copied.
sed -i 's|^prefix *=.*|prefix = ${pcfiledir}/../../..|' "$lib"/pkgconfig/*.pc
# Some of these packages install into /lib, others into /usr/lib: the verbs set needs both.
verbs_libs=$dest/verbs/usr/lib/$multiarch:$dest/verbs/lib/$multiarch
if [[ ! -e $lib/libucp.so.0 || ! -e $lib/libnuma.so.1 || ! -d $lib/ucx ]]; then
  echo "fetch-ucx-debs: libucp.so.0, libnuma.so.1 or the UCX modules are missing under $lib" >&2
  exit 1
fi
version=$(dpkg-deb -f "$(ls "$work"/core/libucx0_*.deb)" Version)

cat >"$dest/env.sh" <<EOF
# Source on the target: Debian's UCX $version, unpacked by shoal's scripts/fetch-ucx-debs.sh.
UCX_ROOT=$dest
export LD_LIBRARY_PATH=\$UCX_ROOT/core/usr/lib/$multiarch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export UCX_MODULE_DIR=\$UCX_ROOT/core/usr/lib/$multiarch/ucx
# rdma-core only where the target has none (it then has no NIC provider either: UCX's ib module loads
# and finds no device).
if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libibverbs\.so\.1 '; then
  export LD_LIBRARY_PATH=\$LD_LIBRARY_PATH:\$UCX_ROOT/verbs/usr/lib/$multiarch:\$UCX_ROOT/verbs/lib/$multiarch
fi
EOF

echo "fetch-ucx-debs: UCX $version unpacked into $dest"
echo "On the target, after copying $dest to the same path (or editing UCX_ROOT in env.sh):"
echo "  source $dest/env.sh"
echo "or by hand:"
echo "  export LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
echo "  export UCX_MODULE_DIR=$lib/ucx"
echo "  and only where the target has no libibverbs.so.1: export LD_LIBRARY_PATH=\$LD_LIBRARY_PATH:$verbs_libs"
