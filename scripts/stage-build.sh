#!/usr/bin/env bash
# Copies the run-time parts of a build folder (libcc, tools, gpu tests,
# examples) into DEST with the same layout, so their $ORIGIN run paths still
# resolve: a small folder to carry to a GPU machine, without debug information.
# With ip and nft here, DEST/netns-tools holds copies of them with their
# libraries (scripts/netns-tools.sh) for gpu-suite.sh's namespace steps.
#   scripts/stage-build.sh BUILD DEST
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD DEST" >&2; exit 2; }
build=$1
rm -rf "$2"
mkdir -p "$2"
dest=$(cd "$2" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$build"
find lib tools tests/gpu examples rendezvous -maxdepth 1 \( -name 'libcc.so*' -o -type f -perm -u+x \) \
  ! -type d ! -name '*.a' 2>/dev/null | while read -r f; do
  mkdir -p "$dest/$(dirname "$f")"
  cp -a "$f" "$dest/$f"
done
# The generated header, for what builds against cc there (cc.torch's extension).
mkdir -p "$dest/include/cc"
cp -a include/cc/cc_version.h "$dest/include/cc/"
if command -v ip >/dev/null && command -v nft >/dev/null; then
  "$src/scripts/netns-tools.sh" "$dest/netns-tools"
else
  echo "stage-build: no ip or nft here: gpu-suite.sh's namespace steps will be left out there"
fi
# Debug information stays behind: the copy travels (symbols are kept).
find "$dest" -type f \( -perm -u+x -o -name 'libcc.so*' \) -exec strip --strip-debug {} + 2>/dev/null || true
# STAGE_ETCD=1: etcd and the libraries libcc-etcd.so needs beyond glibc,
# OpenSSL and zlib (cpp-httplib, brotli), for tests/gpu/gpu_etcd.sh on a
# machine that has none of them.
if [ "${STAGE_ETCD:-0}" = 1 ] && [ -f "$dest/lib/libcc-etcd.so" ]; then
  mkdir -p "$dest/etcd-tools/lib"
  cp -aL "$(command -v etcd)" "$dest/etcd-tools/etcd"
  ldd "$dest/lib/libcc-etcd.so" | awk '/httplib|brotli/ { print $3 }' | while read -r so; do
    cp -aL "$so" "$dest/etcd-tools/lib/"
  done
fi
du -sh "$dest"
