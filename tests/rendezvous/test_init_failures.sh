#!/usr/bin/env bash
# Init failures spread, without a GPU: ranks are init_member processes
# (cc_comm_init's path up to NCCL, then a stand-in NCCL init that listens to
# the rendezvous) on loopback. A rank whose init fails, a rank killed during
# init, and one killed while joining (before the id is handed out): every
# other rank's init ends within a second, naming the rank (host, pid) and, for
# a failed init, its own message. Through rank 0's embedded server, the
# cc-rendezvous daemon and cc-run.
#
#   test_init_failures.sh INIT_MEMBER CC_RENDEZVOUS CC_RUN
set -u
. "$(dirname "$0")/../common/poll.sh"
MEMBER=$1
DAEMON=$2
CC_RUN=$3
WORK=$(mktemp -d)
PIDS=()
HOST=$(hostname)
bad=0

cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

note() { echo "[init-failures] $*"; }
fail() {
  echo "FAIL: $*"
  local f
  for f in "$WORK"/*.out; do [ -f "$f" ] && { echo "--- $(basename "$f")"; cat "$f"; }; done
  bad=1
}
now_ms() { date +%s%3N; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

# rank NAME RANK WORLD PORT JOB [VAR=VALUE...] -- ARGS: one rank in the
# background; env execs the member, so PID_NAME is the member's own pid (the
# pid its message names, the one the kills hit). Cleanup kills what is left.
rank() {
  local name=$1 r=$2 world=$3 port=$4 job=$5
  shift 5
  local vars=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  env RANK="$r" WORLD_SIZE="$world" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" CC_JOB_ID="$job" \
    CC_TIMEOUT_MS=20000 CC_LOG_LEVEL=error "${vars[@]}" "$MEMBER" "$@" \
    >"$WORK/$name.out" 2>&1 &
  PIDS+=($!)
  eval "PID_$name=$!"
}
# wait_line NAME PATTERN SECONDS
wait_line() { poll "$3" grep -qsE -- "$2" "$WORK/$1.out"; }
at_ms() { sed -nE "s/^.*$2 at_ms ([0-9]+).*/\1/p" "$WORK/$1.out" | head -1; }
# within NAME FROM_MS LIMIT_MS WHAT: NAME's ERROR came within LIMIT_MS of FROM_MS.
within() {
  local t
  t=$(at_ms "$1" ERROR)
  [ -n "$t" ] || { fail "$1: no ERROR line ($4)"; return; }
  local d=$((t - $2))
  note "$1: error $d ms after $4"
  [ "$d" -le "$3" ] || fail "$1: error $d ms after $4, more than $3 ms"
}
expect() {  # expect NAME PATTERN
  grep -qF -- "$2" "$WORK/$1.out" || fail "$1: no '$2'"
}

# 1. Embedded server: rank 1's init fails; rank 0 (which hosts the server)
# stops within a second with rank 1's error message.
port=$(free_port)
rank e0 0 2 "$port" emb -- hang
rank e1 1 2 "$port" emb -- fail "Failed to initialize any NET plugin"
wait_line e0 ERROR 10 || fail "embedded: rank 0 never stopped"
wait_line e1 ERROR 10 || fail "embedded: rank 1 never failed"
pid1=$PID_e1
within e0 "$(at_ms e1 ERROR)" 1000 "rank 1's failure"
expect e0 "code 11: rank 0 (host $HOST"
expect e0 "rank 1 (host $HOST, pid $pid1) could not start"
expect e0 "Failed to initialize any NET plugin"
expect e1 "code 5: ncclCommInitRankConfig failed on rank 1"

# 2. Embedded server: rank 0 itself fails; rank 1 hears rank 0's error message, not
# only that the server went away.
port=$(free_port)
rank f0 0 2 "$port" emb0 -- fail "rank zero's own trouble"
rank f1 1 2 "$port" emb0 -- hang
wait_line f1 ERROR 10 || fail "embedded, rank 0 fails: rank 1 never stopped"
within f1 "$(at_ms f0 ERROR)" 1000 "rank 0's failure"
expect f1 "rank 0 (host $HOST, pid $PID_f0) could not start"
expect f1 "rank zero's own trouble"

# 3. The daemon: rank 2 is killed during its init; ranks 0 and 1 stop within
# a second, naming it.
port=$(free_port)
"$DAEMON" --bind 127.0.0.1 --port "$port" --log-level warn >"$WORK/daemon.out" 2>&1 &
PIDS+=($!)
daemon=$!
for i in 0 1 2; do rank "k$i" "$i" 3 "$port" killed CC_RENDEZVOUS=external -- hang; done
for i in 0 1 2; do wait_line "k$i" STARTED 10 || fail "daemon: rank $i did not start"; done
victim=$PID_k2
t_kill=$(now_ms)
kill -9 "$victim"
for i in 0 1; do
  wait_line "k$i" ERROR 10 || fail "daemon: rank $i never stopped after the kill"
  within "k$i" "$t_kill" 1000 "the SIGKILL of rank 2"
  expect "k$i" "rank 2 (host $HOST, pid $victim) was lost during init"
done

# 4. The daemon: rank 1 is killed between its join and the id (rank 2 has
# not come yet); rank 0 stops within a second, naming it. (Once the last of
# them has gone the job's generations are forgotten, so a rank arriving later
# starts afresh: the server core's unit test covers late joiners of a failed
# generation that is still known.)
for i in 0 1; do rank "j$i" "$i" 3 "$port" joining CC_RENDEZVOUS=external -- hang; done
for i in 0 1; do wait_line "j$i" START 10 || fail "joining: rank $i did not begin"; done
sleep 0.5  # both joins are at the server and wait for rank 2
victim=$PID_j1
t_kill=$(now_ms)
kill -9 "$victim"
wait_line j0 ERROR 10 || fail "joining: rank 0 never stopped"
within j0 "$t_kill" 1000 "the SIGKILL of rank 1 while joining"
expect j0 "code 11: "
expect j0 "rank 1 (host $HOST, pid $victim) was lost while joining communicator 1 of job 'joining'"
kill "$daemon" 2>/dev/null

# 5. cc-run: one rank's failure reaches the other through cc-run's server.
"$CC_RUN" -n 2 --timeout-ms 20000 -- env INIT_FAIL_RANK=1 CC_LOG_LEVEL=error "$MEMBER" fail \
  "cuda out of memory on this one" >"$WORK/ccrun.out" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "cc-run: exit status 0 for a failed init"
grep -E '^\[rank 0\] ERROR' "$WORK/ccrun.out" | grep -q "rank 1 (host $HOST, pid [0-9]*) could not start" ||
  fail "cc-run: rank 0 did not name rank 1"
grep -E '^\[rank 0\] ERROR' "$WORK/ccrun.out" | grep -q "cuda out of memory on this one" ||
  fail "cc-run: rank 0 did not carry rank 1's words"
t0=$(sed -nE 's/^\[rank 0\] ERROR at_ms ([0-9]+).*/\1/p' "$WORK/ccrun.out")
t1=$(sed -nE 's/^\[rank 1\] ERROR at_ms ([0-9]+).*/\1/p' "$WORK/ccrun.out")
if [ -n "$t0" ] && [ -n "$t1" ]; then
  note "cc-run: rank 0 stopped $((t0 - t1)) ms after rank 1 failed"
  [ $((t0 - t1)) -le 1000 ] || fail "cc-run: rank 0 stopped $((t0 - t1)) ms after rank 1"
fi

if [ $bad -ne 0 ]; then
  echo "init-failures: FAILED"
  exit 1
fi
echo "init-failures: all passed"
