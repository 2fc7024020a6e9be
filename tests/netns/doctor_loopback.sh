#!/bin/bash
# cc-doctor on loopback (no root): argument errors, and what answers at a
# port: nothing, another program, a silent program, a cc rendezvous.
#   doctor_loopback.sh CC_DOCTOR FAKE_LISTENER CC_RENDEZVOUS
set -u
DOCTOR=$1
FAKE=$2
SERVER=$3
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
doctor() { timeout 20 "$DOCTOR" "$@"; }
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

start() {  # NAME CMD...: starts CMD, sets PORT from its "listening PORT" or "ready on port PORT" line
  local name=$1 i
  shift
  timeout 60 "$@" >"$WORK/$name.out" 2>&1 &
  PIDS+=($!)
  for ((i = 0; i < 100; i++)); do
    PORT=$(sed -nE 's/^listening ([0-9]+)$/\1/p; s/.*ready on port ([0-9]+).*/\1/p' "$WORK/$name.out")
    [ -n "$PORT" ] && return 0
    sleep 0.1
  done
  fail "$name did not start: $(cat "$WORK/$name.out")"
}

doctor --no-such-flag >/dev/null 2>&1; [ $? = 2 ] || fail "an unknown flag must exit 2"
out=$(doctor --master-port abc 2>&1); [ $? = 2 ] || fail "a bad port must exit 2"
echo "$out" | grep -q "not an integer" || fail "bad port words: $out"
doctor --help | grep -q "usage: cc-doctor" || fail "--help"

# Nothing set: runs, says what was skipped, exits 0.
out=$(env -u MASTER_ADDR -u CC_MASTER_ADDR "$DOCTOR" 2>&1) || fail "plain run exited $?"
echo "$out" | grep -q "MASTER_ADDR is not set" || fail "no MASTER_ADDR note: $out"
echo "$out" | grep -q "== GPUs ==" || fail "no GPU section: $out"
echo "$out" | grep -q "/dev/shm" || fail "no /dev/shm line: $out"
# One line on NCCL's own bootstrap, with the version ncclGetVersion gave and
# whether that library has ncclSetEncryption (NCCL 2.32 added it).
nccl=$(echo "$out" | sed -nE 's/^  NCCL    ([0-9]+\.[0-9]+\.[0-9]+)$/\1/p')
[ -n "$nccl" ] || fail "no NCCL version line: $out"
[ "$(echo "$out" | grep -c "NCCL $nccl here: ")" = 1 ] || fail "no single bootstrap line for NCCL $nccl: $out"
line=$(echo "$out" | grep "NCCL $nccl here: ")
case "$nccl" in
  2.[0-9].* | 2.[12][0-9].* | 2.3[01].*)
    echo "$line" | grep -q "it has no ncclSetEncryption, so NCCL's bootstrap and data go in clear" || fail "bootstrap line: $line"
    echo "$line" | grep -q "keep NCCL's network private" || fail "no fix in the bootstrap line: $line" ;;
  *)
    echo "$line" | grep -q "it has ncclSetEncryption" || fail "bootstrap line: $line" ;;
esac

# Nothing listens (port 1 on loopback).
json=$(doctor --json --master-addr 127.0.0.1 --master-port 1) || fail "exited $?"
[ "$(echo "$json" | field 'd["master"]["answer"]')" = refused ] || fail "port 1: $json"
[ "$(echo "$json" | field 'd["master"]["route"]["source_address"]')" = 127.0.0.1 ] || fail "route: $json"
if [ "$(echo "$json" | field 'd["cuda"]["device_count"]')" = 0 ]; then
  echo "$json" | field '[f["what"] for f in d["findings"]]' | grep -q "no CUDA device visible" || fail "no-GPU finding: $json"
fi

# Another program: answers with HTTP.
start http "$FAKE" http
out=$(doctor --master-addr 127.0.0.1 --master-port "$PORT") || fail "exited $?"
echo "$out" | grep -q "another program holds the port" || fail "http program: $out"
echo "$out" | grep -q "not a cc frame" || fail "http program detail: $out"

# A program that accepts and says nothing.
start silent "$FAKE" silent
t0=$(date +%s%3N)
json=$(doctor --json --master-addr 127.0.0.1 --master-port "$PORT" --timeout-ms 500) || fail "exited $?"
took=$(( $(date +%s%3N) - t0 ))
[ "$(echo "$json" | field 'd["master"]["answer"]')" = silent ] || fail "silent program: $json"
[ "$took" -lt 5000 ] || fail "silent probe took $took ms with --timeout-ms 500"

# A cc rendezvous, found through MASTER_ADDR and MASTER_PORT.
start rv "$SERVER" --bind 127.0.0.1 --port 0
out=$(env -u CC_MASTER_ADDR -u CC_MASTER_PORT MASTER_ADDR=localhost MASTER_PORT=$PORT timeout 20 "$DOCTOR") || fail "exited $?"
echo "$out" | grep -q "is reachable: a cc rendezvous answers: cc-rendezvous .* (no token required)" || fail "rendezvous: $out"
echo "$out" | grep -q "from MASTER_ADDR" || fail "MASTER_ADDR not named as the source: $out"

# The same server as tcp://host:port: the port is the address's, MASTER_PORT unread.
out=$(env -u CC_MASTER_ADDR -u CC_MASTER_PORT MASTER_ADDR=tcp://127.0.0.1:$PORT MASTER_PORT=1 timeout 20 "$DOCTOR") || fail "exited $?"
echo "$out" | grep -q "127.0.0.1:$PORT is reachable: a cc rendezvous answers" || fail "tcp:// rendezvous: $out"
echo "$out" | grep -qx "  tcp://127.0.0.1:$PORT  (from MASTER_ADDR)" || fail "tcp:// address line: $out"

# A host with its port in it: an error in the address's message.
out=$(doctor --master-addr "127.0.0.1:$PORT") || fail "exited $?"
echo "$out" | grep -q "has a port in it: write tcp://127.0.0.1:$PORT" || fail "host:port: $out"

# One that requires a token, asked without one: a warning with the fix.
echo "s3cret-token-for-the-doctor-test" >"$WORK/token"
chmod 600 "$WORK/token"
start rv_token "$SERVER" --bind 127.0.0.1 --port 0 --token-file "$WORK/token"
json=$(env -u CC_RENDEZVOUS_TOKEN -u CC_RENDEZVOUS_TOKEN_FILE timeout 20 "$DOCTOR" --json --master-addr 127.0.0.1 --master-port "$PORT") || fail "exited $?"
[ "$(echo "$json" | field 'd["master"]["auth_required"]')" = True ] || fail "token server: $json"
echo "$json" | field '[f["fix"] for f in d["findings"]]' | grep -q "set CC_RENDEZVOUS_TOKEN" || fail "no token fix: $json"
echo "OK"
