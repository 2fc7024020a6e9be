#!/usr/bin/env bash
# The failure scenarios on a GPU machine: ranks started by hand (RANK, WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT; rank 0 hosts the embedded server), one of them
# killed or desynchronised, and the message of the survivor checked.
#
#   gpu_failures.sh BINARY [SCENARIO...]     (default: all of them)
#   scenarios: kill-loop kill-small kill-oneshot kill-twoshot skip skip-small
#              skip-oneshot skip-twoshot abort-threads init-missing status
#              init-fail init-nosock, and with 4 or 8 ranks: kill-loop-4
#              kill-loop-8 init-fail-4 (ranks beyond the GPUs: CC_SHARE_GPU=1)
#   (-small: 1 KiB calls on cc's LL kernel; -oneshot, -twoshot: 4 MiB calls
#   on cc's one-shot or two-shot kernel, forced by CC_FAST_ALLREDUCE_PLAN)
#
# Exit 0 when every scenario passed, 77 with no GPU, 1 otherwise. kill-loop
# prints "DETECT_MS <ms>": from SIGKILL of rank 1 to rank 0's error
# (scripts/failure-bench.sh runs it repeatedly). status asks rank 0's embedded
# server, with `cc-rendezvous status` (CC_RENDEZVOUS_BIN, else the build's
# tools/cc-rendezvous beside BINARY's tests/gpu), for the looping ranks: both
# members with their pids and completed ops, then rank 1 behind once it is
# SIGSTOPped. init-fail: rank 1's NCCL init
# fails (NCCL_NET names no network); rank 0, waiting in NCCL's init, stops
# within 1 s naming rank 1 (host, pid) with rank 1's error message; prints
# "SPREAD_MS <ms>". init-nosock: rank 1's NCCL_SOCKET_IFNAME matches no
# interface, found before NCCL starts; the same message reaches rank 0.
set -u
BIN=${1:?usage: gpu_failures.sh BINARY [SCENARIO...]}
shift
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -eq 0 ] && SCENARIOS=(kill-loop kill-small kill-oneshot kill-twoshot skip skip-small
                                         skip-oneshot skip-twoshot abort-threads init-missing status
                                         init-fail init-nosock)

. "$(dirname "$0")/gpu_ranks_lib.sh" gpu_failures
. "$(dirname "$0")/../common/poll.sh"
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export CC_LOG_LEVEL=${CC_LOG_LEVEL:-warn}

# start RANK WORLD MODE [VAR=VALUE...]: one rank in the background, output in $WORK/rRANK.
start() {
  local rank=$1 world=$2 mode=$3
  shift 3
  env RANK=$rank WORLD_SIZE=$world LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "$@" \
    "$BIN" "$mode" >"$WORK/r$rank" 2>&1 &
  eval "PID$rank=$!"
}
# wait_for FILE PATTERN SECONDS
wait_for() { poll "$3" grep -qs -- "$2" "$1"; }
# wait_pid PID SECONDS: its exit status, or 124 after SECONDS (then it is killed).
wait_pid() {
  local i
  for ((i = 0; i < $2 * 20; i++)); do
    if ! kill -0 "$1" 2>/dev/null; then
      wait "$1"
      return $?
    fi
    sleep 0.05
  done
  kill -9 "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  return 124
}
show() { echo "   rank $1: $(grep -E '^(ERROR_AT|OK|FAIL)' "$WORK/r$1" | head -3)"; }
# error_at FILE: the time of the rank's failure (ERROR_AT's ns), empty if none.
error_at() { awk '/^ERROR_AT/{print $2; exit}' "$1"; }
# wait_survivor RANK SECONDS STATUS [WHY]: waits for rank RANK (wait_pid),
# shows its message, fails unless it exited with STATUS (saying ", not STATUS
# (WHY)" when WHY is given) and checks that it heard of a peer's failure.
wait_survivor() {
  local r=$1 pid_var=PID$1 rc
  wait_pid "${!pid_var}" "$2"
  rc=$?
  show "$r"
  [ $rc -eq "$3" ] || { echo "   FAILED: rank $r exited with $rc${4:+, not $3 ($4)}"; bad=1; }
  check "rank $r: CC_ERR_PEER_FAILED" "$WORK/r$r" "^ERROR_AT [0-9]* CC_ERR_PEER_FAILED"
}

