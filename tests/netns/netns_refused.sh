#!/bin/bash
# Nothing listens on the rendezvous host: the client's error says so, names
# the address, and comes at its deadline, not later.
. "$(dirname "$0")/netns_lib.sh"
netns_setup

t0=$(now_ms)
out=$(in_ns "$NS_A" "$STORE_TOOL" "$HOST_RV" "$RV_PORT" 1500 connect 2>&1) && fail "connect succeeded with nothing listening: $out"
took=$(( $(now_ms) - t0 ))
note "refused after $took ms: $out"
echo "$out" | grep -q "CC_ERR_RENDEZVOUS" || fail "expected CC_ERR_RENDEZVOUS: $out"
echo "$out" | grep -qi "refused" || fail "the error does not say 'refused': $out"
echo "$out" | grep -q "$HOST_RV:$RV_PORT" || fail "the error does not name $HOST_RV:$RV_PORT: $out"
[ "$took" -lt 5000 ] || fail "took $took ms for a 1500 ms deadline"
