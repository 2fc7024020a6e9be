#!/bin/bash
# No false alarms from the reachability test: two ranks on one host (nothing
# to test), and two hosts where host b has a decoy management interface
# listed before its real one and carrying its default route (cc gives NCCL
# the interface that reaches the rendezvous, and the test passes on it).
. "$(dirname "$0")/netns_start_lib.sh"
start_switch
make_host a "$NS_A" "$ADDR_A" "$ADDR6_A"
make_host b "$NS_B" "$ADDR_B" "$ADDR6_B"
# The decoy first: re-plug host b's cable so its interface comes after it.
decoy "$NS_B" ccdecoy0 198.19.9.3/24
ip -n "$NS_B" route add default via 198.19.9.1 dev ccdecoy0
ip -n "$NS_B" link del cceth0
ip link add p-b2 netns "$NS_SW" type veth peer name cceth0 netns "$NS_B" || fail "veth cceth0"
ip -n "$NS_SW" link set p-b2 master br0 up
ip -n "$NS_B" addr add "$ADDR_B/24" dev cceth0
ip -n "$NS_B" link set cceth0 up
wait_up "$NS_A" cceth0
wait_up "$NS_B" cceth0
wait_up "$NS_B" ccdecoy0
order=$(ip -n "$NS_B" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | tr '\n' ' ')
note "host b's interfaces in order: $order"
case "$order" in *ccdecoy0*cceth0*) ;; *) fail "the decoy is not listed first: $order" ;; esac

note "1. two ranks on one host: nothing to test"
rank s0 "$NS_A" "$HOST_A" 0 2 "$ADDR_A" onehost CC_LOG_LEVEL=debug -- ok
rank s1 "$NS_A" "$HOST_A" 1 2 "$ADDR_A" onehost CC_LOG_LEVEL=debug -- ok
ready s0 s1
says_all "(0 connection(s) from here)" s0 s1
finish_ranks

note "2. two hosts, a decoy management interface listed first on host b"
rank t0 "$NS_A" "$HOST_A" 0 2 "$ADDR_A" decoy CC_LOG_LEVEL=debug -- ok
rank t1 "$NS_B" "$HOST_B" 1 2 "$ADDR_A" decoy CC_LOG_LEVEL=debug -- ok
ready t0 t1
says_all "reachability test passed" t0 t1
says_all "(1 connection(s) from here)" t0 t1
says t1 "NCCL_SOCKET_IFNAME==cceth0"
finish_ranks
note "all passed"
