#!/bin/bash
# The store cases once more with TLS on: test_store's store cases (servers of
# cc_server_start, TLS from CC_TLS_CERT and CC_TLS_KEY) and test_store_retention
# (the cc-rendezvous daemon with --tls-cert and --tls-key, the embedded server,
# store_client processes), every client with CC_TLS_CA. First, a client
# without CC_TLS_CA must be refused, or the run would prove nothing.
#   store_tls.sh TEST_STORE TEST_STORE_RETENTION
# Skipped (77) without the openssl program.
set -u
TEST_STORE=$1
TEST_RETENTION=$2
command -v openssl >/dev/null || { echo "SKIP: no openssl program to make certificates with"; exit 77; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

make() { (cd "$WORK" && openssl "$@" >/dev/null 2>&1) || fail "openssl $*"; }
make req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
  -days 2 -subj /CN=ca
make req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
  -subj /CN=server
echo "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost" >"$WORK/server.ext"
make x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
  -extfile server.ext
chmod 600 "$WORK"/*.key

# SIGPIPE at its default action in the processes below, as cc-run gives its
# ranks: ignored (inherited so), a client dying of it would go unseen. bash
# cannot reset a signal ignored at its start; env can.
dfl=()
ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status 2>/dev/null)
if [ -n "$ign" ] && (((0x$ign >> 12) & 1)); then  # bit 12: SIGPIPE (13)
  env --default-signal=PIPE true 2>/dev/null ||
    { echo "SKIP: SIGPIPE is ignored here and env cannot reset it"; exit 77; }
  dfl=(env --default-signal=PIPE)
fi

for k in $(env | sed -n 's/^\(CC_TLS_[A-Z_]*\)=.*/\1/p'); do unset "$k"; done
export CC_TLS_CERT=$WORK/server.pem CC_TLS_KEY=$WORK/server.key

# The servers speak TLS: a client in clear is refused, naming TLS and the fix.
out=$("${dfl[@]}" "$TEST_STORE" 'store: set\, get*' 2>&1) &&
  fail "a client without CC_TLS_CA reached a server with CC_TLS_CERT: $out"
echo "$out" | grep -q "speaks TLS" || fail "the refusal does not name TLS: $out"
echo "$out" | grep -q "set CC_TLS_CA" || fail "the refusal does not give the fix: $out"

export CC_TLS_CA=$WORK/ca.pem
# Cases with stand-in servers or the library's own frame client (neither
# speaks TLS), and IPv6 (store-ipv6), stay with test_store's clear runs.
"${dfl[@]}" "$TEST_STORE" '"store: *" ~"*never answers*" ~"*empty key*" ~"*IPv6*"' || fail "test_store's store cases with TLS"
"${dfl[@]}" "$TEST_RETENTION" || fail "test_store_retention with TLS"
echo "PASS: the store cases with TLS"
