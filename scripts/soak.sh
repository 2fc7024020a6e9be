#!/usr/bin/env bash
# The soak: one training job survives many failures. Runs a training program
# under cc-run -n RANKS --max-restarts KILLS, kills a random rank (SIGKILL)
# every 1-3 s until KILLS have died (rank 0 among them: under cc-run the
# server lives in cc-run), and checks that the job finishes with weights
# bit-identical to a run of the same program without failures. A kill is
# made only once the previous one was recovered (every rank back at work),
# so each failure is measured alone: from the death to the survivors' first
# correct collective of the regrown communicator (on the last survivor to
# finish it), and to the replacement's rejoin. Prints one line per failure, then median and worst as a table.
#
#   scripts/soak.sh BUILD OUT [server|etcd]
#
# server (default): cc's server, in cc-run. etcd: a 3-member etcd cluster on
# loopback started here (etcd on PATH, CC_ETCD_BIN, or BUILD/etcd-tools from
# STAGE_ETCD=1 scripts/stage-build.sh), the ranks on it with 500 ms
# heartbeats (CC_HEARTBEAT_MS); after half the kills its leader is killed
# too, and not restarted: the second half runs on the two members left.
#
# The program is BUILD/examples/train_recover (a GPU per rank, or one GPU
# with --share-gpu), or any program taking its options (--steps N --step-ms
# MS --pace-while FILE --report-times) and printing its lines, such as
# BUILD/tests/rendezvous/soak_member (no GPU; what CI runs). It sleeps MS
# after each step while OUT/pace exists, which this script removes after the
# last kill, so the steps outlast the kills and the rest runs at full speed.
#
# Settings (environment):
#   SOAK_PROGRAM       the program (default BUILD/examples/train_recover)
#   SOAK_CC_RUN_FLAGS  more cc-run flags (default --share-gpu; empty for none)
#   SOAK_RANKS 4  SOAK_KILLS 50  SOAK_GAP_MS 1000-3000 (between kills)
#   SOAK_STEPS 3000  SOAK_STEP_MS 20  SOAK_SEED (default: the time)
#   SOAK_LIMIT_S 540   each job's wall-clock bound; SOAK_WAIT_S 120: per recovery
#
# OUT gets clean.log and soak.log (cc-run's output), failures.tsv (one line a
# failure) and summary.md (the table). Exit 0 when everything held, 77 when
# the program cannot run here (no GPU, no etcd), 1 otherwise.
set -u
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: $0 BUILD OUT [server|etcd]" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && OUT=$(cd "$2" && pwd) || exit 2
MODE=${3:-server}
case $MODE in server | etcd) ;; *) echo "soak: unknown rendezvous '$MODE' (server or etcd)" >&2; exit 2 ;; esac

