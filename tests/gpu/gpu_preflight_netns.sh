#!/usr/bin/env bash
# The seed's multi-host failure on one GPU machine: network namespaces as
# hosts, one GPU each (CUDA_VISIBLE_DEVICES), NCCL_HOSTID apart and NCCL over
# sockets (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), so NCCL's connections
# cross the namespaces' cables as they would cross hosts. SECOND_GPU (default
# 1) is the second host's GPU: 0 on a machine of one GPU, which both hosts
# then share (their NCCL_HOSTIDs differ).
#
#   gpu_preflight_netns.sh GPU_FAILURES_BINARY [SCENARIO...]
#   scenarios: nat host routed (default: all)
#     nat     rank 0 on host a hosts the rendezvous; rank 1 in a "container"
#             behind a masquerading router (Docker's default bridge network).
#             Both cc_comm_init calls return CC_ERR_SYSTEM within 2 s of the
#             last rank's arrival, before NCCL starts, naming the NAT and the fix.
#     host    rank 1 on the shared network instead (as with --network host):
#             both inits succeed and an all-reduce gives 3.
#     routed  rank 1 behind the NAT, host a routing the container network
#             through the router (the NAT matched): both succeed.
#
# The GPU machine has no iproute2 or nftables: IP and NFT name the binaries
# to use (default: ip and nft on the PATH), IP_LIB and NFT_LIB folders of the
# libraries they need, put on LD_LIBRARY_PATH for them alone. Needs root and
# 2 GPUs. Prints "PREFLIGHT_MS <ms>" for the nat scenario (last arrival to
# the later error). Exit 0 when every scenario passed, 77 when it cannot run
# here (says why), 1 otherwise.
set -u
. "$(dirname "$0")/../common/poll.sh"
BIN=${1:?usage: gpu_preflight_netns.sh GPU_FAILURES_BINARY [SCENARIO...]}
shift
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -eq 0 ] && SCENARIOS=(nat host routed)
IP=${IP:-ip}
NFT=${NFT:-nft}
ORIG_LD=${LD_LIBRARY_PATH-}
S=$$
NS_SW=ccg-sw-$S NS_A=ccg-a-$S NS_B=ccg-b-$S NS_NAT=ccg-nat-$S NS_C=ccg-c-$S
ADDR_A=198.18.0.2 ADDR_B=198.18.0.3 ADDR_NAT=198.18.0.4 ADDR_C=172.18.0.2
PORT=29500
WORK=$(mktemp -d)
MADE=()
PIDS=()
bad=0

ipc() { LD_LIBRARY_PATH=${IP_LIB:-$ORIG_LD} "$IP" "$@"; }
nftc() { LD_LIBRARY_PATH=${NFT_LIB:-$ORIG_LD} "$NFT" "$@"; }
skip() { echo "gpu_preflight_netns: skipped: $*"; exit 77; }
die() { echo "gpu_preflight_netns: FAILED: $*"; exit 1; }
cleanup() {
  local p ns
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  for ns in "${MADE[@]}"; do ipc netns del "$ns" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
ipc -V >/dev/null 2>&1 || skip "no usable ip ('$IP'); set IP (and IP_LIB) to a copy of iproute2's ip"
nftc -v >/dev/null 2>&1 || skip "no usable nft ('$NFT'); set NFT (and NFT_LIB) to a copy of nftables' nft"
command -v unshare >/dev/null || skip "no unshare"
"$BIN" probe >/dev/null 2>&1 || skip "$BIN probe: no CUDA device"
# One GPU: the two hosts share it (SECOND_GPU=0), told apart by NCCL_HOSTID.
[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] || [ "${SECOND_GPU:-1}" = 0 ] ||
  skip "needs 2 GPUs (or SECOND_GPU=0, both hosts on GPU 0)"

netns() { ipc netns add "$1" || die "ip netns add $1"; MADE+=("$1"); ipc -n "$1" link set lo up; }
is_up() { [ "$(ipc netns exec "$1" cat "/sys/class/net/$2/operstate" 2>/dev/null)" = up ]; }
# wait_up NS IFNAME: a link without carrier is no interface NCCL uses.
wait_up() { poll 5 is_up "$1" "$2" || die "$2 in $1 never came up"; }
plug() {  # NS ADDR: a host on the switch, its cable cceth0
  netns "$1"
  ipc link add "p-$1" netns "$NS_SW" type veth peer name cceth0 netns "$1" || die "veth for $1"
  ipc -n "$NS_SW" link set "p-$1" master br0 up
  ipc -n "$1" addr add "$2/24" dev cceth0
  ipc -n "$1" link set cceth0 up
}

netns "$NS_SW"
ipc -n "$NS_SW" link add br0 type bridge stp_state 0 forward_delay 0 || skip "no bridge support"
ipc -n "$NS_SW" link set br0 up
plug "$NS_A" "$ADDR_A"
plug "$NS_B" "$ADDR_B"
plug "$NS_NAT" "$ADDR_NAT"
netns "$NS_C"
ipc link add ccin0 netns "$NS_NAT" type veth peer name eth0 netns "$NS_C" || die "veth into the container"
ipc -n "$NS_NAT" addr add 172.18.0.1/24 dev ccin0
ipc -n "$NS_NAT" link set ccin0 up
ipc -n "$NS_C" addr add "$ADDR_C/24" dev eth0
ipc -n "$NS_C" link set eth0 up
ipc -n "$NS_C" route add default via 172.18.0.1
ipc netns exec "$NS_NAT" sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward' || die "ip_forward"
ipc netns exec "$NS_NAT" env LD_LIBRARY_PATH="${NFT_LIB:-$ORIG_LD}" "$NFT" -f - <<'NFT' || skip "nft cannot make a NAT table here"
table ip ccnat {
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr 172.18.0.0/24 oifname "cceth0" masquerade
  }
}
NFT
for pair in "$NS_A cceth0" "$NS_B cceth0" "$NS_NAT cceth0" "$NS_NAT ccin0" "$NS_C eth0"; do
  wait_up $pair
