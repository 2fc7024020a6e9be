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
#   scripts/soak.sh BUILD OUT [server|etcd|elected]
#
# server (default): cc's server, in cc-run. etcd: a 3-member etcd cluster on
# loopback started here (etcd on PATH, CC_ETCD_BIN, or BUILD/etcd-tools from
# STAGE_ETCD=1 scripts/stage-build.sh), the ranks on it with 500 ms
# heartbeats (CC_HEARTBEAT_MS); after half the kills its leader is killed
# too, and not restarted: the second half runs on the two members left.
# elected: the same etcd cluster, and SOAK_DAEMONS `cc-rendezvous --etcd`
# daemons on loopback (each its own port, --advertise 127.0.0.1:PORT) of
# which etcd elects one to serve the job. Among the rank kills, the leading
# daemon (the one its key <prefix>/leader names) is killed SOAK_LEADER_KILLS
# times, each started again as a standby once the next leader is published.
# A leader kill is recovered when the new leader rebuilt the job's
# communicator from every rank's resume (its log says "rebuilt from N of N
# ranks"); no rank may fail for it. Every SOAK_LEADER_DURING_RECOVERY-th
# leader kill (default 0: none) falls inside a rank kill's recovery instead,
# SOAK_LEADER_DELAY_MS after it: the regrow in flight completes on the new
# leader.
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
# elected only:
#   SOAK_DAEMONS 2  SOAK_LEADER_KILLS 5  SOAK_LEASE_MS 2000 (the daemons' --lease)
#   SOAK_RESUME_LIMIT_MS   the bound on a leader kill's recovery (default the
#                      lease and 1 s); a slower one fails the soak
#   SOAK_AGENT 1       1: through cc-run's node agent, which follows the
#                      leader (cc-run's default); 0: cc-run --no-agent, each
#                      rank on its own connection (its client follows it)
#   SOAK_LEADER_DURING_RECOVERY 0  SOAK_LEADER_DELAY_MS 50
#
# OUT gets clean.log and soak.log (cc-run's output), failures.tsv (one line a
# failure: its kind, rank, leader or leader-in-recovery; a leader kill's
# columns are the daemon, its pid, the job's generation, the death to every
# rank resumed on the next leader (inside a recovery: to every rank's first
# collective of the regrown generation), and the death to that leader seen
# published) and summary.md (the
# table); elected: daemons/dN.log, each daemon's output. Exit 0 when everything held, 77 when
# the program cannot run here (no GPU, no etcd), 1 otherwise.
set -u
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: $0 BUILD OUT [server|etcd|elected]" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && OUT=$(cd "$2" && pwd) || exit 2
MODE=${3:-server}
case $MODE in server | etcd | elected) ;; *) echo "soak: unknown rendezvous '$MODE' (server, etcd or elected)" >&2; exit 2 ;; esac

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
DAEMONS=${SOAK_DAEMONS:-2}
LEADER_KILLS=0
if [ "$MODE" = elected ]; then
  LEADER_KILLS=${SOAK_LEADER_KILLS:-5}
  LEASE_MS=${SOAK_LEASE_MS:-2000}
  RESUME_LIMIT_MS=${SOAK_RESUME_LIMIT_MS:-$((LEASE_MS + 1000))}
  DURING_RECOVERY=${SOAK_LEADER_DURING_RECOVERY:-0}
  LEADER_DELAY_MS=${SOAK_LEADER_DELAY_MS:-50}
  [ "${SOAK_AGENT:-1}" = 0 ] && RUN_FLAGS="$RUN_FLAGS --no-agent"
  [ "$DAEMONS" -ge 2 ] || { echo "soak: SOAK_DAEMONS must be 2 or more: one leads, one takes over" >&2; exit 2; }
fi
RANDOM=$SEED

RENDEZVOUS=$BUILD/tools/cc-rendezvous
for f in "$CC_RUN" "$PROGRAM" $([ "$MODE" = elected ] && echo "$RENDEZVOUS"); do
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
DAEMON_PIDS=()
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
  for p in "${DAEMON_PIDS[@]}" "${ETCD_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

