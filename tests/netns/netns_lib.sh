# Shared by the netns tests: three hosts (rv, a, b) as network namespaces on
# a bridge that lives in a fourth, private namespace (sw), so the machine's
# own network is never touched. Each run has its own names (suffix = PID) and
# removes everything on exit. Sourced by a test script whose arguments are:
#   STORE_TOOL MEMBER CC_DOCTOR CC_RENDEZVOUS
# Host "rv" 198.18.0.1, "a" 198.18.0.2, "b" 198.18.0.3 (benchmark range,
# /24 on the bridge) and 2001:db8:cc::1..3/64 where IPv6 works (HAVE_IPV6); host a also has a management interface ccmgmt0
# (198.19.7.2/24, leading nowhere) carrying its default route, so a route lookup that picks
# the wrong interface shows.
set -u

STORE_TOOL=$1
MEMBER=$2
CC_DOCTOR=$3
CC_RENDEZVOUS=$4

S=$$
NS_SW=ccns-sw-$S
NS_RV=ccns-rv-$S
NS_A=ccns-a-$S
NS_B=ccns-b-$S
HOST_RV=ccrv-$S
HOST_A=cca-$S
HOST_B=ccb-$S
ADDR_RV=198.18.0.1
ADDR_A=198.18.0.2
ADDR_B=198.18.0.3
ADDR6_RV=2001:db8:cc::1  # documentation range, on the same bridge
ADDR6_A=2001:db8:cc::2
ADDR6_B=2001:db8:cc::3
RV_PORT=29500           # inside our own namespace: no other run can hold it
WORK=$(mktemp -d)
BG_PIDS=()
MADE_NS=()

