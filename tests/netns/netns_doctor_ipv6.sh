#!/bin/bash
# cc-doctor inside host a, asked for the rendezvous host's IPv6 address: names
# the route's interface and source address, and finds nothing listening there
# (the daemon listens on 0.0.0.0 only). Exits 77 (skipped), saying why, where
# the namespaces get no IPv6 address.
. "$(dirname "$0")/netns_lib.sh"
netns_setup
require_ipv6
start_server

out=$(in_ns "$NS_A" "$CC_DOCTOR" --json --master-addr "[$ADDR6_RV]" --master-port "$RV_PORT" 2>&1) || fail "cc-doctor exited $?"
echo "$out" >"$WORK/v6.json"
[ "$(json "$WORK/v6.json" 'd["master"]["route"]["interface"]')" = cceth0 ] || fail "IPv6 route: $out"
[ "$(json "$WORK/v6.json" 'd["master"]["route"]["source_address"]')" = "$ADDR6_A" ] || fail "IPv6 source: $out"
[ "$(json "$WORK/v6.json" 'd["master"]["answer"]')" = refused ] || fail "IPv6 answer: $out"
note "cc-doctor's route to an IPv6 address: ok"