# ---- the rendezvous ----------------------------------------------------------

MASTER_FLAGS=()
ETCD_NOTE=
if [ "$MODE" != server ]; then
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

# The daemons of elected: each on a port of its own, campaigning under a
# prefix of this soak's.
if [ "$MODE" = elected ]; then
  export CC_ETCD_PREFIX=${CC_ETCD_PREFIX:-soak}
  read -r -a DAEMON_PORTS < <(python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$DAEMONS")
  rm -rf "$OUT/daemons" && mkdir -p "$OUT/daemons"
  # start_daemon I: daemon I campaigns (again), its output appended to OUT/daemons/dI.log.
  start_daemon() {
    "$RENDEZVOUS" --etcd "${MASTER_FLAGS[1]}" --bind 127.0.0.1 --port "${DAEMON_PORTS[$1]}" \
      --advertise "127.0.0.1:${DAEMON_PORTS[$1]}" --lease "${LEASE_MS}ms" --log-level info \
      >>"$OUT/daemons/d$1.log" 2>&1 &
    DAEMON_PIDS[$1]=$!
  }
  # The index of the daemon whose address the election key holds, asked of
  # the live etcd members; nothing while none leads.
  daemon_leader() {
    local ports=() i port
    for i in 0 1 2; do kill -0 "${ETCD_PIDS[i]}" 2>/dev/null && ports+=("${CLIENT_PORTS[i]}"); done
    port=$(python3 - "$CC_ETCD_PREFIX/leader" "${ports[@]}" <<'PY'
import base64, json, sys, urllib.request
key = base64.b64encode(sys.argv[1].encode()).decode()
for port in sys.argv[2:]:
    try:
        req = urllib.request.Request("http://127.0.0.1:%s/v3/kv/range" % port,
                                     data=json.dumps({"key": key}).encode(),
                                     headers={"Content-Type": "application/json"})
        kvs = json.load(urllib.request.urlopen(req, timeout=0.5)).get("kvs", [])
    except Exception:
        continue
    if kvs:
        print(base64.b64decode(kvs[0]["value"]).decode().rsplit(":", 1)[-1])
    break
PY
    )
    for i in "${!DAEMON_PORTS[@]}"; do [ "${DAEMON_PORTS[i]}" = "$port" ] && echo "$i"; done
  }
  # rebuilt_after I NS: the time (ns) of daemon I's first log line after NS
  # saying it rebuilt a communicator from every rank's resume; "missing
  # WORDS" for one that some rank never resumed; nothing before either.
  rebuilt_after() {
    local line at
    while IFS= read -r line; do
      at=$(date -d "$(echo "$line" | cut -c2-24)" +%s%N 2>/dev/null) || continue
      [ "$at" -gt "$2" ] || continue
      case $line in
        *"rebuilt from $RANKS of $RANKS ranks") echo "$at" ;;
        *) echo "missing ${line#*] }" ;;
      esac
      return
    done < <(grep ": rebuilt from " "$OUT/daemons/d$1.log")
  }
  for ((i = 0; i < DAEMONS; i++)); do start_daemon "$i"; done
  for ((i = 0; i < 300; i++)); do [ -n "$(daemon_leader)" ] && break; sleep 0.1; done
  [ -n "$(daemon_leader)" ] || { tail -n 20 "$OUT"/daemons/d*.log; fail "no cc-rendezvous daemon led in 30 s"; }
  echo "soak: $DAEMONS cc-rendezvous --etcd daemons (lease ${LEASE_MS} ms) on ports ${DAEMON_PORTS[*]}, prefix $CC_ETCD_PREFIX; d$(daemon_leader) leads"
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

