# Shared by the tests of a communicator's start across namespace hosts
# (netns_preflight_*.sh). Builds on netns_lib.sh (its bridge, hosts and
# helpers) and adds: a NAT router with a private "container" behind it, a
# decoy interface, a firewall rule, and ranks of init_member (cc_comm_init's
# path up to NCCL, then a stand-in init) each on its own host name (a UTS
# namespace), as on real hosts, and the checks of their messages. Sourced with
# the arguments
#   STORE_TOOL MEMBER CC_DOCTOR CC_RENDEZVOUS INIT_MEMBER
# Extra hosts: "nat" (the router: 198.18.0.4 on the bridge, 172.18.0.1
# inside) and "c" (the container: 172.18.0.2, default route via the router,
# masqueraded on the way out, as Docker's default bridge network does).
. "$(dirname "$0")/netns_lib.sh"
. "$(dirname "$0")/../common/poll.sh"
INIT_MEMBER=$5

NS_NAT=ccns-nat-$S
NS_C=ccns-c-$S
HOST_C=ccc-$S
ADDR_NAT=198.18.0.4
ADDR_C=172.18.0.2

# The switch alone (no hosts yet): hosts come with make_host as needed.
start_switch() {
  require_netns
  command -v unshare >/dev/null 2>&1 || skip "no 'unshare' command: install util-linux"
  ip -n "$NS_SW" link set lo up
  ip -n "$NS_SW" link add br0 type bridge stp_state 0 forward_delay 0 || skip "cannot make a bridge in a namespace (no bridge support in this kernel?)"
  ip -n "$NS_SW" link set br0 up
  HAVE_IPV6=1
}

# A veth from host NS into the switch namespace that is not on the bridge:
# an interface that is up and running but leads nowhere.
# decoy NS IFNAME ADDR/PREFIX
# Its switch end is named by a counter: interface names hold 15 characters.
DECOYS=0
decoy() {
  local ns=$1 ifname=$2 addr=$3 peer=dk$DECOYS-$S
  DECOYS=$((DECOYS + 1))
  ip link add "$peer" netns "$NS_SW" type veth peer name "$ifname" netns "$ns" || fail "veth $ifname"
  ip -n "$NS_SW" link set "$peer" up
  ip -n "$ns" addr add "$addr" dev "$ifname"
  ip -n "$ns" link set "$ifname" up
}

# The router on the bridge and the container behind it, masqueraded.
nat_setup() {
  command -v nft >/dev/null 2>&1 || skip "no 'nft' command: install nftables"
  make_host nat "$NS_NAT" "$ADDR_NAT" 2001:db8:cc::4
  ip netns add "$NS_C" || fail "ip netns add $NS_C"
  MADE_NS+=("$NS_C")
  mkdir -p "/etc/netns/$NS_C"
  printf '127.0.0.1 localhost\n%s %s\n%s %s\n' "$ADDR_A" "$HOST_A" "$ADDR_C" "$HOST_C" >"/etc/netns/$NS_C/hosts"
  echo "nameserver 127.0.0.1" >"/etc/netns/$NS_C/resolv.conf"
  ip -n "$NS_C" link set lo up
  ip link add ccin0 netns "$NS_NAT" type veth peer name eth0 netns "$NS_C" || fail "veth into the container"
  ip -n "$NS_NAT" addr add 172.18.0.1/24 dev ccin0
  ip -n "$NS_NAT" link set ccin0 up
  ip -n "$NS_C" addr add "$ADDR_C/24" dev eth0
  ip -n "$NS_C" link set eth0 up
  ip -n "$NS_C" route add default via 172.18.0.1
  ip netns exec "$NS_NAT" sysctl -q -w net.ipv4.ip_forward=1 || fail "ip_forward in the router"
  ip netns exec "$NS_NAT" nft -f - <<'NFT' || skip "nft cannot make a NAT table here (no nf_tables NAT in this kernel?)"
table ip ccnat {
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr 172.18.0.0/24 oifname "cceth0" masquerade
  }
}
NFT
  wait_up "$NS_C" eth0
  wait_up "$NS_NAT" ccin0
}

