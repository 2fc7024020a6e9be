#!/usr/bin/env bash
# Installs what is missing, builds what it runs (libcc, cc-run and the
# all-reduce example; scripts/test.sh builds the rest), and runs the example on
# every GPU of this machine through cc-run. Without GPUs it says so and stops.
# A build folder it configures has cc's kernels compiled for this machine's
# GPUs only (-Dkernel_archs=native), or, on a machine without any, for Hopper
# alone (-Dkernel_archs=90): each architecture is minutes of device compile
# on a small machine. scripts/test.sh goes on in the same folder; one that
# test.sh or a plain meson setup configures has the default, Ampere and Hopper.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1
build=${BUILD:-build}
ngpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
setup=(-Dkernel_archs=90)
[ "$ngpus" -gt 0 ] && setup=(-Dkernel_archs=native)
BUILD_TARGETS="cc cc-run allreduce" scripts/build.sh "${setup[@]}" || exit 1
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
if [ "$ngpus" -eq 0 ]; then
  echo "demo: no NVIDIA GPU on this machine (nvidia-smi finds none): cc is built in $build/,"
  echo "      but there is nothing to run the collectives on. Run the tests with scripts/test.sh."
  exit 0
fi
echo "demo: $ngpus GPU(s): cc-run -n $ngpus -- examples/allreduce"
"$build/tools/cc-run" -n "$ngpus" -- "$build/examples/allreduce"
