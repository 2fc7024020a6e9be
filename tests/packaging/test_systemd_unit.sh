#!/bin/bash
# packaging/systemd: `systemd-analyze verify` passes the unit without a word
# (and speaks up for a broken copy, so this test can fail), then the unit's
# ExecStart= line, with the environment file's values and a credential
# directory as systemd would give them, starts the daemon, which serves its
# metrics, rereads its token on ExecReload's SIGHUP and stops on SIGTERM.
# Only loopback: the bind address and ports are replaced by 127.0.0.1 and 0.
# Usage: test_systemd_unit.sh UNIT ENVFILE PATH/TO/cc-rendezvous
set -u
unit=$1 envfile=$2 bin=$(readlink -f "$3")
fail() { echo "FAIL: $*"; exit 1; }
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze is not installed (Debian package systemd); the unit is not verified"
  exit 77
fi
dir=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

# verify checks that ExecStart='s program exists: point it at the one built.
sed "s|^ExecStart=/usr/local/bin/cc-rendezvous |ExecStart=$bin |" "$unit" > "$dir/cc-rendezvous.service"
grep -q "^ExecStart=$bin " "$dir/cc-rendezvous.service" || fail "no ExecStart=/usr/local/bin/cc-rendezvous line"
out=$(systemd-analyze verify --man=no "$dir/cc-rendezvous.service" 2>&1); rc=$?
[ "$rc" = 0 ] || fail "systemd-analyze verify exited $rc: $out"
[ -z "$out" ] || fail "systemd-analyze verify had words for the unit: $out"
sed 's/^NoNewPrivileges=/NoNewPrivilege=/' "$dir/cc-rendezvous.service" > "$dir/broken.service"
out=$(systemd-analyze verify --man=no "$dir/broken.service" 2>&1)
grep -q "Unknown key 'NoNewPrivilege'" <<<"$out" || fail "verify said nothing of a misspelt key: $out"
for key in DynamicUser=yes "LoadCredential=token:" ProtectSystem=strict NoNewPrivileges=yes \
           Restart=on-failure "EnvironmentFile=-/etc/default/cc-rendezvous" "ExecReload=/bin/kill -HUP"; do
  grep -q "^$key" "$unit" || fail "the unit has no $key"
done

# ExecStart= as systemd runs it: %d is the credential directory, ${VAR} a
# variable of the environment file, $VAR that variable split at spaces.
mkdir -m 700 "$dir/credentials"
printf 'first-token\n' > "$dir/credentials/token"; chmod 600 "$dir/credentials/token"
set -a
# shellcheck disable=SC1090
. "$envfile"
set +a
[ -n "${RENDEZVOUS_BIND:-}" ] && [ -n "${RENDEZVOUS_PORT:-}" ] || fail "the environment file sets no address"
RENDEZVOUS_BIND=127.0.0.1 RENDEZVOUS_PORT=0
RENDEZVOUS_OPTIONS=$(sed -E 's/(--metrics [0-9.]+):[0-9]+/\1:0/' <<<"$RENDEZVOUS_OPTIONS")
line=$(sed -n "s|^ExecStart=||p" "$dir/cc-rendezvous.service")
line=${line//%d/$dir/credentials}
eval "set -- $line"
"$@" > "$dir/log" 2>&1 &
pid=$!
for _ in $(seq 200); do grep -q "ready on port" "$dir/log" && break; sleep 0.05; done
grep -q "ready on port" "$dir/log" || fail "the unit's command line did not start the daemon: $(cat "$dir/log")"
grep -q "has no token" "$dir/log" && fail "the daemon runs without the credential's token"
metrics=$(sed -n 's|.*metrics on http://\([^/]*\)/metrics.*|\1|p' "$dir/log")
[ -n "$metrics" ] || fail "the environment file's --metrics did not start the endpoint: $(cat "$dir/log")"
python3 - "$metrics" <<'PY' || fail "no metrics at http://$metrics/metrics"
import sys, urllib.request
body = urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=10).read().decode()
assert 'cc_rendezvous_build_info{' in body, body[:200]
PY
printf 'second-token\n' > "$dir/credentials/token"
kill -HUP "$pid"   # ExecReload=
for _ in $(seq 100); do grep -q "token reloaded" "$dir/log" && break; sleep 0.05; done
grep -q "token reloaded from $dir/credentials/token" "$dir/log" || fail "SIGHUP did not reload the token: $(cat "$dir/log")"
kill -TERM "$pid"
wait "$pid"; rc=$?
pid=""
[ "$rc" = 0 ] || fail "SIGTERM: exit status $rc"
echo "ok: systemd-analyze verify is silent on the unit; its command line serves, reloads and stops"
