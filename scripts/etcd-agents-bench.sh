#!/usr/bin/env bash
# The join of N nodes x 8 ranks through node agents, on cc's server as
# cc-run hosts it and on a cc-rendezvous --etcd daemon elected in a 3-member
# etcd on loopback (every node first asking etcd where the leader is),
# alternating, RUNS times each, in one run so both see the same machine.
# Prints each run's figures and etcd's CPU over the etcd runs.
#   scripts/etcd-agents-bench.sh BUILD [NODES] [RUNS]
set -euo pipefail
build=${1:?usage: etcd-agents-bench.sh BUILD [NODES] [RUNS]}
nodes=${2:-2048}
runs=${3:-3}
bench=$build/tools/cc-rendezvous-bench
command -v etcd >/dev/null || { echo "etcd-agents-bench: no etcd program"; exit 77; }
dir=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -a client peer
for i in 1 2 3; do client[$i]=$(port); peer[$i]=$(port); done
cluster="m1=http://127.0.0.1:${peer[1]},m2=http://127.0.0.1:${peer[2]},m3=http://127.0.0.1:${peer[3]}"
for i in 1 2 3; do
  etcd --name m$i --data-dir "$dir/m$i" --log-level error \
    --listen-client-urls http://127.0.0.1:${client[$i]} --advertise-client-urls http://127.0.0.1:${client[$i]} \
    --listen-peer-urls http://127.0.0.1:${peer[$i]} --initial-advertise-peer-urls http://127.0.0.1:${peer[$i]} \
    --initial-cluster "$cluster" --initial-cluster-state new >"$dir/m$i.log" 2>&1 &
  pids+=($!)
done
url="etcd://127.0.0.1:${client[1]},127.0.0.1:${client[2]},127.0.0.1:${client[3]}"
for _ in $(seq 100); do
  ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:${client[1]}" endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
cpu() { local t=0; for p in "${pids[@]}"; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo "$t"; }
tck=$(getconf CLK_TCK)
for r in $(seq "$runs"); do
  echo "== run $r: cc's server"
  "$bench" --agents "$nodes" | grep -E "join|nodes x|server:"
  echo "== run $r: elected in etcd"
  before=$(cpu)
  "$bench" --agents "$nodes" --etcd "$url" | grep -E "locate|join|nodes x|server:"
  after=$(cpu)
  echo "  etcd (3 members): CPU $(python3 -c "print(f'{($after-$before)/$tck:.2f}')") s over the whole run"
done
