#!/bin/bash
# cc-run as its node's agent on etcd (rendezvous/etcd/node_agent*), with real
# rank processes (recovery_member: the library's join, watchdog and
# recovery, no GPU) and a one-member etcd on loopback that this script starts:
# 1. ranks join through the agent; one killed by a signal is named to the
#    others with its exit status at once (no lease wait), and they shrink;
# 2. a node's agent killed: the node's lease expires, and the others are
#    told its ranks failed together (one event, both ranks) with words
#    naming the node's agent; they shrink without both;
# 3. one job of agent ranks (node 0) and direct ranks (node 1, --no-agent):
#    an agent rank's death reaches the direct ones, named with its status.
# Usage: agent_ranks_etcd.sh PATH/TO/cc-run PATH/TO/recovery_member
# Skips (77) where no etcd program is found.
set -u
run=$1 member=$2
etcd_bin=$(command -v etcd) || { echo "SKIP: no etcd program"; exit 77; }
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 -- "-$p" "$p" 2>/dev/null; done
  pkill -9 -f "$member env" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
host=$(hostname)
. "$(dirname "$0")/../common/rank_output.sh"
client=$(free_port) peer=$(free_port)
"$etcd_bin" --name cc-test --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
  --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
  --initial-cluster "cc-test=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -s "http://127.0.0.1:$client/health" 2>/dev/null | grep -q true && break
  sleep 0.1
done
addr="etcd://127.0.0.1:$client"
export CC_LOG_LEVEL=error
# A 2 s heartbeat window: the node lease's TTL.
export CC_HEARTBEAT_MS=500 CC_HEARTBEAT_MISSES=4

# 1. One node of 4 ranks under the agent; rank 2 is killed with SIGKILL.
start=$(date +%s%N)
timeout 90 "$run" -n 4 --master-addr "$addr" --max-restarts 0 -- "$member" env --auto shrink --die-rank 2 \
  >"$dir/one.out" 2>&1
rc=$?
took=$((($(date +%s%N) - start) / 1000000))
[ $rc -eq 137 ] || fail "1: cc-run exited with $rc, want 137 (rank 2's signal)"
victim=$(sed -n 's/^cc-run: rank 2 (pid \([0-9]*\)) exited with.*/\1/p' "$dir/one.out")
[ -n "$victim" ] || fail "1: cc-run did not say rank 2 exited"
for r in 0 1 3; do
  expect "$dir/one.out" "^\[rank $r\] FAILED gen=0 rank 2 (host $host, pid $victim) failed: exited with signal 9 (killed)\. "
done
expect "$dir/one.out" "^\[rank 0\] RECOVERED gen=1 rank=0 size=3 members=0,1,3 failed=2 "
expect "$dir/one.out" "^\[rank 3\] RECOVERED gen=1 rank=2 size=3 members=0,1,3 failed=2 "
[ "$(grep -c '\] LEFT$' "$dir/one.out")" -eq 3 ] || fail "1: not every survivor left"
echo "1: death told and shrunk; the whole job took $took ms (the lease window is 2000 ms)"

# 2. Two nodes of 2 ranks; node 1's agent (its cc-run) is killed.
job=agent-node-$$
timeout 90 "$run" -n 2 --nnodes 2 --node-rank 0 --master-addr "$addr" --job-id "$job" --max-restarts 0 -- \
  "$member" env --auto shrink >"$dir/node0.out" 2>&1 &
node0=$!
pids+=("$node0")
setsid timeout 90 "$run" -n 2 --nnodes 2 --node-rank 1 --master-addr "$addr" --job-id "$job" -- \
  "$member" env --auto shrink >"$dir/node1.out" 2>&1 &
pids+=($!)
disown $!
wait_for "$dir/node0.out" "\] READY rank=" 2 30
wait_for "$dir/node1.out" "\] READY rank=" 2 30
agent1=$(pgrep -f -n "node-rank 1 --master-addr $addr --job-id $job")
[ -n "$agent1" ] || fail "2: node 1's cc-run not found"
kill -9 "$agent1"
wait_for "$dir/node0.out" "\] RECOVERED gen=1" 2 30
for r in 0 1; do
  expect "$dir/node0.out" "^\[rank $r\] FAILED gen=0 rank 2 (host $host, pid [0-9]*) and rank 3 with it failed: its node agent (cc-run, pid $agent1, on host $host) was lost: the node's etcd lease expired"
done
expect "$dir/node0.out" "^\[rank 1\] RECOVERED gen=1 rank=1 size=2 members=0,1 failed=2,3 "
wait "$node0" || fail "2: node 0's cc-run exited with $?"
echo "2: a node's agent killed: its ranks left out"

# 3. Node 0 through its agent, node 1 direct; an agent rank dies.
job=agent-mixed-$$
timeout 90 "$run" -n 2 --nnodes 2 --node-rank 0 --master-addr "$addr" --job-id "$job" --max-restarts 0 -- \
  "$member" env --auto shrink --die-rank 1 >"$dir/mixed0.out" 2>&1 &
a=$!
timeout 90 "$run" -n 2 --nnodes 2 --node-rank 1 --master-addr "$addr" --job-id "$job" --no-agent --max-restarts 0 -- \
  "$member" env --auto shrink --die-rank 1 >"$dir/mixed1.out" 2>&1 &
b=$!
pids+=("$a" "$b")
wait "$a"
wait "$b"
cat "$dir/mixed0.out" "$dir/mixed1.out" >"$dir/mixed.out"
for r in 0 2 3; do
  expect "$dir/mixed.out" "^\[rank $r\] FAILED gen=0 rank 1 (host $host, pid [0-9]*) failed: exited with signal 9 (killed)\. "
  expect "$dir/mixed.out" "^\[rank $r\] RECOVERED gen=1 rank=[0-9] size=3 members=0,2,3 failed=1 "
done
echo ok