kill_loop() {  # kill_loop [VAR=VALUE...]: every rank gets the variables; WORLD ranks (default 2)
  local world=${WORLD:-2} r
  PORT=$(free_port)
  for ((r = 0; r < world; r++)); do start $r "$world" kill-loop "$@"; done
  for ((r = world - 1; r >= 0; r--)); do
    if ! wait_for "$WORK/r$r" "LOOPING $r" 45; then
      echo "   FAILED: rank $r did not start looping"; sed 's/^/   | /' "$WORK/r$r"; bad=1; return
    fi
  done
  sleep 0.5
  kill -9 "$PID1"
  local killed=$(now_ns) worst=0
  for ((r = 0; r < world; r++)); do
    [ $r -eq 1 ] && continue
    wait_survivor $r 30 0
    check "rank $r names rank 1 and its pid" "$WORK/r$r" "rank 1 (host [^ ]* pid $PID1)"
    local at
    at=$(error_at "$WORK/r$r")
    if [ -n "$at" ]; then
      local ms=$(((at - killed) / 1000000))
      [ "$ms" -gt "$worst" ] && worst=$ms
      [ "$world" -eq 2 ] && echo "DETECT_MS $ms"
      [ "$ms" -le 2000 ] || { echo "   FAILED: rank $r heard of it after $ms ms (> 2000)"; bad=1; }
    fi
  done
  wait "$PID1" 2>/dev/null
  [ "$world" -gt 2 ] && echo "DETECT_ALL_MS $worst (the last of $((world - 1)) survivors)"
}

skip() {  # skip [COUNT [PLAN]]: 256 floats spin in cc's LL kernel on rank 0
  local count=${1:-4194304} plan=${2:-}
  PORT=$(free_port)
  start 0 2 skip CC_TIMEOUT_MS=3000 LOOP_COUNT=$count CC_FAST_ALLREDUCE_PLAN=$plan
  start 1 2 skip CC_TIMEOUT_MS=3000 LOOP_COUNT=$count CC_FAST_ALLREDUCE_PLAN=$plan
  wait_pid "$PID0" 60
  local rc0=$?
  wait_pid "$PID1" 60
  show 0
  [ $rc0 -eq 0 ] || { echo "   FAILED: rank 0 exited with $rc0"; bad=1; }
  check "CC_ERR_TIMEOUT" "$WORK/r0" "ERROR_AT [0-9]* CC_ERR_TIMEOUT"
  check "the op rank 0 waits in" "$WORK/r0" "waits in op #20 cc_allreduce $count x FLOAT32"
  check "names the laggard" "$WORK/r0" "rank 1 (host [^ ]* pid $PID1) last completed op #19"
}

