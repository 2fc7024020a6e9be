#!/usr/bin/env bash
# The rendezvous over TLS on a GPU machine: the seed examples and a killed
# rank's shrink with every cc connection encrypted (the server in cc-run or
# in rank 0, the node agent's uplink, the ranks), and the control that shows
# TLS was on: the same job whose ranks were given no CA is refused in the
# words that name CC_TLS_CA.
#
#   gpu_tls.sh BUILD [SCENARIO...]      (default: all of them)
#   scenarios: allreduce broadcast train_ddp (examples under cc-run),
#              by-hand (rank 0's embedded server, ranks started by hand),
#              shrink (gpu_recovery.sh shrink-cc-run), train-shrink,
#              clear-refused (the control)
#
# The certificates are made here with the openssl program: a CA and a server
# certificate for 127.0.0.1 and localhost. Ranks beyond the GPUs share GPU 0
# (CC_SHARE_GPU=1, cc-run --share-gpu). Exit 0 when every scenario passed,
# 77 with no GPU or no openssl, 1 otherwise.
set -u
BUILD=${1:?usage: gpu_tls.sh BUILD [SCENARIO...]}
shift
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -eq 0 ] &&
  SCENARIOS=(allreduce broadcast train_ddp by-hand shrink train-shrink clear-refused)
BIN=$BUILD/tests/gpu/gpu_recovery
CC_RUN=$BUILD/tools/cc-run
HERE=$(cd "$(dirname "$0")" && pwd)

. "$HERE/gpu_ranks_lib.sh" gpu_tls
command -v openssl >/dev/null || { echo "gpu_tls: no openssl program; skipped"; exit 77; }
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

SHARE=()
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -lt 2 ]; then
  SHARE=(--share-gpu)
  export CC_SHARE_GPU=1
fi

# A CA and the server's certificate, EC P-256, valid for two days.
certs() {
  local d=$WORK/certs
  mkdir -p "$d" && cd "$d" || return 1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
    -out ca.pem -days 2 -subj /CN=cc-test-ca &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key \
      -out server.csr -subj /CN=cc-test-server &&
    echo "subjectAltName=IP:127.0.0.1,DNS:localhost" >server.ext &&
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
      -days 2 -extfile server.ext &&
    chmod 600 ca.key server.key
  local rc=$?
  cd - >/dev/null || return 1
  return $rc
}
certs >"$WORK/certs.log" 2>&1 || { cat "$WORK/certs.log"; echo "gpu_tls: openssl failed"; exit 1; }
export CC_TLS_CERT=$WORK/certs/server.pem CC_TLS_KEY=$WORK/certs/server.key
export CC_TLS_CA=$WORK/certs/ca.pem

# example NAME PATTERN: the example under cc-run, PATTERN on both ranks.
example() {
  local out=$WORK/$1
  timeout --kill-after=10 180 "$CC_RUN" -n 2 "${SHARE[@]}" -- "$BUILD/examples/$1" >"$out" 2>&1 ||
    { echo "   FAILED: cc-run exited with $?"; sed 's/^/   | /' "$out" | tail -n 30; bad=1; return; }
  [ "$(grep -c -- "$2" "$out")" -ge 2 ] && echo "   ok: both ranks print '$2'" ||
    { echo "   FAILED: '$2' not on both ranks"; sed 's/^/   | /' "$out" | tail -n 30; bad=1; }
}

# Two ranks by hand, as on two hosts: rank 0's embedded server speaks TLS.
by_hand() {
  local port out=$WORK/by-hand
  port=$(free_port)
  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port LOCAL_RANK=1 \
    timeout 180 "$BUILD/examples/allreduce" >"$out.1" 2>&1 &
  local other=$!
  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port LOCAL_RANK=0 \
    timeout 180 "$BUILD/examples/allreduce" >"$out.0" 2>&1
  local rc0=$?
  wait $other
  local rc1=$?
  cat "$out.0" "$out.1" >"$out"
  [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ "$(grep -c "after all-reduce: 3.0" "$out")" -eq 2 ] &&
    echo "   ok: both ranks print 'after all-reduce: 3.0'" ||
    { echo "   FAILED: exits $rc0 and $rc1"; sed 's/^/   | /' "$out" | tail -n 30; bad=1; }
}

# The recovery scenario under the same TLS settings (inherited).
recovery() {
  local out=$WORK/recovery-$1
  timeout --kill-after=10 300 bash "$HERE/gpu_recovery.sh" "$BUILD" "$1" >"$out" 2>&1 &&
    grep -q "gpu_recovery: all passed" "$out" && echo "   ok: gpu_recovery $1 passed with TLS" ||
    { echo "   FAILED: gpu_recovery $1"; sed 's/^/   | /' "$out" | tail -n 40; bad=1; }
}

# The control: the server keeps its certificate, the clients have no CA and
# dial in clear; they are refused in the words that name the fix.
clear_refused() {
  local out=$WORK/clear-refused
  env -u CC_TLS_CA timeout --kill-after=10 120 "$CC_RUN" -n 2 "${SHARE[@]}" -- \
    "$BUILD/examples/allreduce" >"$out" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] && grep -q "speaks TLS and this client connected in clear text: set CC_TLS_CA" "$out" &&
    ! grep -q "after all-reduce" "$out"; then
    echo "   ok: refused (exit $rc), the message names CC_TLS_CA"
  else
    echo "   FAILED: exit $rc; want a refusal naming CC_TLS_CA"
    sed 's/^/   | /' "$out" | tail -n 30
    bad=1
  fi
}

for s in "${SCENARIOS[@]}"; do
  echo "== $s"
  case $s in
    allreduce) example allreduce "after all-reduce: 3.0" ;;
    broadcast) example broadcast "\[1.0, 2.0, 3.0\]" ;;
    train_ddp) example train_ddp "weights identical" ;;
    by-hand) by_hand ;;
    shrink) recovery shrink-cc-run ;;
    train-shrink) recovery train-shrink ;;
    clear-refused) clear_refused ;;
    *) echo "unknown scenario $s"; bad=1 ;;
  esac
done
[ $bad -eq 0 ] && echo "gpu_tls: all passed" || echo "gpu_tls: FAILED"
exit $bad
