#!/usr/bin/env bash
# torchrun for N ranks on a machine with fewer GPUs: N torchrun instances,
# each one node of N (--nnodes N --node-rank i --nproc-per-node 1), so that
# each rank is the only one of its host (LOCAL_RANK 0) and shares GPU 0 with
# the others; each instance is its own host to NCCL (NCCL_HOSTID), with
# NCCL's peer-to-peer and shared-memory paths off, so torch's own "nccl"
# backend works there as well as "cc" (CC_SHARE_GPU=1). Prints each node's
# output in node order once all have ended (also when stopped by a signal).
#   hosts_on_one_gpu.sh PYTHON N PORT ADDR SCRIPT [ARG...]
set -u
python=$1 n=$2 port=$3 addr=$4
shift 4
tmp=$(mktemp -d)
pids=()
show() {
  local i
  for ((i = 0; i < n; i++)); do [ -f "$tmp/node$i" ] && cat "$tmp/node$i"; done
  rm -rf "$tmp"
}
stopped() {
  kill -TERM "${pids[@]}" 2>/dev/null
  wait
  show
  exit 143
}
trap stopped TERM INT
for ((i = 0; i < n; i++)); do
  env CC_SHARE_GPU=1 NCCL_HOSTID="${HOSTNAME:-host}-node$i" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
    "$python" -m torch.distributed.run --nnodes "$n" --node-rank "$i" --nproc-per-node 1 \
    --master-addr "$addr" --master-port "$port" "$@" >"$tmp/node$i" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
show
exit $rc
