#!/bin/bash
# cc-run as its node's agent, with real rank processes (recovery_member: the
# library's join, watchdog and recovery steps, no GPU), on loopback:
# 1. ranks join through the agent; one killed by a signal is named to the
#    others with its exit status, and they shrink through the agent;
# 2. a node's agent killed: its ranks fail together, named with the node,
#    and the other node shrinks;
# 3. one job of agent ranks (node 0) and direct ranks (node 1, --no-agent):
#    a direct rank's death reaches the agent's ranks, and an agent rank's
#    death reaches the direct ones.
# Usage: agent_ranks.sh PATH/TO/cc-run PATH/TO/recovery_member
set -u
run=$1 member=$2
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
export CC_LOG_LEVEL=error

# 1. One node of 4 ranks under the agent; rank 2 is killed with SIGKILL.
timeout 90 "$run" -n 4 --max-restarts 0 -- "$member" env --auto shrink --die-rank 2 \
  >"$dir/one.out" 2>&1
rc=$?
[ $rc -eq 137 ] || fail "1: cc-run exited with $rc, want 137 (rank 2's signal)"
victim=$(sed -n 's/^cc-run: rank 2 (pid \([0-9]*\)) exited with.*/\1/p' "$dir/one.out")
[ -n "$victim" ] || fail "1: cc-run did not say rank 2 exited"
for r in 0 1 3; do
  expect "$dir/one.out" "^\[rank $r\] FAILED gen=0 rank 2 (host $host, pid $victim) failed: exited with signal 9 (killed)\. "
done
expect "$dir/one.out" "^\[rank 0\] RECOVERED gen=1 rank=0 size=3 members=0,1,3 failed=2 "
expect "$dir/one.out" "^\[rank 3\] RECOVERED gen=1 rank=2 size=3 members=0,1,3 failed=2 "
[ "$(grep -c '\] LEFT$' "$dir/one.out")" -eq 3 ] || fail "1: not every survivor left"

# 2. Two nodes of 2 ranks; node 1's agent (its cc-run) is killed.
port=$(free_port)
timeout 90 "$run" -n 2 --nnodes 2 --node-rank 0 --master-port "$port" --max-restarts 0 -- \
  "$member" env --auto shrink >"$dir/node0.out" 2>&1 &
pids+=($!)
node0=$!
setsid timeout 90 "$run" -n 2 --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 \
  --master-port "$port" -- "$member" env --auto shrink >"$dir/node1.out" 2>&1 &
pids+=($!)
disown $!  # killed below on purpose: no word from the shell about it
wait_for "$dir/node0.out" "\] READY rank=" 2 30
wait_for "$dir/node1.out" "\] READY rank=" 2 30
agent1=$(pgrep -f -n "node-rank 1 --master-addr 127.0.0.1 --master-port $port")
[ -n "$agent1" ] || fail "2: node 1's cc-run not found"
kill -9 "$agent1"
wait_for "$dir/node0.out" "\] RECOVERED gen=1" 2 30
for r in 0 1; do
  expect "$dir/node0.out" "^\[rank $r\] FAILED gen=0 rank 2 (host $host, pid [0-9]*) and rank 3 with it failed: its node agent (cc-run, pid $agent1, on host $host at 127.0.0.1:[0-9]*) was lost: "
done
expect "$dir/node0.out" "^\[rank 1\] RECOVERED gen=1 rank=1 size=2 members=0,1 failed=2,3 "
wait "$node0" || fail "2: node 0's cc-run exited with $?"

# 3. Node 0 through its agent, node 1 direct; first a direct rank dies, then
# (another job) an agent rank.
for die in 3 1; do
  port=$(free_port)
  timeout 90 "$run" -n 2 --nnodes 2 --node-rank 0 --master-port "$port" --max-restarts 0 -- \
    "$member" env --auto shrink --die-rank "$die" >"$dir/mixed0-$die.out" 2>&1 &
  a=$!
  timeout 90 "$run" -n 2 --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$port" \
    --no-agent --max-restarts 0 -- "$member" env --auto shrink --die-rank "$die" \
    >"$dir/mixed1-$die.out" 2>&1 &
  b=$!
  pids+=("$a" "$b")
  wait "$a"
  wait "$b"
  cat "$dir/mixed0-$die.out" "$dir/mixed1-$die.out" >"$dir/mixed-$die.out"
  for r in 0 1 2 3; do
    [ "$r" -eq "$die" ] && continue
    expect "$dir/mixed-$die.out" "^\[rank $r\] FAILED gen=0 rank $die (host $host, pid [0-9]*) failed: "
    expect "$dir/mixed-$die.out" "^\[rank $r\] RECOVERED gen=1 rank=[0-9] size=3 "
  done
done
# The agent names the exit; a direct rank's end is its connection's.
expect "$dir/mixed-1.out" "FAILED gen=0 rank 1 (host $host, pid [0-9]*) failed: exited with signal 9 (killed)\. "
grep -q "FAILED gen=0 rank 3 (host $host, pid [0-9]*) failed: exited with" "$dir/mixed-3.out" &&
  fail "3: a direct rank's death named as an exit"
echo ok