note() { echo "[netns $S] $*"; }
skip() { echo "SKIP: $*"; exit 77; }
fail() {
  echo "FAIL: $*"
  for f in "$WORK"/*.out; do [ -f "$f" ] && { echo "--- $(basename "$f")"; cat "$f"; }; done
  exit 1
}
now_ms() { date +%s%3N; }
# After netns_setup: skipped (77) where the namespaces got no IPv6 address.
require_ipv6() {
  [ "$HAVE_IPV6" = 1 ] || skip "no IPv6 in the namespaces (an IPv6 address could not be added to cceth0)"
}
json() {  # JSON-FILE PYTHON-EXPRESSION: prints the expression's value
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

cleanup() {
  local pid ns
  for pid in "${BG_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${BG_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  for ns in "${MADE_NS[@]}"; do
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

require_netns() {
  [ "$(id -u)" = 0 ] || skip "the netns suite needs root (network namespaces and a bridge); run 'meson test --suite netns' as root, or in a container with --privileged"
  command -v ip >/dev/null 2>&1 || skip "no 'ip' command: install iproute2"
  command -v timeout >/dev/null 2>&1 || skip "no 'timeout' command: install coreutils"
  ip netns add "$NS_SW" 2>"$WORK/netns.err" || skip "cannot make a network namespace ($(cat "$WORK/netns.err")); the container needs CAP_SYS_ADMIN and CAP_NET_ADMIN"
  MADE_NS+=("$NS_SW")
}

# in NS CMD...: runs CMD inside namespace NS, bounded (20 s unless TMO is set).
in_ns() {
  local ns=$1
  shift
  timeout "${TMO:-20}" ip netns exec "$ns" "$@"
}

# connect_fails DEADLINE_MS WHY: a store client on host a connecting to the
# rendezvous within DEADLINE_MS must fail (else "connect succeeded WHY");
# notes and sets out (its message) and took (its milliseconds).
connect_fails() {
  local t0
  t0=$(now_ms)
  out=$(in_ns "$NS_A" "$STORE_TOOL" "$HOST_RV" "$RV_PORT" "$1" connect 2>&1) && fail "connect succeeded $2: $out"
  took=$(( $(now_ms) - t0 ))
  note "connect failed after $took ms: $out"
}

# bg NS NAME CMD...: starts CMD in NS in the background, output in $WORK/NAME.out.
bg() {
  local ns=$1 name=$2
  shift 2
  timeout 60 ip netns exec "$ns" "$@" >"$WORK/$name.out" 2>&1 &
  BG_PIDS+=($!)
}

# wait_line NAME PATTERN SECONDS: until $WORK/NAME.out has a line matching PATTERN.
wait_line() {
  local file=$WORK/$1.out pattern=$2 limit=$(( $3 * 10 )) i
  for ((i = 0; i < limit; i++)); do
    grep -qE "$pattern" "$file" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

make_host() {  # SHORT NS ADDR ADDR6: the switch port is p-SHORT
  local peer=p-$1 ns=$2 addr=$3 addr6=$4
  ip netns add "$ns" || fail "ip netns add $ns"
  MADE_NS+=("$ns")
  mkdir -p "/etc/netns/$ns"
  cat >"/etc/netns/$ns/hosts" <<HOSTS
127.0.0.1 localhost
::1 localhost
$ADDR_RV $HOST_RV
$ADDR_A $HOST_A
$ADDR_B $HOST_B
HOSTS
  # No name server: unknown names fail at once instead of waiting on DNS.
  echo "nameserver 127.0.0.1" >"/etc/netns/$ns/resolv.conf"
  ip -n "$ns" link set lo up
  ip link add "$peer" netns "$NS_SW" type veth peer name cceth0 netns "$ns" || skip "cannot make a veth pair (no veth support in this kernel?)"
  ip -n "$NS_SW" link set "$peer" master br0 up
  ip -n "$ns" addr add "$addr/24" dev cceth0
  ip -n "$ns" addr add "$addr6/64" dev cceth0 nodad 2>/dev/null || HAVE_IPV6=0
  ip -n "$ns" link set cceth0 up
}

# Makes the bridge and the three hosts.
netns_setup() {
  require_netns
  ip -n "$NS_SW" link set lo up
  ip -n "$NS_SW" link add br0 type bridge stp_state 0 forward_delay 0 || skip "cannot make a bridge in a namespace (no bridge support in this kernel?)"
  ip -n "$NS_SW" link set br0 up
  HAVE_IPV6=1
  make_host rv "$NS_RV" "$ADDR_RV" "$ADDR6_RV"
  make_host a "$NS_A" "$ADDR_A" "$ADDR6_A"
  make_host b "$NS_B" "$ADDR_B" "$ADDR6_B"
  # A veth whose far end leads nowhere (the dummy module may be absent).
  ip link add p-mgmt netns "$NS_SW" type veth peer name ccmgmt0 netns "$NS_A" || fail "veth ccmgmt0"
  ip -n "$NS_SW" link set p-mgmt up
  ip -n "$NS_A" addr add 198.19.7.2/24 dev ccmgmt0
  ip -n "$NS_A" link set ccmgmt0 up
  ip -n "$NS_A" route add default via 198.19.7.1 dev ccmgmt0
  note "hosts: $HOST_RV=$ADDR_RV ($NS_RV), $HOST_A=$ADDR_A ($NS_A), $HOST_B=$ADDR_B ($NS_B)"
}

# link_down HOST: unplugs that host's cable (its port on the bridge).
link_down() { ip -n "$NS_SW" link set "p-$1" down; }

# start_server [EXTRA ARGS]: the cc-rendezvous daemon in rv on RV_PORT, all
# interfaces; waits until it is ready.
start_server() { start_server_bind 0.0.0.0 "$@"; }
start_server_bind() {  # ADDR [EXTRA ARGS]
  local addr=$1
  shift
  bg "$NS_RV" server "$CC_RENDEZVOUS" --bind "$addr" --port "$RV_PORT" "$@"
  wait_line server "ready on port $RV_PORT" 10 || fail "cc-rendezvous in $NS_RV did not start"
}