PROGRAM=${SOAK_PROGRAM:-$BUILD/examples/train_recover}
CC_RUN=$BUILD/tools/cc-run
RUN_FLAGS=${SOAK_CC_RUN_FLAGS---share-gpu}
RANKS=${SOAK_RANKS:-4}
KILLS=${SOAK_KILLS:-50}
GAP=${SOAK_GAP_MS:-1000-3000}
MIN_GAP=${GAP%-*} MAX_GAP=${GAP#*-}
STEPS=${SOAK_STEPS:-3000}
STEP_MS=${SOAK_STEP_MS:-20}
SEED=${SOAK_SEED:-$(date +%s)}
LIMIT_S=${SOAK_LIMIT_S:-540}
WAIT_S=${SOAK_WAIT_S:-120}
RANDOM=$SEED

for f in "$CC_RUN" "$PROGRAM"; do
  [ -x "$f" ] || { echo "soak: FAILED: $f is missing"; exit 1; }
done
if [ "$(basename "$PROGRAM")" = train_recover ]; then
  if [ -x "$BUILD/tests/gpu/gpu_recovery" ]; then
    "$BUILD/tests/gpu/gpu_recovery" probe >/dev/null 2>&1
    gpu=$?
  else
    nvidia-smi -L >/dev/null 2>&1 && gpu=0 || gpu=77
  fi
  [ $gpu -eq 77 ] && { echo "soak: SKIP: no CUDA device here for $PROGRAM"; exit 77; }
fi

now_ns() { date +%s%N; }
fail() { echo "soak: FAILED: $*"; exit 1; }
ETCD_PIDS=()
RUN_PID=
# cc-run passes SIGTERM on to its ranks; SIGKILL would leave them behind.
stop_job() {
  kill -TERM "$RUN_PID" 2>/dev/null
  local i
  for ((i = 0; i < 50; i++)); do kill -0 "$RUN_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$RUN_PID" 2>/dev/null
  wait "$RUN_PID" 2>/dev/null
  RUN_PID=
}
cleanup() {
  [ -n "$RUN_PID" ] && stop_job
  local p
  for p in "${ETCD_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

# ---- the rendezvous ----------------------------------------------------------

MASTER_FLAGS=()
ETCD_NOTE=
if [ "$MODE" = etcd ]; then
  if [ -d "$BUILD/etcd-tools" ]; then
    CC_ETCD_BIN=${CC_ETCD_BIN:-$BUILD/etcd-tools/etcd}
    export LD_LIBRARY_PATH=$BUILD/etcd-tools/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  # libcc finds libcc-etcd.so beside itself; a program linking cc's parts
  # statically (soak_member) finds it here.
  export LD_LIBRARY_PATH=$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  ETCD=${CC_ETCD_BIN:-$(command -v etcd || true)}
  [ -n "$ETCD" ] && [ -x "$ETCD" ] || { echo "soak: SKIP: no etcd program (install etcd-server, or set CC_ETCD_BIN)"; exit 77; }
  read -r -a PORTS < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(6)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))')
  CLIENT_PORTS=("${PORTS[@]:0:3}") PEER_PORTS=("${PORTS[@]:3:3}")
  cluster="m0=http://127.0.0.1:${PEER_PORTS[0]},m1=http://127.0.0.1:${PEER_PORTS[1]},m2=http://127.0.0.1:${PEER_PORTS[2]}"
  rm -rf "$OUT/etcd" && mkdir -p "$OUT/etcd"
  for i in 0 1 2; do
    "$ETCD" --name "m$i" --data-dir "$OUT/etcd/m$i" \
      --listen-client-urls "http://127.0.0.1:${CLIENT_PORTS[i]}" \
      --advertise-client-urls "http://127.0.0.1:${CLIENT_PORTS[i]}" \
      --listen-peer-urls "http://127.0.0.1:${PEER_PORTS[i]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${PEER_PORTS[i]}" \
      --initial-cluster "$cluster" --initial-cluster-token soak --initial-cluster-state new \
      --heartbeat-interval 50 --election-timeout 500 --log-level error >"$OUT/etcd/m$i.log" 2>&1 &
    ETCD_PIDS[i]=$!
  done
  # The member that leads now, by index, asked of the live ones; nothing when none does.
  etcd_leader() {
    local ports=() i
    for i in 0 1 2; do kill -0 "${ETCD_PIDS[i]}" 2>/dev/null && ports+=("$i:${CLIENT_PORTS[i]}"); done
    python3 - "${ports[@]}" <<'EOF'
import json, sys, urllib.request
for arg in sys.argv[1:]:
    index, port = arg.split(":")
    try:
        req = urllib.request.Request("http://127.0.0.1:%s/v3/maintenance/status" % port,
                                     data=b"{}", headers={"Content-Type": "application/json"})
        status = json.load(urllib.request.urlopen(req, timeout=0.5))
    except Exception:
        continue
    leader = status.get("leader", "")
    if leader not in ("", "0") and leader == status.get("header", {}).get("member_id"):
        print(index)
        break
EOF
  }
  for ((i = 0; i < 200; i++)); do [ -n "$(etcd_leader)" ] && break; sleep 0.1; done
  [ -n "$(etcd_leader)" ] || { tail -n 20 "$OUT"/etcd/m*.log; fail "etcd elected no leader in 20 s"; }
  MASTER_FLAGS=(--master-addr "etcd://127.0.0.1:${CLIENT_PORTS[0]},127.0.0.1:${CLIENT_PORTS[1]},127.0.0.1:${CLIENT_PORTS[2]}")
  # The elected server keeps each store write in etcd before it answers, on
  # its one thread: while etcd elects a new leader (the kill below) it
  # answers nothing, so the window covers an etcd election (3 s).
  export CC_HEARTBEAT_MS=${CC_HEARTBEAT_MS:-500} CC_HEARTBEAT_MISSES=${CC_HEARTBEAT_MISSES:-6}
  echo "soak: etcd $("$ETCD" --version | head -1 | awk '{print $3}'), 3 members at ${MASTER_FLAGS[1]}; heartbeats ${CC_HEARTBEAT_MS} ms x ${CC_HEARTBEAT_MISSES}"
fi
export CC_TIMEOUT_MS=${CC_TIMEOUT_MS:-60000}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

# ---- the jobs ------------------------------------------------------------------