printf "failure\tkind\trank\tpid\tgeneration\tdeath_to_collective_ms\tdeath_to_rejoin_ms\n" >"$OUT/failures.tsv"
# The rank kill after which leader kill $1 comes (1..LEADER_KILLS), spread evenly.
leader_slot() { echo $(($1 * KILLS / (LEADER_KILLS + 1))); }
# Whether leader kill $1 falls inside the next rank kill's recovery.
leader_in_recovery() { [ "$DURING_RECOVERY" -gt 0 ] && [ $(($1 % DURING_RECOVERY)) -eq 0 ]; }
# leader_kill N [D]: kills the leading daemon (D when known; SIGKILL), waits
# until the next one publishes its address and starts the killed one again
# as a standby. Sets
# LEADER_T (the kill), LEADER_ELECTED (the address published), LEADER_NEXT
# (the daemon that leads now), LEADER_DAEMON and LEADER_PID (the one killed).
leader_kill() {
  local d=${2:-} next=''
  [ -n "$d" ] || d=$(daemon_leader)
  [ -n "$d" ] || fail "no daemon leads before leader kill $1"
  LEADER_DAEMON=$d LEADER_PID=${DAEMON_PIDS[d]}
  LEADER_T=$(now_ns)
  kill -9 "$LEADER_PID"
  wait "$LEADER_PID" 2>/dev/null
  until [ -n "$next" ] && [ "$next" != "$d" ]; do
    [ $(($(now_ns) - LEADER_T)) -lt $((WAIT_S * 1000000000)) ] ||
      { tail -n 20 "$OUT"/daemons/d*.log; fail "leader kill $1: no daemon led within ${WAIT_S} s"; }
    sleep 0.05
    next=$(daemon_leader)
  done
  LEADER_ELECTED=$(now_ns) LEADER_NEXT=$next
  start_daemon "$d"
  echo "soak: leader kill $1: daemon d$d (pid $LEADER_PID) killed; d$next published $(((LEADER_ELECTED - LEADER_T) / 1000000)) ms later; d$d stands by again (pid ${DAEMON_PIDS[d]})"
}
# The lines of the job's output since line $1 that say a rank failed a step.
failed_since() { tail -n +"$(($1 + 1))" "$LOG" | grep -E "step [0-9]+ failed \(.*\); recovering" | head -n 5; }