# wait_up NS IFNAME: until the link's carrier is up (a link that is not yet
# running is no interface NCCL, nor cc's mirror of it, would use).
is_up() { [ "$(ip netns exec "$1" cat "/sys/class/net/$2/operstate" 2>/dev/null)" = up ]; }
wait_up() { poll 5 is_up "$1" "$2" || fail "$2 in $1 never came up"; }

# rank NAME NS HOSTNAME RANK WORLD MASTER JOB [VAR=VALUE...] -- ARGS...:
# one init_member in the background on its own host name; output in $WORK/NAME.out.
rank() {
  local name=$1 ns=$2 host=$3 r=$4 world=$5 master=$6 job=$7
  shift 7
  local vars=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  timeout 60 ip netns exec "$ns" unshare --uts sh -c 'printf %s "$0" >/proc/sys/kernel/hostname && exec "$@"' "$host" \
    env RANK="$r" WORLD_SIZE="$world" MASTER_ADDR="$master" MASTER_PORT="$RV_PORT" \
    CC_JOB_ID="$job" CC_TIMEOUT_MS=20000 CC_LOG_LEVEL=info "${vars[@]}" \
    "$INIT_MEMBER" "$@" >"$WORK/$name.out" 2>&1 &
  BG_PIDS+=($!)
  RANK_PIDS+=($!)
}

# finish_ranks: waits (bounded by each rank's own timeout) for the ranks started so far.
RANK_PIDS=()
finish_ranks() {
  local p
  for p in "${RANK_PIDS[@]}"; do wait "$p" 2>/dev/null; done
  RANK_PIDS=()
}

at_ms() { sed -nE "s/^$2 at_ms ([0-9]+).*/\1/p" "$WORK/$1.out" | head -1; }

# ends_within NAME FROM_MS LIMIT_MS WHAT: NAME printed ERROR within LIMIT_MS of FROM_MS.
ends_within() {
  local t
  t=$(at_ms "$1" ERROR)
  [ -n "$t" ] || fail "$1: no ERROR line ($4)"
  local d=$((t - $2))
  note "$1 stopped $d ms after $4"
  [ "$d" -le "$3" ] || fail "$1 stopped $d ms after $4, more than $3 ms"
}

# last_start NAME...: the latest START of the ranks (the last rank's
# arrival), waiting up to 15 s for each to print it; empty when one never did
# (the caller fails: this runs in a command substitution).
last_start() {
  local n t last=0
  for n in "$@"; do
    wait_line "$n" '^START at_ms' 15 || return 1
    t=$(at_ms "$n" START)
    [ -n "$t" ] || return 1
    [ "$t" -gt "$last" ] && last=$t
  done
  echo "$last"
}

# says NAME TEXT: the rank's output holds TEXT.
says() { grep -qF -- "$2" "$WORK/$1.out" || fail "$1 does not say '$2'"; }

# says_all TEXT NAME...: every rank's output holds TEXT.
says_all() {
  local text=$1 n
  shift
  for n in "$@"; do says "$n" "$text"; done
}

# ready NAME...: every rank got through its start (READY, not ERROR).
ready() {
  local n
  for n in "$@"; do
    wait_line "$n" '^(READY|ERROR)' 15
    says "$n" READY
  done
}

# refused NAME...: every rank failed (code 6) within 2 s of the last one's
# arrival, all with the same message.
refused() {
  local last n words first=""
  last=$(last_start "$@") || fail "a rank never started: $*"
  for n in "$@"; do
    wait_line "$n" '^ERROR' 15 || fail "$n never stopped"
    ends_within "$n" "$last" 2000 "the last rank's arrival"
    says "$n" "code 6: "
    words=$(sed -nE 's/^ERROR .*cc_comm_init cannot finish: //p' "$WORK/$n.out")
    [ -n "$first" ] || first=$words
    [ "$words" = "$first" ] || fail "the ranks got different words"
  done
  note "words: $first"
}
