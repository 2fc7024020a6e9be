#!/usr/bin/env bash
# Copies iproute2's `ip` and nftables' `nft`, with the libraries they load
# (all but the C library's own and the loader), into DIR/bin and DIR/lib, for
# a machine that has neither (the GPU machine: its namespace steps of
# scripts/gpu-suite.sh). gpu-suite.sh uses BUILD/netns-tools when it exists,
# or NETNS_TOOLS=DIR.
#
#   scripts/netns-tools.sh DIR        (e.g. build/netns-tools)
set -euo pipefail
DIR=${1:?usage: netns-tools.sh DIR}
mkdir -p "$DIR/bin" "$DIR/lib"
for tool in ip nft; do
  path=$(command -v "$tool" || true)
  [ -n "$path" ] || { echo "netns-tools: no '$tool' here (install iproute2 and nftables)"; exit 1; }
  cp -L "$path" "$DIR/bin/$tool"
  ldd "$path" | awk '/=> \// {print $3}' | while read -r lib; do
    case $(basename "$lib") in
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) continue ;;
    esac
    cp -L "$lib" "$DIR/lib/"
  done
done
LD_LIBRARY_PATH="$DIR/lib" "$DIR/bin/ip" -V >/dev/null
LD_LIBRARY_PATH="$DIR/lib" "$DIR/bin/nft" -v >/dev/null
echo "netns-tools: ip and nft in $DIR/bin, their libraries in $DIR/lib ($(ls "$DIR/lib" | wc -l) files)"
