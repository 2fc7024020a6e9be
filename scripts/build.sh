#!/usr/bin/env bash
# Configures (once) and builds cc into BUILD (default: build). Arguments go
# to `meson setup`, after -Dunity_parts=true: a folder configured here is built
# once rather than edited, so unity units (meson.build) save their CPU. BUILD_TARGETS, when set, names the targets to build
# (meson target names, e.g. "cc cc-run allreduce"); else everything is.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dunity_parts=true ${CUDA_HOME:+-Dcudatoolkit=$CUDA_HOME} "$@"
fi
if [ -z "${BUILD_TARGETS:-}" ]; then
  ninja -C "$build"
  exit 0
fi
# Each named target's files, as ninja knows them (relative to the build folder).
mapfile -t outputs < <(meson introspect "$build" --targets | python3 -c '
import json, os, sys
build, wanted = os.path.abspath(sys.argv[1]), sys.argv[2].split()
targets = json.load(sys.stdin)
missing = [w for w in wanted if not any(t["name"] == w for t in targets)]
if missing:
    sys.exit("build.sh: no target named %s in %s" % (", ".join(missing), build))
for t in targets:
    if t["name"] in wanted:
        for f in t["filename"]:
            print(os.path.relpath(f, build))
' "$build" "$BUILD_TARGETS")
ninja -C "$build" "${outputs[@]}"
