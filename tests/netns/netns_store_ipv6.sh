#!/bin/bash
# One job over both families: a store client on host a adds through the
# rendezvous host's name (IPv4), one on host b through its bracketed IPv6
# address, and each sees the other's add. The server binds "::". Exits 77
# (skipped), saying why, where the namespaces get no IPv6 address.
. "$(dirname "$0")/netns_lib.sh"
netns_setup
require_ipv6
start_server_bind "::"
# A connection that lives through the whole test keeps the job alive.
bg "$NS_A" holder "$STORE_TOOL" "$HOST_RV" "$RV_PORT" 10000 hold 9000
wait_line holder '^connected' 10 || fail "the holder did not connect"

out=$(in_ns "$NS_A" "$STORE_TOOL" "$HOST_RV" "$RV_PORT" 5000 add counter 42 2>&1) || fail "add by name from a: $out"
[ "$out" = 42 ] || fail "add by name from a gave '$out', expected 42"
out=$(in_ns "$NS_B" "$STORE_TOOL" "[$ADDR6_RV]" "$RV_PORT" 5000 add counter 1 2>&1) || fail "add over IPv6: $out"
[ "$out" = 43 ] || fail "add over IPv6 gave '$out', expected 43 (a's add over IPv4 not seen)"
note "store over a bracketed IPv6 address and by name, one job: ok"
