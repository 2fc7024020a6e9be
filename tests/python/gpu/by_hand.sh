#!/usr/bin/env bash
# Starts two ranks of one seed example by hand, as on two Docker hosts: each
# with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and LOCAL_RANK, and its own
# NCCL host id with NCCL's peer-to-peer and shared-memory paths off, so NCCL
# talks over sockets as between hosts. With CC_SHARE_GPU=1 in the
# environment both ranks share GPU 0, each the only rank of its host
# (LOCAL_RANK 0). Prints rank 0's output, then rank 1's.
#   by_hand.sh PYTHON SEED_MODULE
set -u
python=$1 module=$2
here=$(cd "$(dirname "$0")" && pwd)
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
tmp=$(mktemp -d)
pids=()
for r in 0 1; do
  local_rank=$r
  [ "${CC_SHARE_GPU:-0}" = 1 ] && local_rank=0
  env RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" LOCAL_RANK=$local_rank \
    NCCL_HOSTID="cc-host-$r" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
    "$python" "$here/seed_entry.py" "$module" >"$tmp/rank$r" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
cat "$tmp/rank0" "$tmp/rank1"
rm -rf "$tmp"
exit $rc
