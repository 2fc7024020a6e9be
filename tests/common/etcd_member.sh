# Sourced by scripts that need an etcd of their own: one member on
# 127.0.0.1, on free ports.

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_etcd_member ETCD DATA LOG: starts the program ETCD in the background,
# its data in DATA/m1 and its log in LOG; sets CLIENT (its client port) and
# ETCD_PID.
start_etcd_member() {
  local etcd=$1 data=$2 log=$3 peer
  CLIENT=$(free_port)
  peer=$(free_port)
  "$etcd" --name m1 --data-dir "$data/m1" \
    --listen-client-urls "http://127.0.0.1:$CLIENT" --advertise-client-urls "http://127.0.0.1:$CLIENT" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "m1=http://127.0.0.1:$peer" --log-level error >"$log" 2>&1 &
  ETCD_PID=$!
}