done

# rank NAME NS HOST RANK GPU: one rank of gpu_failures init on its own host name.
rank() {
  local name=$1 ns=$2 host=$3 r=$4 gpu=$5
  timeout 120 env LD_LIBRARY_PATH="${IP_LIB:-$ORIG_LD}" "$IP" netns exec "$ns" \
    unshare --uts sh -c 'printf %s "$0" >/proc/sys/kernel/hostname && exec "$@"' "$host" \
    env LD_LIBRARY_PATH="$ORIG_LD" RANK="$r" WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR="$ADDR_A" \
    MASTER_PORT="$PORT" CUDA_VISIBLE_DEVICES="$gpu" NCCL_HOSTID="$host" NCCL_P2P_DISABLE=1 \
    NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 CC_TIMEOUT_MS=60000 CC_LOG_LEVEL=warn \
    "$BIN" init >"$WORK/$name" 2>&1 &
  PIDS+=($!)
  eval "PID_$name=$!"
}
check() {  # NAME FILE PATTERN
  if grep -q -- "$3" "$2"; then echo "   ok: $1"; else
    echo "   FAILED: $1: no '$3' in:"
    sed 's/^/   | /' "$2"
    bad=1
  fi
}
both() {  # wait for the two ranks
  local p
  for p in "$@"; do wait "$p" 2>/dev/null; done
}

nat() {
  rank n0 "$NS_A" cca-$S 0 0
  rank n1 "$NS_C" ccc-$S 1 "${SECOND_GPU:-1}"
  both "$PID_n0" "$PID_n1"
  for f in n0 n1; do
    check "$f: CC_ERR_SYSTEM before NCCL" "$WORK/$f" "^ERROR_AT [0-9]* CC_ERR_SYSTEM"
    check "$f: who cannot reach whom, where" "$WORK/$f" "rank 0 (host cca-$S, pid [0-9]*) cannot connect to rank 1 (host ccc-$S, pid [0-9]*) at $ADDR_C:"
    check "$f: the connect error" "$WORK/$f" "Network is unreachable"
    check "$f: the NAT" "$WORK/$f" "a NAT (a Docker bridge network, say) sits between host ccc-$S"
    check "$f: the fix" "$WORK/$f" "--network host"
  done
  local s0 s1 e0 e1 last later
  s0=$(awk '/^START_AT/{print $2; exit}' "$WORK/n0")
  s1=$(awk '/^START_AT/{print $2; exit}' "$WORK/n1")
  e0=$(awk '/^ERROR_AT/{print $2; exit}' "$WORK/n0")
  e1=$(awk '/^ERROR_AT/{print $2; exit}' "$WORK/n1")
  if [ -n "$s0" ] && [ -n "$s1" ] && [ -n "$e0" ] && [ -n "$e1" ]; then
    last=$((s0 > s1 ? s0 : s1))
    later=$((e0 > e1 ? e0 : e1))
    echo "PREFLIGHT_MS $(((later - last) / 1000000))"
    [ $(((later - last) / 1000000)) -le 2000 ] || { echo "   FAILED: more than 2 s"; bad=1; }
  else
    bad=1
  fi
}

healthy() {  # NAME NS HOST: rank 1 there, both succeed
  rank "${1}0" "$NS_A" cca-$S 0 0
  rank "${1}1" "$2" "$3" 1 "${SECOND_GPU:-1}"
  eval "both \$PID_${1}0 \$PID_${1}1"
  check "${1}: rank 0 inits and all-reduces" "$WORK/${1}0" "^OK init, all-reduce 3"
  check "${1}: rank 1 inits and all-reduces" "$WORK/${1}1" "^OK init, all-reduce 3"
}

for s in "${SCENARIOS[@]}"; do
  echo "== $s"
  case $s in
    nat) nat ;;
    host) healthy h "$NS_B" ccb-$S ;;
    routed)
      ipc -n "$NS_A" route add 172.18.0.0/24 via "$ADDR_NAT" 2>/dev/null
      healthy r "$NS_C" ccc-$S
      ;;
    *) echo "unknown scenario $s"; bad=1 ;;
  esac
done
[ $bad -eq 0 ] && echo "gpu_preflight_netns: all passed" || echo "gpu_preflight_netns: FAILED"
exit $bad
