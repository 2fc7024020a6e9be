#!/bin/bash
# Store clients on hosts a and b reach the rendezvous on host rv BY HOST NAME:
# add, set/get (a get parked before the set), wait across hosts. The same
# over a bracketed IPv6 address: netns_store_ipv6.sh.
. "$(dirname "$0")/netns_lib.sh"
netns_setup
start_server
# A connection that lives through the whole test keeps the job (and its
# keys) alive: the server forgets a job once its last connection is gone.
bg "$NS_A" holder "$STORE_TOOL" "$HOST_RV" "$RV_PORT" 10000 hold 9000
wait_line holder '^connected' 10 || fail "the holder did not connect"

tool() { in_ns "$1" "$STORE_TOOL" "$HOST_RV" "$RV_PORT" 10000 "${@:2}"; }

# b parks a get for a key that a sets later.
bg "$NS_B" get "$STORE_TOOL" "$HOST_RV" "$RV_PORT" 10000 get greeting 8000
sleep 0.5

out=$(tool "$NS_A" add counter 1 2>&1) || fail "add from a: $out"
[ "$out" = 1 ] || fail "add from a gave '$out', expected 1"
out=$(tool "$NS_B" add counter 41 2>&1) || fail "add from b: $out"
[ "$out" = 42 ] || fail "add from b gave '$out', expected 42 (a's add not seen across hosts)"

grep -q . "$WORK/get.out" && fail "b's get returned before the key was set: $(cat "$WORK/get.out")"
out=$(tool "$NS_A" set greeting "hello from $HOST_A" 2>&1) || fail "set from a: $out"
for ((i = 0; i < 50; i++)); do grep -q . "$WORK/get.out" && break; sleep 0.1; done
got=$(cat "$WORK/get.out")
[ "$got" = "hello from $HOST_A" ] || fail "b's parked get returned '$got'"

# wait for two keys, one from each host.
bg "$NS_A" wait "$STORE_TOOL" "$HOST_RV" "$RV_PORT" 10000 wait 8000 from-a from-b
sleep 0.5
tool "$NS_A" set from-a 1 >/dev/null 2>&1 || fail "set from-a"
tool "$NS_B" set from-b 1 >/dev/null 2>&1 || fail "set from-b"
wait_line wait '^ready$' 8 || fail "a's wait for keys set on a and b did not return"

# a get of a key nobody sets times out with a message naming the key.
out=$(tool "$NS_B" get never-set 300 2>&1) && fail "get of a missing key succeeded: $out"
echo "$out" | grep -q "CC_ERR_TIMEOUT" || fail "missing key: expected CC_ERR_TIMEOUT, got: $out"
echo "$out" | grep -q "never-set" || fail "missing key: the error does not name the key: $out"
note "store across hosts by name: ok"