killed=0 rank0=0 last_kill=$(now_ns) etcd_killed='' leaders=0 generation=0 quiet_from=''
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
  # A leader kill between the ranks' steps and heartbeats: recovered when
  # the next leader rebuilt the communicator from every rank's resume.
  if [ "$leaders" -lt "$LEADER_KILLS" ] && [ "$killed" -ge "$(leader_slot $((leaders + 1)))" ] &&
    ! leader_in_recovery $((leaders + 1)); then
    kill -0 "$RUN_PID" 2>/dev/null || { tail -n 40 "$LOG"; fail "the job ended after $killed failures: give it more steps (SOAK_STEPS)"; }
    leaders=$((leaders + 1))
    quiet_from=$(wc -l <"$LOG")
    leader_kill "$leaders"
    resumed=''
    until [ -n "$resumed" ]; do
      [ $(($(now_ns) - LEADER_T)) -lt $((WAIT_S * 1000000000)) ] ||
        { tail -n 20 "$OUT/daemons/d$LEADER_NEXT.log"; fail "leader kill $leaders: the ranks did not resume on d$LEADER_NEXT within ${WAIT_S} s"; }
      kill -0 "$RUN_PID" 2>/dev/null || { tail -n 40 "$LOG"; fail "the job ended after leader kill $leaders"; }
      sleep 0.05
      resumed=$(rebuilt_after "$LEADER_NEXT" "$LEADER_T")
    done
    case $resumed in missing*) fail "leader kill $leaders: d$LEADER_NEXT ${resumed#missing }" ;; esac
    printf "%d\tleader\td%d\t%d\t%d\t%d\t%d\n" "$((killed + leaders))" "$LEADER_DAEMON" "$LEADER_PID" \
      "$generation" $(((resumed - LEADER_T) / 1000000)) $(((LEADER_ELECTED - LEADER_T) / 1000000)) |
      tee -a "$OUT/failures.tsv"
    last_kill=$LEADER_T
    continue
  fi
  # No rank failed for the last leader kill between its ranks' steps.
  if [ -n "$quiet_from" ]; then
    lost=$(failed_since "$quiet_from")
    [ -z "$lost" ] || { echo "$lost"; fail "leader kill $leaders made ranks fail (above): their clients did not resume on the next leader"; }
    quiet_from=
  fi
  rank=$((RANDOM % RANKS))
  [ "$killed" -eq $((KILLS - 1)) ] && [ "$rank0" -eq 0 ] && rank=0
  kill -0 "$RUN_PID" 2>/dev/null || { tail -n 40 "$LOG"; fail "the job ended after $killed failures: give it more steps (SOAK_STEPS)"; }
  pid=$(rank_pid "$rank") || fail "no process of rank $rank under cc-run"
  in_recovery='' leading=''
  if [ "$leaders" -lt "$LEADER_KILLS" ] && [ "$killed" -ge "$(leader_slot $((leaders + 1)))" ] &&
    leader_in_recovery $((leaders + 1)); then
    in_recovery=1 leading=$(daemon_leader)  # asked before: the kill must fall inside the recovery
  fi
  t=$(now_ns)
  kill -9 "$pid"
  last_kill=$t killed=$((killed + 1)) event=$((killed + leaders))
  [ "$rank" -eq 0 ] && rank0=$((rank0 + 1))
  # A leader kill inside this recovery: the regrow in flight moves to the next leader.
  if [ -n "$in_recovery" ]; then
    sleep "$(awk -v d="$LEADER_DELAY_MS" 'BEGIN { printf "%.3f", d / 1e3 }')"
    leaders=$((leaders + 1))
    leader_kill "$leaders" "$leading"
  fi
  # Recovered: the replacement rejoined, and every rank did its first
  # collective of the new generation.
  rejoin='' coll=0 whole=0 last=0
  until [ "$whole" -eq 1 ]; do
    [ $(($(now_ns) - t)) -lt $((WAIT_S * 1000000000)) ] ||
      { tail -n 40 "$LOG"; fail "failure $killed (rank $rank) not recovered within ${WAIT_S} s"; }
    kill -0 "$RUN_PID" 2>/dev/null || { tail -n 40 "$LOG"; fail "the job ended during the recovery of failure $killed"; }
    sleep 0.05
    [ -n "$rejoin" ] || rejoin=$(first_after rejoined "$rank" "$t")
    [ -n "$rejoin" ] || continue
    whole=1 coll=0 last=0
    for ((r = 0; r < RANKS; r++)); do
      at=$(first_after recovered "$r" "$t")
      [ -n "$at" ] || { whole=0; break; }
      at=${at%% *}
      [ "$r" -ne "$rank" ] && [ "$at" -gt "$coll" ] && coll=$at
      [ "$at" -gt "$last" ] && last=$at
    done
  done
  generation=${rejoin#* } rejoin=${rejoin%% *}
  printf "%d\trank\t%d\t%d\t%d\t%d\t%d\n" "$event" "$rank" "$pid" "$generation" \
    $(((coll - t) / 1000000)) $(((rejoin - t) / 1000000)) | tee -a "$OUT/failures.tsv"
  # The leader kill's recovery: every rank's first collective of the regrown
  # generation; or, when the recovery ended first, the ranks resumed on the next leader.
  if [ -n "$in_recovery" ] && [ "$last" -lt "$LEADER_T" ]; then
    echo "soak: leader kill $leaders came $(((LEADER_T - last) / 1000000)) ms after failure $killed's recovery: measured as one between steps"
    resumed=''
    until [ -n "$resumed" ]; do
      [ $(($(now_ns) - LEADER_T)) -lt $((WAIT_S * 1000000000)) ] ||
        fail "leader kill $leaders: the ranks did not resume on d$LEADER_NEXT within ${WAIT_S} s"
      sleep 0.05
      resumed=$(rebuilt_after "$LEADER_NEXT" "$LEADER_T")
    done
    case $resumed in missing*) fail "leader kill $leaders: d$LEADER_NEXT ${resumed#missing }" ;; esac
    last=$resumed
  fi
  [ -n "$in_recovery" ] &&
    printf "%d\tleader-in-recovery\td%d\t%d\t%d\t%d\t%d\n" "$((event + 1))" "$LEADER_DAEMON" "$LEADER_PID" \
      "$generation" $(((last - LEADER_T) / 1000000)) $(((LEADER_ELECTED - LEADER_T) / 1000000)) |
      tee -a "$OUT/failures.tsv"
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
if [ "$MODE" = elected ]; then
  slowest=$(awk -F'\t' '$2 == "leader" && $6 > w { w = $6 } END { print w + 0 }' "$OUT/failures.tsv")
  slowest_in=$(awk -F'\t' '$2 == "leader-in-recovery" && $6 > w { w = $6 } END { print w + 0 }' "$OUT/failures.tsv")
  check "the leading daemon was killed $LEADER_KILLS times ($leaders)" [ "$leaders" -eq "$LEADER_KILLS" ]
  check "every leader kill between steps was recovered within ${RESUME_LIMIT_MS} ms (worst ${slowest} ms)" \
    [ "$slowest" -le "$RESUME_LIMIT_MS" ]
  # Inside a recovery the killed rank never resumes: the next leader waits
  # its grace period for resumes (5 s) before it declares it failed.
  check "every leader kill inside a recovery was recovered within $((RESUME_LIMIT_MS + 5000)) ms, and the resume grace (worst ${slowest_in} ms)" \
    [ "$slowest_in" -le $((RESUME_LIMIT_MS + 5000)) ]
