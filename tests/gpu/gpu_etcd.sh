#!/usr/bin/env bash
# The full cc_comm_init on an etcd rendezvous, on a GPU machine: starts a
# one-member etcd on 127.0.0.1 (free ports, data in a temporary folder), runs
# examples/allreduce as two ranks by hand with MASTER_ADDR=etcd://..., and
# checks both print the all-reduced value; then the same with a rank missing
# (rank 1 never starts) and checks rank 0 names it at the deadline; then
# recovery on etcd with tests/gpu/gpu_recovery: rank 1 kills itself and
# rank 0 shrinks to one rank, or rank 1 is started again and rank 0 regrows
# with it (the all-reduces of the new communicator are checked).
#
#   tests/gpu/gpu_etcd.sh BUILD
#
# Exit 77 (skipped) with a message when there is no etcd program (etcd on
# PATH, or CC_ETCD_BIN) or when BUILD/lib/libcc-etcd.so cannot load (it needs
# libcpp-httplib: put a folder holding it on LD_LIBRARY_PATH, or stage the
# build with STAGE_ETCD=1). Last line:
# "gpu_etcd: all passed" when both checks pass.
set -u
[ $# -eq 1 ] || { echo "usage: $0 BUILD" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
EXAMPLE=$BUILD/examples/allreduce
PLUGIN=$BUILD/lib/libcc-etcd.so
# scripts/stage-build.sh with STAGE_ETCD=1 carries etcd and the plugin's
# libraries to machines that have neither (BUILD/etcd-tools).
if [ -d "$BUILD/etcd-tools" ]; then
  CC_ETCD_BIN=${CC_ETCD_BIN:-$BUILD/etcd-tools/etcd}
  export LD_LIBRARY_PATH=$BUILD/etcd-tools/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
ETCD=${CC_ETCD_BIN:-$(command -v etcd || true)}
if [ -z "$ETCD" ] || [ ! -x "$ETCD" ]; then
  echo "gpu_etcd: SKIP: no etcd program (install etcd-server, or set CC_ETCD_BIN)"
  exit 77
fi
if [ ! -x "$EXAMPLE" ] || [ ! -f "$PLUGIN" ]; then
  echo "gpu_etcd: SKIP: $EXAMPLE or $PLUGIN is missing"
  exit 77
fi
if ldd "$PLUGIN" | grep -q "not found"; then
  echo "gpu_etcd: SKIP: $PLUGIN cannot load here:"
  ldd "$PLUGIN" | grep "not found"
  exit 77
fi
export NCCL_NVLS_ENABLE=0

. "$(dirname "$0")/../common/etcd_member.sh"
DATA=$(mktemp -d /tmp/cc-gpu-etcd.XXXXXX)
start_etcd_member "$ETCD" "$DATA" "$DATA/etcd.log"
trap 'kill $ETCD_PID 2>/dev/null; wait $ETCD_PID 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$CLIENT/health" >/dev/null 2>&1 && break
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $CLIENT), 0.2)" 2>/dev/null && break
  sleep 0.1
done
export MASTER_ADDR=etcd://127.0.0.1:$CLIENT
echo "gpu_etcd: etcd $("$ETCD" --version | head -1) at $MASTER_ADDR"

failed=0
# Two ranks, one GPU each.
CC_JOB_ID=gpu-etcd-ok RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 timeout 120 "$EXAMPLE" >"$DATA/r1.log" 2>&1 &
other=$!
CC_JOB_ID=gpu-etcd-ok RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 timeout 120 "$EXAMPLE" >"$DATA/r0.log" 2>&1
rc0=$?
wait $other
rc1=$?
cat "$DATA/r0.log" "$DATA/r1.log"
n=$(cat "$DATA/r0.log" "$DATA/r1.log" | grep -c "after all-reduce: 3.0")
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ "$n" -eq 2 ]; then
  echo "gpu_etcd: allreduce over etcd: passed"
else
  echo "gpu_etcd: allreduce over etcd: FAILED (exit $rc0 and $rc1, $n of 2 results)"
  failed=1
fi

# Rank 1 never comes: rank 0 names it at the deadline.
CC_JOB_ID=gpu-etcd-missing CC_TIMEOUT_MS=5000 RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 \
  timeout 60 "$EXAMPLE" >"$DATA/m0.log" 2>&1
rc=$?
cat "$DATA/m0.log"
if [ $rc -ne 0 ] && grep -q "rank 1 of 2 never joined communicator 1 of job 'gpu-etcd-missing'" "$DATA/m0.log"; then
  echo "gpu_etcd: missing rank named: passed"
else
  echo "gpu_etcd: missing rank named: FAILED (exit $rc)"
  failed=1
fi
# Recovery on etcd: heartbeats every 200 ms, 5 missed (a 1 s lease).
RECOVERY=$BUILD/tests/gpu/gpu_recovery
recovery_on_etcd() {  # recovery_on_etcd shrink|regrow
  local mode=$1 job=gpu-etcd-$1
  for r in 0 1; do
    env CC_JOB_ID=$job RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r CC_HEARTBEAT_MS=200 CC_HEARTBEAT_MISSES=5 \
      CC_TIMEOUT_MS=60000 CC_LOG_LEVEL=info timeout 180 "$RECOVERY" "$mode" >"$DATA/$mode$r.log" 2>&1 &
    eval "pid$r=$!"
  done
  wait "$pid1"
  local rc1=$? rc1b=0
  if [ "$mode" = regrow ]; then  # rank 1 again, as cc-run --max-restarts would start it
    env CC_JOB_ID=$job RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 CC_HEARTBEAT_MS=200 CC_HEARTBEAT_MISSES=5 \
      CC_RESTART_COUNT=1 CC_TIMEOUT_MS=60000 timeout 180 "$RECOVERY" "$mode" >"$DATA/${mode}1b.log" 2>&1
    rc1b=$?
  fi
  wait "$pid0"
  local rc0=$?
  cat "$DATA/${mode}0.log" "$DATA/${mode}1.log"
  [ "$mode" = regrow ] && cat "$DATA/${mode}1b.log"
  local want="^RECOVERED generation=1 rank=0 size=1 failed=1$" ok=1
  [ "$mode" = regrow ] && want="^RECOVERED generation=1 rank=0 size=2 failed=1$"
  [ $rc0 -eq 0 ] && [ $rc1 -eq 137 ] && [ $rc1b -eq 0 ] || ok=0
  grep -q "$want" "$DATA/${mode}0.log" || ok=0
  [ "$mode" = regrow ] && { grep -q "^OK replacement: rank 1 of 2, generation 1" "$DATA/${mode}1b.log" || ok=0; }
  grep -o "by ncclCommShrink\|by a new NCCL communicator" "$DATA/${mode}0.log" | head -1 | sed 's/^/gpu_etcd: made /'
  if [ $ok -eq 1 ]; then
    echo "gpu_etcd: $mode on etcd: passed"
  else
    echo "gpu_etcd: $mode on etcd: FAILED (exit $rc0, $rc1, $rc1b)"
    failed=1
  fi
}
if [ -x "$RECOVERY" ]; then
  recovery_on_etcd shrink
  recovery_on_etcd regrow
else
  echo "gpu_etcd: recovery on etcd: FAILED ($RECOVERY is missing)"
  failed=1
fi
[ $failed -eq 0 ] && echo "gpu_etcd: all passed"
exit $failed
