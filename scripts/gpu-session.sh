#!/usr/bin/env bash
# Everything a GPU machine run needs, in one command, from a build staged
# elsewhere (scripts/stage-build.sh): the gpu suite with the system's NCCL and
# with the NCCL of the machine's torch wheel, the python suite, and (when
# asked) the benchmarks. Each part's logs go to LOGS/<part>/ (default
# /tmp/gpu-session-logs); a summary line per part is printed, and all logs
# are packed into OUT/gpu-logs.tar.gz, the one file left in OUT (a GPU
# machine lent by the hour may hand back only a few files).
#
#   scripts/gpu-session.sh BUILD OUT [PART...]
#
# PARTS (default: suite-system suite-torch python):
#   suite-system   scripts/gpu-suite.sh against the system's libnccl
#   suite-torch    the same against the NCCL that torch's wheel carries
#   one-gpu        the gpu suite's steps that need only one GPU (both NCCLs)
#   python         tests/python/gpu/run.sh (cc.Comm and the torch backend)
#   bench-system   scripts/bench-gpu.sh against the system's libnccl
#   bench-torch    the same against torch's NCCL
#   failure-bench  scripts/failure-bench.sh against torch's NCCL
#   recovery       tests/gpu/gpu_recovery.sh, every scenario, system NCCL
#   recovery-bench scripts/recovery-bench.sh (shrink and regrow times), system NCCL
#   quick-system   cc-bench --raw, all-reduce 8 B to 512 MiB, system NCCL
#   quick-torch    the same against torch's NCCL
#   python-figures scripts/python-figures.sh (torch "cc" against "nccl")
# The last line is "gpu session: N passed, N failed" over the parts run.
set -u
[ $# -ge 2 ] || { echo "usage: $0 BUILD OUT [PART...]" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && OUT=$(cd "$2" && pwd) || exit 2
shift 2
LOGS=${LOGS:-/tmp/gpu-session-logs}
rm -rf "$LOGS" && mkdir -p "$LOGS"
PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(suite-system suite-torch python)
SRC=$(cd "$(dirname "$0")/.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PYTHON=${PYTHON:-python3}

# The folder of the libnccl.so.2 that torch's wheel carries (empty if none).
TORCH_NCCL=$("$PYTHON" -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)
echo "torch's NCCL: ${TORCH_NCCL:-none}"
nvidia-smi -L 2>&1 | head -4

passed=0
failed=0
summary=()
part() {  # NAME CMD...: runs one part, keeps its last line
  local name=$1
  shift
  mkdir -p "$LOGS/$name"
  local start=$SECONDS
  "$@" >"$LOGS/$name/stdout.log" 2>&1
  local rc=$?
  local last
  last=$(grep -E ' passed, [0-9]+ failed' "$LOGS/$name/stdout.log" | tail -1)
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  summary+=("$name: exit $rc in $((SECONDS - start)) s; ${last:-no summary line}")
  echo "${summary[-1]}"
}
with_torch_nccl() { LD_LIBRARY_PATH=$TORCH_NCCL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_LIB_DIR=$TORCH_NCCL "$@"; }

# cc's all-reduce next to raw NCCL in the same processes, eager, 8 B to 512 MiB.
quick_bench() {
  timeout --kill-after=10 120 "$BUILD/tools/cc-run" -n 2 --timeout-ms 60000 -- \
    "$BUILD/tools/cc-bench" -C allreduce -b 8 -e 512M -f 4 --raw && echo "quick bench: 1 passed, 0 failed"
}
export -f quick_bench
export BUILD

for p in "${PARTS[@]}"; do
  case $p in
    suite-system) part "$p" "$SRC/scripts/gpu-suite.sh" "$BUILD" "$LOGS/$p/logs" ;;
    suite-torch) part "$p" with_torch_nccl "$SRC/scripts/gpu-suite.sh" "$BUILD" "$LOGS/$p/logs" ;;
    one-gpu) part "$p" env GPU_SUITE_ONE_GPU=1 "$SRC/scripts/gpu-suite.sh" "$BUILD" "$LOGS/$p/logs" ;;
    python) part "$p" env PYTHON="$PYTHON" "$SRC/tests/python/gpu/run.sh" "$BUILD" "$LOGS/$p/logs" ;;
    bench-system) part "$p" "$SRC/scripts/bench-gpu.sh" "$BUILD" "$LOGS/$p/bench" ;;
    bench-torch) part "$p" with_torch_nccl "$SRC/scripts/bench-gpu.sh" "$BUILD" "$LOGS/$p/bench" ;;
    failure-bench) part "$p" with_torch_nccl "$SRC/scripts/failure-bench.sh" "$BUILD" "$LOGS/$p/bench" ;;
    recovery) part "$p" bash "$SRC/tests/gpu/gpu_recovery.sh" "$BUILD" ;;
    recovery-bench) part "$p" "$SRC/scripts/recovery-bench.sh" "$BUILD" "$LOGS/$p/bench" ;;
    quick-system) part "$p" quick_bench ;;
    quick-torch) part "$p" with_torch_nccl quick_bench ;;
    python-figures) part "$p" env PYTHON="$PYTHON" "$SRC/scripts/python-figures.sh" "$BUILD" "$LOGS/$p/figures" ;;
    *) echo "gpu-session: unknown part '$p'" >&2; failed=$((failed + 1)) ;;
  esac
done

tar czf "$OUT/gpu-logs.tar.gz" -C "$LOGS" . 2>/dev/null
printf '%s\n' "${summary[@]}"
echo "gpu session: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
