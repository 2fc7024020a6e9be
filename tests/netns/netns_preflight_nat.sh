#!/bin/bash
# The seed's failure, across namespace hosts: rank 0 on host a, rank 1 in a
# "container" behind a masquerading router, as on Docker's default bridge
# network. Before NCCL starts, both ranks fail within 2 s of the last one's
# arrival with one error: rank 0 cannot reach rank 1 at its private address,
# the connect error, the NAT as the likely cause and the fix. The same
# through the cc-rendezvous daemon. With the NAT matched, the same two ranks
# go through: the container network routed from host a, or reached through
# port forwarding (host a sends the container's address to the router, whose
# ports forward to the container, as with a published port range).
# CC_PREFLIGHT=0 turns the test off.
. "$(dirname "$0")/netns_start_lib.sh"
start_switch
make_host rv "$NS_RV" "$ADDR_RV" "$ADDR6_RV"
make_host a "$NS_A" "$ADDR_A" "$ADDR6_A"
nat_setup
wait_up "$NS_A" cceth0
wait_up "$NS_NAT" cceth0
wait_up "$NS_RV" cceth0

# verdict NAME...: every rank failed within 2 s of the last arrival, with
# the same message naming the NAT.
verdict() {
  refused "$@"
  says_all "cannot connect to rank 1 (host $HOST_C, pid " "$@"
  says_all "at $ADDR_C:" "$@"
  says_all "Network is unreachable" "$@"
  says_all "a NAT (a Docker bridge network, say) sits between host $HOST_C and the other hosts" "$@"
  says_all "arrived from $ADDR_NAT" "$@"
  says_all "--network host" "$@"
}

note "1. rank 0 on host a hosts the server; rank 1 behind the NAT"
rank n0 "$NS_A" "$HOST_A" 0 2 "$ADDR_A" nat -- ok
rank n1 "$NS_C" "$HOST_C" 1 2 "$ADDR_A" nat -- ok
verdict n0 n1
finish_ranks

note "2. the same through the cc-rendezvous daemon on host rv"
start_server
rank d0 "$NS_A" "$HOST_A" 0 2 "$ADDR_RV" natd CC_RENDEZVOUS=external -- ok
rank d1 "$NS_C" "$HOST_C" 1 2 "$ADDR_RV" natd CC_RENDEZVOUS=external -- ok
verdict d0 d1
finish_ranks

note "3. CC_PREFLIGHT=0: nothing is tested, the ranks go on to NCCL's init"
rank o0 "$NS_A" "$HOST_A" 0 2 "$ADDR_A" natoff CC_PREFLIGHT=0 -- ok
rank o1 "$NS_C" "$HOST_C" 1 2 "$ADDR_A" natoff CC_PREFLIGHT=0 -- ok
ready o0 o1
finish_ranks

note "4. the NAT matched: host a routes the container network through the router"
ip -n "$NS_A" route add 172.18.0.0/24 via "$ADDR_NAT" || fail "route to the container network"
rank m0 "$NS_A" "$HOST_A" 0 2 "$ADDR_A" natok CC_LOG_LEVEL=debug -- ok
rank m1 "$NS_C" "$HOST_C" 1 2 "$ADDR_A" natok CC_LOG_LEVEL=debug -- ok
ready m0 m1
says_all "reachability test passed" m0 m1
says m0 "will have NCCL use the address $ADDR_C"  # the NAT notice still warns
finish_ranks

note "5. the NAT matched by port forwarding: no route to the container network"
ip -n "$NS_A" route del 172.18.0.0/24 via "$ADDR_NAT" || fail "the route of step 4 stays"
# On the link but nobody answers for it there: only the forward reaches it.
ip -n "$NS_A" route add 172.18.0.0/24 dev cceth0 || fail "on-link route to the container network"
ip netns exec "$NS_A" nft -f - <<NFT || fail "nft: host a's forward to the router"
table ip ccfwd {
  chain out {
    type nat hook output priority -100; policy accept;
    ip daddr 172.18.0.0/24 tcp dport 1024-65535 dnat to $ADDR_NAT
  }
}
NFT
ip netns exec "$NS_NAT" nft -f - <<NFT || fail "nft: the router's published ports"
table ip ccpub {
  chain pre {
    type nat hook prerouting priority dstnat; policy accept;
    iifname "cceth0" ip daddr $ADDR_NAT tcp dport 1024-65535 dnat to $ADDR_C
  }
}
NFT
rank p0 "$NS_A" "$HOST_A" 0 2 "$ADDR_A" natfwd CC_LOG_LEVEL=debug -- ok
rank p1 "$NS_C" "$HOST_C" 1 2 "$ADDR_A" natfwd CC_LOG_LEVEL=debug -- ok
ready p0 p1
says_all "reachability test passed" p0 p1
says p0 "will have NCCL use the address $ADDR_C"
finish_ranks

note "6. the forward removed (the on-link route stays): the test fails again, naming the NAT"
ip netns exec "$NS_NAT" nft delete table ip ccpub
rank q0 "$NS_A" "$HOST_A" 0 2 "$ADDR_A" natnofwd -- ok
rank q1 "$NS_C" "$HOST_C" 1 2 "$ADDR_A" natnofwd -- ok
for n in q0 q1; do
  wait_line "$n" '^ERROR' 15 || fail "$n never stopped"
  says "$n" "cannot connect to rank 1 (host $HOST_C, pid "
  says "$n" "a NAT (a Docker bridge network, say) sits between host $HOST_C and the other hosts"
done
finish_ranks
note "all passed"
