#!/usr/bin/env bash
# Installs what building cc needs and is missing (scripts/install-deps.sh
# build: no test tools), builds what it runs (libcc, cc-run and the all-reduce
# example; scripts/test.sh installs and builds the rest), and runs the example
# on every GPU of this machine through cc-run. Without GPUs it says so and
# stops.
# A build folder it configures has cc's kernels compiled for this machine's
# GPUs only (-Dkernel_archs=native): each architecture is minutes of device
# compile on a small machine. On a machine without GPUs it leaves them out
# (nothing could run them), and scripts/test.sh, going on in the same folder,
# turns them back on with its default architectures, Ampere and Hopper.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh build || exit 1
build=${BUILD:-build}
ngpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
setup=(-Dkernel_archs=native)
without_kernels=0
fresh=0
[ -f "$build/build.ninja" ] || fresh=1
if [ "$ngpus" -eq 0 ] && [ "$fresh" = 1 ]; then
  setup=(-Dfast_kernels=disabled)
  without_kernels=1
fi
BUILD_TARGETS="cc cc-run allreduce" scripts/build.sh "${setup[@]}"
built=$?
# scripts/test.sh configures a folder set up here again, once the test
# packages (Catch2, cmake, mpirun) are there to be found.
if [ "$fresh" = 1 ] && [ -f "$build/build.ninja" ]; then
  touch "$build/.demo-setup"
  [ "$without_kernels" = 1 ] && touch "$build/.demo-without-kernels"
fi
[ "$built" -eq 0 ] || exit 1
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
if [ "$ngpus" -eq 0 ]; then
  echo "demo: no NVIDIA GPU on this machine (nvidia-smi finds none): cc is built in $build/,"
  echo "      but there is nothing to run the collectives on. Run the tests with scripts/test.sh."
  exit 0
fi
echo "demo: $ngpus GPU(s): cc-run -n $ngpus -- examples/allreduce"
"$build/tools/cc-run" -n "$ngpus" -- "$build/examples/allreduce"
