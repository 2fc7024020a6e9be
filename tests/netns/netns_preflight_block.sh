#!/bin/bash
# Connections blocked between two namespace hosts, found before NCCL starts:
# a firewall on host b that drops new connections from host a (the way back
# works), and NCCL_SOCKET_IFNAME on host b naming an interface that does not
# lead to host a. Every rank fails within 2 s of the last one's arrival, with
# one error naming who cannot reach whom, at which address, the connect
# error, the likely cause and the fix.
. "$(dirname "$0")/netns_start_lib.sh"
start_switch
command -v nft >/dev/null 2>&1 || skip "no 'nft' command: install nftables"
make_host a "$NS_A" "$ADDR_A" "$ADDR6_A"
make_host b "$NS_B" "$ADDR_B" "$ADDR6_B"
decoy "$NS_B" ccmgmt1 198.19.8.3/24
wait_up "$NS_A" cceth0
wait_up "$NS_B" cceth0
wait_up "$NS_B" ccmgmt1

# blocked ADDR NAME...: each rank failed within 2 s of the last arrival, all
# with the same message, which names rank 0 unable to reach rank 1 at ADDR.
blocked() {
  local addr=$1
  shift
  refused "$@"
  says_all "rank 0 (host $HOST_A, pid " "$@"
  says_all "cannot connect to rank 1 (host $HOST_B, pid " "$@"
  says_all "at $addr:" "$@"
}

note "1. a one-way firewall: host b drops new TCP connections from host a"
ip netns exec "$NS_B" nft -f - <<NFT || skip "nft cannot make a filter table here"
table inet ccfw {
  chain input {
    type filter hook input priority filter; policy accept;
    ip saddr $ADDR_A tcp flags & (syn | ack) == syn drop
  }
}
NFT
rank f0 "$NS_A" "$HOST_A" 0 2 "$ADDR_A" fw -- ok
rank f1 "$NS_B" "$HOST_B" 1 2 "$ADDR_A" fw -- ok
blocked "$ADDR_B" f0 f1
for n in f0 f1; do
  says "$n" "no answer within 1200 ms"
  says "$n" "a firewall drops TCP connections into host $HOST_B from host $HOST_A"
  says "$n" "rank 1 did connect to rank 0, so the other way works and the block is one-way"
  says "$n" "Fix: allow incoming TCP"
done
finish_ranks
ip netns exec "$NS_B" nft delete table inet ccfw

note "2. NCCL_SOCKET_IFNAME on host b names an interface that does not reach host a"
rank i0 "$NS_A" "$HOST_A" 0 2 "$ADDR_A" ifn -- ok
rank i1 "$NS_B" "$HOST_B" 1 2 "$ADDR_A" ifn NCCL_SOCKET_IFNAME=ccmgmt1 -- ok
blocked 198.19.8.3 i0 i1
for n in i0 i1; do
  says "$n" "interface ccmgmt1, from NCCL_SOCKET_IFNAME=ccmgmt1 set by hand"
  says "$n" "NCCL_SOCKET_IFNAME=ccmgmt1 was set by hand on host $HOST_B"
  says "$n" "leaves through cceth0 ($ADDR_B)"
  says "$n" "Fix: set NCCL_SOCKET_IFNAME=cceth0 on host $HOST_B"
done
finish_ranks
note "all passed"
