#!/usr/bin/env bash
# Configures (once) and builds cc into BUILD (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" ${CUDA_HOME:+-Dcudatoolkit=$CUDA_HOME} "$@"
fi
ninja -C "$build"
