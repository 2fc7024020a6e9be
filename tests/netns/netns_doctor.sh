#!/bin/bash
# cc-doctor inside host a: names the interface whose route reaches the
# rendezvous host (not a's default-route interface), finds a cc rendezvous
# there, and explains a refused and an unreachable address. Its route to an
# IPv6 address: netns_doctor_ipv6.sh.
. "$(dirname "$0")/netns_lib.sh"
netns_setup
start_server

in_ns "$NS_A" "$CC_DOCTOR" --json --master-addr "$HOST_RV" --master-port "$RV_PORT" >"$WORK/doctor.json" 2>&1 \
  || fail "cc-doctor --json exited $?"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/doctor.json" || fail "cc-doctor --json is not JSON: $(cat "$WORK/doctor.json")"
[ "$(json "$WORK/doctor.json" 'd["master"]["route"]["interface"]')" = cceth0 ] || fail "route interface: $(json "$WORK/doctor.json" 'd["master"]')"
[ "$(json "$WORK/doctor.json" 'd["master"]["route"]["source_address"]')" = "$ADDR_A" ] || fail "source address: $(json "$WORK/doctor.json" 'd["master"]')"
[ "$(json "$WORK/doctor.json" 'd["master"]["answer"]')" = cc_rendezvous ] || fail "answer: $(json "$WORK/doctor.json" 'd["master"]')"
[ "$(json "$WORK/doctor.json" 'd["master"]["auth_required"]')" = False ] || fail "auth_required: $(json "$WORK/doctor.json" 'd["master"]')"
json "$WORK/doctor.json" 'd["master"]["server"]' | grep -q . || fail "no server string: $(json "$WORK/doctor.json" 'd["master"]')"
json "$WORK/doctor.json" '[i["name"] for i in d["interfaces"]]' | grep -q ccmgmt0 || fail "interfaces: ccmgmt0 missing"

# Text, with MASTER_ADDR/MASTER_PORT from the environment.
out=$(MASTER_ADDR=$HOST_RV MASTER_PORT=$RV_PORT in_ns "$NS_A" "$CC_DOCTOR" 2>&1) || fail "cc-doctor exited $?: $out"
echo "$out" | grep -q "interface cceth0, source address $ADDR_A" || fail "text names no route interface: $out"
echo "$out" | grep -q "is reachable: a cc rendezvous answers" || fail "text does not report the rendezvous: $out"
echo "$out" | grep -q "MASTER_ADDR=$HOST_RV" || fail "text does not list MASTER_ADDR: $out"

# A user's NCCL_SOCKET_IFNAME that leaves out the route's interface is flagged.
out=$(NCCL_SOCKET_IFNAME=ccmgmt in_ns "$NS_A" "$CC_DOCTOR" --master-addr "$HOST_RV" --master-port "$RV_PORT" 2>&1) || fail "cc-doctor exited $?"
echo "$out" | grep -q "NCCL_SOCKET_IFNAME=ccmgmt excludes cceth0" || fail "NCCL_SOCKET_IFNAME mismatch: $out"
out=$(NCCL_SOCKET_IFNAME=cceth in_ns "$NS_A" "$CC_DOCTOR" --master-addr "$HOST_RV" --master-port "$RV_PORT" 2>&1) || fail "cc-doctor exited $?"
echo "$out" | grep -q "excludes" && fail "NCCL_SOCKET_IFNAME=cceth flagged though it includes cceth0: $out"

# Nothing listens on the next port: refused, with the fix.
out=$(in_ns "$NS_B" "$CC_DOCTOR" --master-addr "$ADDR_RV" --master-port $((RV_PORT + 1)) 2>&1) || fail "cc-doctor exited $?"
echo "$out" | grep -q "connection refused" || fail "refused: $out"
echo "$out" | grep -q "nothing listens there: start rank 0 or cc-rendezvous first, or check the port" || fail "refused fix: $out"

# An address behind a's default route (ccmgmt0 leads nowhere: packets vanish).
t0=$(now_ms)
out=$(in_ns "$NS_A" "$CC_DOCTOR" --json --master-addr 198.19.7.99 --master-port 29500 --timeout-ms 700 2>&1) || fail "cc-doctor exited $?"
took=$(( $(now_ms) - t0 ))
echo "$out" >"$WORK/far.json"
[ "$(json "$WORK/far.json" 'd["master"]["route"]["interface"]')" = ccmgmt0 ] || fail "route to 198.19.7.99: $out"
[ "$(json "$WORK/far.json" 'd["master"]["answer"]')" = unreachable ] || fail "answer for a silent address: $out"
json "$WORK/far.json" '[f["fix"] for f in d["findings"]]' | grep -q "firewall, wrong address, or Docker bridge without --network host" || fail "unreachable fix: $out"
[ "$took" -lt 5000 ] || fail "the probe took $took ms with --timeout-ms 700"

# b has no default route: the message says an outside address has no route.
out=$(in_ns "$NS_B" "$CC_DOCTOR" --master-addr 203.0.113.5 --master-port 1 2>&1) || fail "cc-doctor exited $?"
echo "$out" | grep -q "no route to 203.0.113.5" || fail "no-route words: $out"
echo "$out" | grep -q "ip route get 203.0.113.5" || fail "no-route fix: $out"


# A name nobody knows.
out=$(in_ns "$NS_A" "$CC_DOCTOR" --master-addr no-such-host.invalid --master-port 1 2>&1) || fail "cc-doctor exited $?"
echo "$out" | grep -q 'cannot resolve "no-such-host.invalid"' || fail "unresolvable name: $out"
note "cc-doctor across namespaces: ok"
