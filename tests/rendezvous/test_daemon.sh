#!/bin/bash
# cc-rendezvous as a user runs it: start, a taken port, token files, --help,
# SIGTERM stops it cleanly. Usage: test_daemon.sh PATH/TO/cc-rendezvous
set -u
bin=$1
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bin" --help | grep -q -- "--token-file" || fail "--help does not list --token-file"
"$bin" --version | grep -q "^cc-rendezvous [0-9]" || fail "--version"
"$bin" --no-such-flag 2>"$dir/bad" && fail "an unknown flag was accepted"
grep -q "unknown argument '--no-such-flag'" "$dir/bad" || fail "unknown flag words: $(cat "$dir/bad")"
for flag in --job-ttl --max-bytes-per-job --max-total-bytes --max-parked-bytes-per-connection \
    --max-parked-bytes-per-job --max-parked-bytes; do
  "$bin" --help | grep -q -- "$flag" || fail "--help does not list $flag"
done
"$bin" --job-ttl soon 2>"$dir/bad" && fail "--job-ttl soon was accepted"
grep -q -- "--job-ttl needs a duration such as 1h" "$dir/bad" || fail "--job-ttl words: $(cat "$dir/bad")"
"$bin" --max-bytes-per-job 12XB 2>"$dir/bad" && fail "--max-bytes-per-job 12XB was accepted"
grep -q -- "--max-bytes-per-job needs a size in bytes" "$dir/bad" || fail "size words: $(cat "$dir/bad")"

"$bin" --bind 127.0.0.1 --port 0 --log-level info --job-ttl 90m --max-total-bytes 2GiB 2>"$dir/log" &
pid=$!; pids+=("$pid")
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.*ready on port \([0-9]*\).*/\1/p' "$dir/log")
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || fail "the daemon never said it was ready: $(cat "$dir/log")"
grep -q "listening on 127.0.0.1:$port" "$dir/log" || fail "no 'listening on' line"
grep -q "has no token" "$dir/log" || fail "no warning about running without a token"
grep -q "a job's keys are kept for 5400000 ms after its last connection (--job-ttl)" "$dir/log" \
  || fail "no line saying how long a job's keys are kept"

# A taken port: one line naming the port and what to do, exit 1.
timeout 10 "$bin" --bind 127.0.0.1 --port "$port" 2>"$dir/taken" >/dev/null
rc=$?
[ "$rc" = 1 ] || fail "a taken port exited $rc, not 1"
grep -v "^\[" "$dir/taken" > "$dir/taken_lines"
[ "$(wc -l < "$dir/taken_lines")" = 1 ] || fail "a taken port printed more than one line: $(cat "$dir/taken")"
grep -q "cannot listen on 127.0.0.1:$port: address already in use.*--port" "$dir/taken_lines" \
  || fail "taken port words: $(cat "$dir/taken")"

# Token files.
timeout 10 "$bin" --port 0 --token-file "$dir/missing" 2>"$dir/tok1" && fail "a missing token file was accepted"
grep -q "cannot read the token file" "$dir/tok1" || fail "missing token file words: $(cat "$dir/tok1")"
printf 'secret\n' > "$dir/token"; chmod 644 "$dir/token"
"$bin" --bind 127.0.0.1 --port 0 --token-file "$dir/token" 2>"$dir/tok2" &
tpid=$!; pids+=("$tpid")
for _ in $(seq 100); do grep -q "ready on port" "$dir/tok2" && break; sleep 0.05; done
grep -q "can be read by other users" "$dir/tok2" || fail "no warning for a 644 token file: $(cat "$dir/tok2")"
grep -q "has no token" "$dir/tok2" && fail "a token was set, yet the daemon says it has none"
kill -TERM "$tpid"; wait "$tpid"

# SIGTERM: a clean stop with status 0.
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "the daemon did not stop within 5 s of SIGTERM"
wait "$pid"; rc=$?
[ "$rc" = 0 ] || fail "SIGTERM exit status $rc, not 0"
grep -q "stopped" "$dir/log" || fail "no 'stopped' line"
echo "ok"
