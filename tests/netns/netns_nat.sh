#!/bin/bash
# The two-Docker-hosts story (packaging/compose/compose.yaml) with network
# namespaces in place of Docker: rank 0 on host rv (198.18.0.1) hosts the
# rendezvous, rank 1 on host b (198.18.0.3) joins it, each through the
# library's own rendezvous step with the NCCL address cc_comm_init would give
# it. First as with --network host: rank 1 runs in b itself, and no rank
# hears of a NAT. Then as on Docker's bridge: rank 1 runs in a "container"
# namespace behind b (172.17.0.2 on a veth, default route through b, which
# masquerades it with nftables as Docker does), so its NCCL address is
# 172.17.0.2 while its connection comes from 198.18.0.3: both ranks are told
# the message naming the NAT and the fix (--network host or NCCL_SOCKET_IFNAME).
# Argument 5: the netns_nat_member program. Skipped (77) without nft or NAT
# support in the kernel.
. "$(dirname "$0")/netns_lib.sh"
NAT_MEMBER=${5:?netns_nat.sh needs the netns_nat_member program}
netns_setup
export CC_LOG_LEVEL=warn

# ranks NAME1 NS1: rank 0 in rv, rank 1 in NS1; both must join.
ranks() {
  bg "$NS_RV" "$1-r0" "$NAT_MEMBER" "$ADDR_RV" "$RV_PORT" 0 2 1500
  bg "$2" "$1-r1" "$NAT_MEMBER" "$ADDR_RV" "$RV_PORT" 1 2 1500
  wait_line "$1-r0" '^(JOINED|ERROR)' 25 && wait_line "$1-r1" '^(JOINED|ERROR)' 25 ||
    fail "$1: the ranks did not join"
  grep -q '^JOINED' "$WORK/$1-r0.out" || fail "$1: rank 0 did not join"
  grep -q '^JOINED' "$WORK/$1-r1.out" || fail "$1: rank 1 did not join"
  wait "${BG_PIDS[@]: -2}" 2>/dev/null
}

# As with --network host: NCCL's addresses are the hosts' own.
ranks host "$NS_B"
grep -q "^JOINED nccl_addr $ADDR_B\$" "$WORK/host-r1.out" || fail "host: rank 1's NCCL address is not b's: $(cat "$WORK/host-r1.out")"
grep -q "NAT" "$WORK/host-r0.out" "$WORK/host-r1.out" && fail "host network: a NAT notice without a NAT"
note "host network: joined, no NAT notice"

# As on Docker's bridge: a container namespace behind b, masqueraded.
command -v nft >/dev/null 2>&1 || skip "no 'nft' command (Debian package nftables): the bridge variant needs it for NAT"
NS_C=ccns-c-$S
ip netns add "$NS_C" || fail "ip netns add $NS_C"
MADE_NS+=("$NS_C")
ip -n "$NS_C" link set lo up
ip link add ccdock0 netns "$NS_B" type veth peer name cceth0 netns "$NS_C" || fail "veth for the container"
ip -n "$NS_B" addr add 172.17.0.1/16 dev ccdock0
ip -n "$NS_B" link set ccdock0 up
ip -n "$NS_C" addr add 172.17.0.2/16 dev cceth0
ip -n "$NS_C" link set cceth0 up
ip -n "$NS_C" route add default via 172.17.0.1
in_ns "$NS_B" sysctl -q -w net.ipv4.ip_forward=1 || fail "cannot forward in $NS_B"
in_ns "$NS_B" nft -f - <<'NFT' 2>"$WORK/nft.err" || skip "no NAT in this kernel's namespaces (nft: $(cat "$WORK/nft.err"))"
table ip ccnat {
  chain postrouting {
    type nat hook postrouting priority 100; policy accept;
    ip saddr 172.17.0.0/16 oifname "cceth0" masquerade
  }
}
NFT

ranks bridge "$NS_C"
grep -q "^JOINED nccl_addr 172.17.0.2\$" "$WORK/bridge-r1.out" || fail "bridge: rank 1's NCCL address is not its container's: $(cat "$WORK/bridge-r1.out")"
for r in r0 r1; do
  f=$WORK/bridge-$r.out
  grep -q "rank 1 (host [^ ]*, pid [0-9]*) will have NCCL use the address 172.17.0.2, but its connection to the rendezvous came from $ADDR_B: a NAT or a Docker bridge sits between them" "$f" ||
    fail "bridge: $r was not told of the NAT: $(cat "$f")"
  grep -q "Run the containers with --network host, or set NCCL_SOCKET_IFNAME" "$f" ||
    fail "bridge: $r was not told the fix: $(cat "$f")"
done
note "bridge: both ranks told: $(grep -m1 -o 'rank 1 (host.*' "$WORK/bridge-r0.out")"
echo "ok: host network joins quietly; behind a NAT both ranks hear of it and the fix"