fi

summary() {  # summary KIND COLUMN: "median / worst" ms of failures.tsv's column for KIND's rows
  awk -F'\t' -v k="$1" -v c="$2" 'NR > 1 && $2 == k { print $c }' "$OUT/failures.tsv" | sort -n | awk '
    { v[NR] = $1 }
    END { if (NR == 0) { printf "-"; exit } m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%g / %d ms", m, v[NR] }'
}
where="cc's server in cc-run"
[ "$MODE" = etcd ] && where="etcd, 3 members, $ETCD_NOTE"
[ "$MODE" = elected ] && where="$DAEMONS cc-rendezvous --etcd daemons (lease ${LEASE_MS} ms) on a 3-member etcd"
final=$([ "$SOAK" = "$CLEAN" ] && echo "bit-identical to a run without failures" || echo DIFFER)
{
  echo "| rendezvous | ranks | failures | death to the survivors' first correct collective (median / worst) | death to the replacement's rejoin (median / worst) | final weights |"
  echo "|---|---|---|---|---|---|"
  echo "| $where | $RANKS (cc-run ${RUN_FLAGS:-without flags}) | $KILLS rank kills in one job ($rank0 of rank 0), one every ${MIN_GAP}-${MAX_GAP} ms | $(summary rank 6) | $(summary rank 7) | $final |"
  if [ "$MODE" = elected ]; then
    echo
    echo "| leader kills | death to every rank resumed on the next leader, or (inside a recovery) to every rank's first collective (median / worst) | death to the next leader seen published (median / worst) | bound |"
    echo "|---|---|---|---|"
    echo "| $(grep -c "	leader	" "$OUT/failures.tsv") of the leading daemon (SIGKILL) between steps, spread among the rank kills | $(summary leader 6) | $(summary leader 7) | ${RESUME_LIMIT_MS} ms |"
    [ "$DURING_RECOVERY" -gt 0 ] &&
      echo "| $(grep -c "	leader-in-recovery	" "$OUT/failures.tsv") inside a rank kill's recovery, ${LEADER_DELAY_MS} ms after it | $(summary leader-in-recovery 6) | $(summary leader-in-recovery 7) | $((RESUME_LIMIT_MS + 5000)) ms (with the 5 s resume grace) |"
  fi
  echo
  echo "torchft's blog reports training through 1200-2000 synthetic failures; here $((KILLS + LEADER_KILLS)) failures in one job of $RANKS ranks ($STEPS steps)."
} >"$OUT/summary.md"
cat "$OUT/summary.md"
[ $bad -eq 0 ] && echo "soak: passed" || echo "soak: FAILED"
exit $bad
