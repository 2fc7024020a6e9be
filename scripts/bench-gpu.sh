#!/usr/bin/env bash
# Runs cc-bench on a GPU machine (2 GPUs of one host by default) for
# docs/PERFORMANCE.md: every collective next to raw NCCL, cc_mem_alloc
# buffers and CUDA graphs; then the all-reduce again (eager and graphs)
# with a second NCCL, that of the machine's PyTorch wheel when there is one
# (or NCCL_ALT_LIB_DIR), so the page has both. Each run is bounded by
# `timeout`; the whole script stays under about 8 minutes.
#   usage: scripts/bench-gpu.sh BUILD_DIR OUT_DIR [RANKS]
#   BENCH_STEPS="allreduce allreduce-graph ..." runs only those steps;
#   BENCH_MAX=64M ends the sweeps there (default 512M).
# Then, on any machine: scripts/perf-report.py OUT_DIR
set -uo pipefail

build=${1:?usage: scripts/bench-gpu.sh BUILD_DIR OUT_DIR [RANKS]}
out=${2:?usage: scripts/bench-gpu.sh BUILD_DIR OUT_DIR [RANKS]}
ranks=${3:-2}
bench="$build/tools/cc-bench"
run="$build/tools/cc-run"
for exe in "$bench" "$run"; do
  [ -x "$exe" ] || { echo "bench-gpu.sh: $exe is missing; build first (ninja -C $build)" >&2; exit 2; }
done
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0   # NVLink SHARP off: the GPU hosts we measure on need it

end=$((SECONDS + ${BENCH_SECONDS:-480}))
failed=0
max=${BENCH_MAX:-512M}

# wanted NAME: whether BENCH_STEPS (when set) names the step.
wanted() { [ -z "${BENCH_STEPS:-}" ] || [[ " $BENCH_STEPS " == *" $1 "* ]]; }

# step NAME LIMIT_S CC-BENCH-ARGS...: one cc-bench run under cc-run, its
# table in NAME.txt and its reports in NAME.{json,csv,svg}.
step() {
  local name=$1 limit=$2
  shift 2
  wanted "$name" || return 0
  local left=$((end - SECONDS))
  if [ "$left" -lt 20 ]; then
    echo "== $name: skipped, the time budget is spent" | tee "$out/$name.txt"
    failed=1
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (at most ${limit} s)"
  timeout --kill-after=10 "$limit" "$run" -n "$ranks" --timeout-ms 60000 -- \
    "$bench" "$@" --json "$out/$name.json" --csv "$out/$name.csv" --plot "$out/$name.svg" \
    2>&1 | tee "$out/$name.txt"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "!! $name failed (exit $rc)" | tee -a "$out/$name.txt"
    failed=1
  fi
}

# by_hand NAME LIMIT_S CC-BENCH-ARGS...: the ranks started by hand with the
# environment two Docker hosts would set (rank 0 hosts the embedded
# rendezvous server), so cc_comm_init is timed the way the goal says.
by_hand() {
  local name=$1 limit=$2
  shift 2
  wanted "$name" || return 0
  local left=$((end - SECONDS))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 20 ]; then
    echo "== $name: skipped, the time budget is spent" | tee "$out/$name.txt"
    failed=1
    return
  fi
  echo "== $name (at most ${limit} s, ranks started by hand)"
  local port=$((20000 + RANDOM % 20000)) pids=() r rc=0
  for ((r = 0; r < ranks; r++)); do
    env -u CC_RENDEZVOUS RANK=$r WORLD_SIZE=$ranks LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port timeout --kill-after=10 "$limit" "$bench" "$@" \
      --json "$out/$name.json" --csv "$out/$name.csv" --plot "$out/$name.svg" \
      > "$out/$name.rank$r.txt" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  cat "$out/$name.rank0.txt"
  if [ "$rc" -ne 0 ]; then
    echo "!! $name failed (exit $rc); see $out/$name.rank*.txt" | tee -a "$out/$name.txt"
    failed=1
  fi
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  nvidia-smi topo -m 2>/dev/null
} > "$out/machine.txt"

by_hand init-embedded     60 -C allreduce -b 8 -e 1M -f 4 -n 20 -w 5 --raw
sweep=(-b 8 -e "$max" -f 2 -n 50 -w 10 --small-iters 1000 --raw)
step allreduce            75 -C allreduce "${sweep[@]}"
step allreduce-mem-cc     75 -C allreduce "${sweep[@]}" --mem cc --reg local
step allreduce-mem-window 75 -C allreduce "${sweep[@]}" --mem cc --reg window
step allreduce-graph      75 -C allreduce "${sweep[@]}" -G 10
others=(-b 8 -e 256M -f 2 -n 50 -w 10 --small-iters 500 --raw)
for coll in allgather reducescatter broadcast reduce alltoall sendrecv; do
  step "$coll" 45 -C "$coll" "${others[@]}"
done

# The same all-reduce sweeps with the other NCCL (cc's kernels do not depend
# on which one): the PyTorch wheel's unless NCCL_ALT_LIB_DIR names a folder.
alt=${NCCL_ALT_LIB_DIR:-$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)}
if [ -n "$alt" ] && [ -e "$alt/libnccl.so.2" ]; then
  echo "== the other NCCL: $alt"
  LD_LIBRARY_PATH=$alt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} step allreduce-alt 75 -C allreduce "${sweep[@]}"
  LD_LIBRARY_PATH=$alt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} step allreduce-graph-alt 75 -C allreduce "${sweep[@]}" -G 10
else
  echo "== no second NCCL (no PyTorch wheel's, NCCL_ALT_LIB_DIR unset): the -alt steps are left out"
fi

# How many channels (one SM each) NCCL's all-reduce may use here.
if wanted nccl-channels; then
  NCCL_DEBUG=INFO timeout 60 "$run" -n "$ranks" --timeout-ms 60000 -- "$bench" -C allreduce \
    -b 1M -e 1M -n 5 -w 1 --raw 2>&1 | grep -E "coll channels|NCCL version" | sort -u \
    > "$out/nccl-channels.txt" || true
  cat "$out/nccl-channels.txt"
fi

echo "bench-gpu.sh: results in $out ($((SECONDS)) s)"
exit "$failed"