# start_job NAME MAX_RESTARTS PROGRAM_ARGS...: cc-run in the background, its
# output in OUT/NAME.log; RUN_PID is cc-run's pid.
start_job() {
  local name=$1 restarts=$2
  shift 2
  # shellcheck disable=SC2086  # RUN_FLAGS is a list of flags
  "$CC_RUN" -n "$RANKS" $RUN_FLAGS "${MASTER_FLAGS[@]}" --max-restarts "$restarts" -- \
    "$PROGRAM" --steps "$STEPS" --report-times "$@" >"$OUT/$name.log" 2>&1 &
  RUN_PID=$!
  JOB_DEADLINE=$(($(date +%s) + LIMIT_S))
  LOG=$OUT/$name.log
}
# finish_job: waits for cc-run within the job's bound; JOB_STATUS is its exit status.
finish_job() {
  while kill -0 "$RUN_PID" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$JOB_DEADLINE" ]; then
      stop_job
      tail -n 40 "$LOG"
      fail "the job ran past ${LIMIT_S} s (SOAK_LIMIT_S): see $LOG"
    fi
    sleep 0.2
  done
  wait "$RUN_PID"
  JOB_STATUS=$?
  RUN_PID=
}
# The pid of the process cc-run started for rank $1, from its environment.
rank_pid() {
  local status p
  for status in $(grep -l "^PPid:[[:space:]]*$RUN_PID\$" /proc/[0-9]*/status 2>/dev/null); do
    p=${status#/proc/} p=${p%/status}
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$1" && { echo "$p"; return 0; }
  done
  return 1
}
# first_after EVENT RANK NS: "NS GENERATION" of rank RANK's first
# "timing: EVENT" line stamped after NS, or nothing.
first_after() {
  awk -v ev="$1" -v r="$2]" -v t="$3" \
    '$1 == "[rank" && $2 == r && $5 == "timing:" && $6 == ev && $10 + 0 > t + 0 { print $10, $8; exit }' "$LOG"
}
# The weights hash of every rank's last line, one per rank ("" if one is missing).
hashes() {
  local r h out=""
  for ((r = 0; r < RANKS; r++)); do
    h=$(grep "^\[rank $r\] rank $r: weights identical across $RANKS ranks after $STEPS steps" "$LOG" |
      tail -n 1 | grep -o "weights hash 0x[0-9a-f]*")
    [ -n "$h" ] || { echo ""; return; }
    out+="$h"$'\n'
  done
  printf %s "$out" | sort -u
}

echo "soak: $RANKS ranks of $PROGRAM, $STEPS steps; cc-run flags: ${RUN_FLAGS:-(none)}; rendezvous: $MODE; seed $SEED"
start_job clean 0
finish_job
[ "$JOB_STATUS" -eq 0 ] || { tail -n 40 "$LOG"; fail "the run without failures exited with $JOB_STATUS"; }
CLEAN=$(hashes)
[ -n "$CLEAN" ] && [ "$(echo "$CLEAN" | wc -l)" -eq 1 ] || { tail -n 40 "$LOG"; fail "the run without failures did not end with one weights hash on every rank"; }
echo "soak: without failures: $CLEAN"

touch "$OUT/pace"
start_job soak "$KILLS" --step-ms "$STEP_MS" --pace-while "$OUT/pace"
until [ "$(grep -c "timing: joined generation 0 " "$LOG")" -ge "$RANKS" ]; do
  kill -0 "$RUN_PID" 2>/dev/null || { tail -n 40 "$LOG"; fail "the job ended before its ranks joined"; }
  [ "$(date +%s)" -lt "$JOB_DEADLINE" ] || fail "the ranks did not join"
  sleep 0.1
done

printf "failure\trank\tpid\tgeneration\tdeath_to_collective_ms\tdeath_to_rejoin_ms\n" >"$OUT/failures.tsv"
killed=0 rank0=0 last_kill=$(now_ns) etcd_killed=
while [ "$killed" -lt "$KILLS" ]; do
  gap=$((MIN_GAP + RANDOM % (MAX_GAP - MIN_GAP + 1)))
  wake=$((last_kill + gap * 1000000)) now=$(now_ns)
  [ "$wake" -gt "$now" ] && sleep "$(awk -v d=$((wake - now)) 'BEGIN { printf "%.3f", d / 1e9 }')"
  if [ "$MODE" = etcd ] && [ -z "$etcd_killed" ] && [ "$killed" -ge $((KILLS / 2)) ]; then
    leader=$(etcd_leader)
    [ -n "$leader" ] || fail "etcd has no leader before failure $((killed + 1))"
    kill -9 "${ETCD_PIDS[leader]}"
    wait "${ETCD_PIDS[leader]}" 2>/dev/null
    etcd_killed=m$leader
    ETCD_NOTE="its leader (m$leader) killed after failure $killed and not restarted"
    echo "soak: etcd member m$leader (the leader) killed after failure $killed; not restarted"
  fi
  rank=$((RANDOM % RANKS))
  [ "$killed" -eq $((KILLS - 1)) ] && [ "$rank0" -eq 0 ] && rank=0
  kill -0 "$RUN_PID" 2>/dev/null || { tail -n 40 "$LOG"; fail "the job ended after $killed failures: give it more steps (SOAK_STEPS)"; }
  pid=$(rank_pid "$rank") || fail "no process of rank $rank under cc-run"
  t=$(now_ns)
  kill -9 "$pid"
  last_kill=$t killed=$((killed + 1))
  [ "$rank" -eq 0 ] && rank0=$((rank0 + 1))
  # Recovered: the replacement rejoined, and every rank did its first
  # collective of the new generation.
  rejoin='' coll=0 whole=0
  until [ "$whole" -eq 1 ]; do
    [ $(($(now_ns) - t)) -lt $((WAIT_S * 1000000000)) ] ||
      { tail -n 40 "$LOG"; fail "failure $killed (rank $rank) not recovered within ${WAIT_S} s"; }
    kill -0 "$RUN_PID" 2>/dev/null || { tail -n 40 "$LOG"; fail "the job ended during the recovery of failure $killed"; }
    sleep 0.05
    [ -n "$rejoin" ] || rejoin=$(first_after rejoined "$rank" "$t")
    [ -n "$rejoin" ] || continue
    whole=1 coll=0
    for ((r = 0; r < RANKS; r++)); do
      at=$(first_after recovered "$r" "$t")
      [ -n "$at" ] || { whole=0; break; }
      at=${at%% *}
      [ "$r" -ne "$rank" ] && [ "$at" -gt "$coll" ] && coll=$at
    done
  done
  generation=${rejoin#* } rejoin=${rejoin%% *}
  printf "%d\t%d\t%d\t%d\t%d\t%d\n" "$killed" "$rank" "$pid" "$generation" \
    $(((coll - t) / 1000000)) $(((rejoin - t) / 1000000)) | tee -a "$OUT/failures.tsv"
done
rm -f "$OUT/pace"
finish_job

bad=0
check() {  # check WHAT CONDITION...
  local what=$1
  shift
  if "$@"; then echo "   ok: $what"; else echo "   FAILED: $what"; bad=1; fi
}
restarts=$(grep -c "starting it again (restart" "$LOG")
SOAK=$(hashes)
check "cc-run exited 0 (status $JOB_STATUS)" [ "$JOB_STATUS" -eq 0 ]
check "cc-run started a replacement for each of the $KILLS failures ($restarts)" [ "$restarts" -eq "$KILLS" ]
check "rank 0 was among them ($rank0 times)" [ "$rank0" -ge 1 ]
check "every rank ended with weights bit-identical to the run without failures (${SOAK:-none})" \
  [ "$SOAK" = "$CLEAN" ]

summary() {  # summary COLUMN: "median / worst" ms of failures.tsv's column
  tail -n +2 "$OUT/failures.tsv" | cut -f "$1" | sort -n | awk '
    { v[NR] = $1 }
    END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%g / %d ms", m, v[NR] }'
}
where="cc's server in cc-run"
[ "$MODE" = etcd ] && where="etcd, 3 members, $ETCD_NOTE"
{
  echo "| rendezvous | ranks | failures | death to the survivors' first correct collective (median / worst) | death to the replacement's rejoin (median / worst) | final weights |"
  echo "|---|---|---|---|---|---|"
  echo "| $where | $RANKS (cc-run ${RUN_FLAGS:-without flags}) | $KILLS in one job ($rank0 of rank 0), one every ${MIN_GAP}-${MAX_GAP} ms | $(summary 5) | $(summary 6) | $([ "$SOAK" = "$CLEAN" ] && echo "bit-identical to a run without failures" || echo DIFFER) |"
  echo
  echo "torchft's blog reports training through 1200-2000 synthetic failures; here $KILLS failures in one job of $RANKS ranks ($STEPS steps)."
} >"$OUT/summary.md"
cat "$OUT/summary.md"
[ $bad -eq 0 ] && echo "soak: passed" || echo "soak: FAILED"
exit $bad