abort_threads() {
  PORT=$(free_port)
  start 0 2 abort-threads
  start 1 2 abort-threads
  wait_pid "$PID0" 120
  local rc0=$?
  wait_pid "$PID1" 120
  local rc1=$?
  show 0
  show 1
  [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || { echo "   FAILED: exit $rc0 / $rc1"; bad=1; }
  check "rank 0 aborted cleanly" "$WORK/r0" "^OK rank 0: CC_ERR_"
  check "rank 1 aborted cleanly" "$WORK/r1" "^OK rank 1: CC_ERR_"
}

init_missing() {
  PORT=$(free_port)
  start 0 2 init-missing CC_TIMEOUT_MS=3000
  wait_pid "$PID0" 60
  local rc=$?
  show 0
  [ $rc -eq 0 ] || { echo "   FAILED: rank 0 exited with $rc"; bad=1; }
  check "names the missing rank" "$WORK/r0" "rank 1 of 2 never joined"
  local ms
  ms=$(awk '/^OK after/{print $3; exit}' "$WORK/r0")
  [ -n "$ms" ] && { [ "$ms" -ge 2500 ] && [ "$ms" -le 10000 ] || { echo "   FAILED: $ms ms, want about 3000"; bad=1; }; }
}

# status_of_a_running_job: `cc-rendezvous status` against rank 0's embedded
# server while the two ranks run collectives, then with rank 1 stopped.
status_of_a_running_job() {
  local tool=${CC_RENDEZVOUS_BIN:-$(dirname "$BIN")/../../tools/cc-rendezvous}
  [ -x "$tool" ] || { echo "   FAILED: no cc-rendezvous at $tool (set CC_RENDEZVOUS_BIN)"; bad=1; return; }
  PORT=$(free_port)
  # A 20 s heartbeat window: the stopped rank shows as behind well before it is dropped.
  start 0 2 kill-loop CC_HEARTBEAT_MISSES=20
  start 1 2 kill-loop CC_HEARTBEAT_MISSES=20
  if ! wait_for "$WORK/r1" "LOOPING 1" 45 || ! wait_for "$WORK/r0" "LOOPING 0" 30; then
    echo "   FAILED: the ranks did not start looping"; sed 's/^/   | /' "$WORK/r0" "$WORK/r1"; bad=1; return
  fi
  # poll SECONDS WANT: asks the server until check_status WANT passes.
  poll() {
    local i
    for ((i = 0; i < $1 * 5; i++)); do
      "$tool" status --json --addr 127.0.0.1 --port "$PORT" >"$WORK/status.json" 2>"$WORK/status.err" &&
        python3 - "$WORK/status.json" "$2" "$PID0" "$PID1" <<'PY' && return 0
import json, sys
doc, want, pid0, pid1 = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
gens = [g for j in doc["jobs"] for g in j["communicators"] if g["state"] == "complete"]
members = {m["rank"]: m for g in gens[:1] for m in g["members"]}
ok = set(members) == {0, 1} and members[0]["pid"] == pid0 and members[1]["pid"] == pid1
ok = ok and all(m["state"] == "member" and m["last_completed"] > 0 for m in members.values())
if want == "behind":
    ok = ok and (members[1]["behind"] or "").startswith("silent for") and members[0]["behind"] is None
sys.exit(0 if ok else 1)
PY
      sleep 0.2
    done
    return 1
  }
  if poll 15 running; then
    echo "   ok: both ranks are members with their pids and completed ops"
  else
    echo "   FAILED: the status of the running job:"; sed 's/^/   | /' "$WORK/status.json" "$WORK/status.err"; bad=1
  fi
  kill -STOP "$PID1"
  if poll 8 behind; then
    echo "   ok: the stopped rank 1 is behind"
    "$tool" status --addr 127.0.0.1 --port "$PORT" | sed 's/^/   | /'
  else
    echo "   FAILED: rank 1 stopped, not shown behind:"; sed 's/^/   | /' "$WORK/status.json"; bad=1
  fi
  kill -9 "$PID1"
  wait_pid "$PID0" 30
  local rc=$?
  wait "$PID1" 2>/dev/null
  [ $rc -eq 0 ] || { echo "   FAILED: rank 0 exited with $rc"; bad=1; }
  check "rank 0 hears of rank 1" "$WORK/r0" "ERROR_AT [0-9]* CC_ERR_PEER_FAILED"
}

# init_spread WORDS [VAR=VALUE...]: rank 1 starts with the variables and
# fails its init with WORDS; rank 0 must stop within 1 s, naming it.
init_spread() {  # WORLD ranks (default 2): rank 1 fails; every other one must say so
  local words=$1 world=${WORLD:-2} r
  shift
  PORT=$(free_port)
  for ((r = 0; r < world; r++)); do
    if [ $r -eq 1 ]; then start 1 "$world" init CC_TIMEOUT_MS=60000 "$@"; else start $r "$world" init CC_TIMEOUT_MS=60000; fi
  done
  wait_pid "$PID1" 90
  show 1
  check "rank 1 failed with its own words" "$WORK/r1" "^ERROR_AT [0-9]* CC_ERR_[A-Z_]*.*$words"
  local at1
  at1=$(error_at "$WORK/r1")
  for ((r = 0; r < world; r++)); do
    [ $r -eq 1 ] && continue
    wait_survivor $r 90 3 "a failed init"
    check "rank $r names rank 1, host and pid" "$WORK/r$r" "rank 1 (host [^ ]* pid $PID1) could not start"
    check "rank $r carries rank 1's words" "$WORK/r$r" "Its words: .*$words"
    local at
    at=$(error_at "$WORK/r$r")
    if [ -n "$at" ] && [ -n "$at1" ]; then
      local ms=$(((at - at1) / 1000000))
      echo "SPREAD_MS $ms (rank $r)"
      [ "$ms" -le 1000 ] || { echo "   FAILED: rank $r stopped $ms ms after rank 1 (> 1000)"; bad=1; }
    fi
  done
}

for s in "${SCENARIOS[@]}"; do
  echo "== $s"
  case $s in
    kill-loop) kill_loop ;;
    kill-loop-4) WORLD=4 kill_loop ;;
    kill-loop-8) WORLD=8 kill_loop ;;
    kill-small) kill_loop LOOP_COUNT=256 ;;
    kill-oneshot) kill_loop LOOP_COUNT=1048576 CC_FAST_ALLREDUCE_PLAN=oneshot:8M ;;
    kill-twoshot) kill_loop LOOP_COUNT=1048576 CC_FAST_ALLREDUCE_PLAN=twoshot:8M ;;
    skip) skip ;;
    skip-small) skip 256 ;;
    skip-oneshot) skip 1048576 oneshot:8M ;;
    skip-twoshot) skip 1048576 twoshot:8M ;;
    abort-threads) abort_threads ;;
    init-missing) init_missing ;;
    status) status_of_a_running_job ;;
    init-fail) init_spread "Failed to initialize any NET plugin\|invalid usage" NCCL_NET=no-such-network ;;
    init-fail-4) WORLD=4 init_spread "Failed to initialize any NET plugin\|invalid usage" NCCL_NET=no-such-network ;;
    init-nosock) init_spread "NCCL_SOCKET_IFNAME=nosuchif0 matches no running interface" \
      NCCL_SOCKET_IFNAME=nosuchif0 ;;
    *) echo "unknown scenario $s"; bad=1 ;;
  esac
done
[ $bad -eq 0 ] && echo "gpu_failures: all passed" || echo "gpu_failures: FAILED"
exit $bad
