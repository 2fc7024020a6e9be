#!/bin/bash
# The rendezvous host's cable is pulled: connecting fails at the deadline
# with an error that names the address and says it cannot be reached; and a
# client that was connected sees its request time out.
. "$(dirname "$0")/netns_lib.sh"
netns_setup
start_server

out=$(in_ns "$NS_A" "$STORE_TOOL" "$HOST_RV" "$RV_PORT" 5000 set before 1 2>&1) || fail "set before the link went down: $out"
link_down rv

connect_fails 2000 "across a pulled cable"
echo "$out" | grep -qE "CC_ERR_TIMEOUT|CC_ERR_RENDEZVOUS" || fail "expected CC_ERR_TIMEOUT or CC_ERR_RENDEZVOUS: $out"
echo "$out" | grep -q "cannot reach the rendezvous at $HOST_RV:$RV_PORT" || fail "the error does not name $HOST_RV:$RV_PORT: $out"
echo "$out" | grep -qiE "timed out|unreachable|no route" || fail "the error does not say why: $out"
[ "$took" -ge 1500 ] || fail "gave up after $took ms, before its 2000 ms deadline"
[ "$took" -lt 8000 ] || fail "took $took ms for a 2000 ms deadline"
