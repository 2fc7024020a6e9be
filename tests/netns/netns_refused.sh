#!/bin/bash
# Nothing listens on the rendezvous host: the client's error says so, names
# the address, and comes at its deadline, not later.
. "$(dirname "$0")/netns_lib.sh"
netns_setup

connect_fails 1500 "with nothing listening"
echo "$out" | grep -q "CC_ERR_RENDEZVOUS" || fail "expected CC_ERR_RENDEZVOUS: $out"
echo "$out" | grep -qi "refused" || fail "the error does not say 'refused': $out"
echo "$out" | grep -q "$HOST_RV:$RV_PORT" || fail "the error does not name $HOST_RV:$RV_PORT: $out"
[ "$took" -lt 5000 ] || fail "took $took ms for a 1500 ms deadline"
