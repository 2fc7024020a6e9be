#!/usr/bin/env bash
# The recovery scenarios on a GPU machine (2 GPUs): a rank killed mid-loop,
# the survivor shrinking or the killed rank restarted by cc-run and taken
# back by regrow, and the training example recovering with weights that end
# bit-identical to a run in which nothing failed. Each checks the error message and
# values the ranks print.
#
#   gpu_recovery.sh BUILD [SCENARIO...]        (default: all of them)
#   scenarios: shrink-cc-run shrink-new-id shrink-by-hand regrow-cc-run train-regrow train-shrink,
#   and with more ranks: shrink-4 shrink-8 (one cc-run) regrow-nodes-4 regrow-nodes-8 (a
#   cc-run node per rank); ranks beyond the GPUs share one (CC_SHARE_GPU=1)
#
# Exit 0 when every scenario passed, 77 with no GPU, 1 otherwise. Prints
# which NCCL is loaded and whether it has ncclCommShrink, and for each shrink
# which way the new communicator was made. shrink-by-hand prints
# "RECOVER_MS <ms>": from SIGKILL of rank 1 to rank 0's first correct
# all-reduce on the shrunk communicator (scripts/recovery-bench.sh).
set -u
BUILD=${1:?usage: gpu_recovery.sh BUILD [SCENARIO...]}
shift
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -eq 0 ] &&
  SCENARIOS=(shrink-cc-run shrink-new-id shrink-by-hand regrow-cc-run train-regrow train-shrink)
BIN=$BUILD/tests/gpu/gpu_recovery
CC_RUN=$BUILD/tools/cc-run
TRAIN=$BUILD/examples/train_recover

. "$(dirname "$0")/gpu_ranks_lib.sh" gpu_recovery
"$BIN" probe
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export CC_TIMEOUT_MS=${CC_TIMEOUT_MS:-60000}
NGPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
# cc-run's flag for N ranks on this machine: --share-gpu where it has fewer GPUs.
share_for() { [ "$NGPUS" -lt "$1" ] && echo --share-gpu; }
status() {  # status NAME GOT WANT
  if [ "$2" -eq "$3" ]; then echo "   ok: $1 exit status $2"; else echo "   FAILED: $1 exit status $2, want $3"; bad=1; fi
}
# How the shrunk communicator was made, from rank 0's info log line.
# With several NCCL ids (CC_NCCL_RANKS_PER_ID) the message names NCCL's call and their count.
how() { grep -o "by ncclCommShrink\|by a new NCCL communicator\( ([^)]*)\)\?" "$1" | head -1 | sed 's/^/   made /'; }

shrink_cc_run() {  # shrink_cc_run [VAR=VALUE...]
  env CC_LOG_LEVEL=info "$@" timeout 300 "$CC_RUN" -n 2 --max-restarts 0 -- "$BIN" shrink >"$WORK/out" 2>&1
  status "cc-run (rank 1's SIGKILL)" $? 137
  check "rank 0 failed with CC_ERR_PEER_FAILED naming rank 1" "$WORK/out" \
    "^\[rank 0\] FAILED_AT [0-9]* CC_ERR_PEER_FAILED.*rank 1 (host"
  check "rank 0 shrank to generation 1 alone" "$WORK/out" \
    "^\[rank 0\] RECOVERED generation=1 rank=0 size=1 failed=1$"
  check "its all-reduces are right" "$WORK/out" "^\[rank 0\] OK shrunk: rank 0 of 1, generation 1"
  check "its words name the generation" "$WORK/out" "(host [^,]*, pid [0-9]*, generation 1)"
  how "$WORK/out"
}

shrink_by_hand() {  # rank 0 hosts the server (embedded); the script kills rank 1
  local port
  port=$(free_port)
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      RECOVERY_KILL_AT=-1 CC_LOG_LEVEL=${RECOVERY_LOG_LEVEL:-info} "$BIN" shrink >"$WORK/r$r" 2>&1 &
    eval "PID$r=$!"
  done
  local i
  for ((i = 0; i < 2400; i++)); do
    grep -q "LOOPING 1" "$WORK/r1" 2>/dev/null && grep -q "LOOPING 0" "$WORK/r0" 2>/dev/null && break
    sleep 0.05
  done
  sleep 0.5
  kill -9 "$PID1"
  local killed
  killed=$(now_ns)
  for ((i = 0; i < 1200; i++)); do kill -0 "$PID0" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$PID0" 2>/dev/null
  wait "$PID0"
  status "rank 0" $? 0
  wait "$PID1" 2>/dev/null
  check "rank 0 shrank to generation 1" "$WORK/r0" "^RECOVERED generation=1 rank=0 size=1 failed=1$"
  check "its all-reduces are right" "$WORK/r0" "^OK shrunk"
  how "$WORK/r0"
  local at failed_at
  at=$(awk '/^RECOVERED_AT/{print $2; exit}' "$WORK/r0")
  failed_at=$(awk '/^FAILED_AT/{print $2; exit}' "$WORK/r0")
  [ -n "$failed_at" ] && echo "DETECT_MS $(((failed_at - killed) / 1000000))"
  [ -n "$at" ] && echo "RECOVER_MS $(((at - killed) / 1000000))"
  grep -m1 "^DESTROY_MS" "$WORK/r0"  # cc_comm_destroy of the failed communicator
  # The ranks' own logs, for where the time went (RECOVERY_LOGS=DIR).
  [ -n "${RECOVERY_LOGS:-}" ] && mkdir -p "$RECOVERY_LOGS" && cp "$WORK/r0" "$WORK/r1" "$RECOVERY_LOGS/"
}

regrow_cc_run() {
  CC_LOG_LEVEL=warn timeout 300 "$CC_RUN" -n 2 --max-restarts 1 -- "$BIN" regrow >"$WORK/out" 2>&1
  status "cc-run" $? 0
  check "cc-run started rank 1 again" "$WORK/out" "cc-run: rank 1 (pid [0-9]*) exited with status 137.*starting it again (restart 1 of 1)"
  check "rank 0 regrew to generation 1, keeping its rank" "$WORK/out" \
    "^\[rank 0\] RECOVERED generation=1 rank=0 size=2 failed=1$"
  check "rank 0's all-reduces are right" "$WORK/out" "^\[rank 0\] OK regrown: rank 0 of 2, generation 1"
  check "the replacement joined generation 1" "$WORK/out" \
    "^\[rank 1\] OK replacement: rank 1 of 2, generation 1; 10 all-reduces right"
  check "the replacement was told to take its state from a survivor" "$WORK/out" \
    "as a replacement, in its generation 1"
}

# Many ranks under one cc-run: rank 1 dies; the N-1 survivors shrink.
shrink_many() {  # shrink_many N
  local n=$1
  # NCCL's INIT log names each communicator's end: "nranks N ... - Destroy
  # COMPLETE" or "- Abort COMPLETE".
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT CC_LOG_LEVEL=warn timeout 300 "$CC_RUN" -n "$n" \
    $(share_for "$n") --max-restarts 0 -- "$BIN" shrink >"$WORK/out" 2>&1
  status "cc-run (rank 1's SIGKILL)" $? 137
  count_lines "survivors failed with CC_ERR_PEER_FAILED naming rank 1" $((n - 1)) \
    "^\[rank [0-9]*\] FAILED_AT [0-9]* CC_ERR_PEER_FAILED.*rank 1 (host"
  count_lines "survivors shrank to generation 1 of $((n - 1)) ranks" $((n - 1)) \
    "^\[rank [0-9]*\] RECOVERED generation=1 rank=[0-9]* size=$((n - 1)) failed=1$"
  count_lines "their all-reduces are right" $((n - 1)) \
    "^\[rank [0-9]*\] OK shrunk: rank [0-9]* of $((n - 1)), generation 1"
  # After an abortive shrink the parent is aborted, never destroyed (a
  # destroy may wait for a dead peer); the shrunk one ends by destroy.
  local child_destroyed parent_destroyed
  child_destroyed=$(grep -c "nranks $((n - 1)) .* - Destroy COMPLETE" "$WORK/out")
  if [ "$child_destroyed" -ge $((n - 1)) ]; then
    echo "   ok: the shrunk communicators ended by ncclCommDestroy ($child_destroyed)"
  else
    echo "   FAILED: $child_destroyed shrunk communicators ended by ncclCommDestroy, want $((n - 1)) or more"
    bad=1
  fi
  parent_destroyed=$(grep -c "nranks $n .* - Destroy COMPLETE" "$WORK/out")
  if [ "$parent_destroyed" -eq 0 ]; then
    echo "   ok: no parent communicator ended by ncclCommDestroy"
  else
    echo "   FAILED: $parent_destroyed parent communicators of $n ranks ended by ncclCommDestroy:"
    grep "nranks $n .* - Destroy COMPLETE" "$WORK/out" | sed 's/^/   | /' | head
    bad=1
  fi
  recovery_times "$WORK/out"
}

# One cc-run node per rank, as on N hosts: rank VICTIM dies, its node starts
# it again, and every survivor regrows with it to N ranks.
regrow_nodes() {  # regrow_nodes N
  local n=$1 victim=$(($1 / 2)) port node pids=()
  port=$(free_port)
  for ((node = 0; node < n; node++)); do
    # Enough GPUs: node i's one rank on GPU i (each node's LOCAL_RANK is 0).
    local device=()
    [ "$NGPUS" -ge "$n" ] && device=(CC_DEVICE=$node)
    env "${device[@]}" CC_LOG_LEVEL="${CC_LOG_LEVEL:-warn}" RECOVERY_VICTIM=$victim timeout 300 "$CC_RUN" -n 1 --nnodes "$n" \
      --node-rank $node --master-addr 127.0.0.1 --master-port "$port" --job-id "regrow-$n-$port" \
      --max-restarts 1 $(share_for "$n") -- "$BIN" regrow >"$WORK/node$node" 2>&1 &
    pids+=($!)
  done
  local rc=0 p
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  status "the $n cc-run nodes" $rc 0
  cat "$WORK"/node* >"$WORK/out"
  check "node $victim started rank $victim again" "$WORK/node$victim" \
    "cc-run: rank $victim (pid [0-9]*) exited with status 137.*starting it again (restart 1 of 1)"
  count_lines "survivors regrew to generation 1, keeping their ranks" $((n - 1)) \
    "^\[rank [0-9]*\] RECOVERED generation=1 rank=[0-9]* size=$n failed=$victim$"
  check "the replacement joined generation 1" "$WORK/out" \
    "^\[rank $victim\] OK replacement: rank $victim of $n, generation 1; 10 all-reduces right"
  recovery_times "$WORK/out"
  how "$WORK/out"  # with CC_LOG_LEVEL=info
}

count_lines() {  # count_lines NAME COUNT PATTERN: $WORK/out holds PATTERN COUNT times
  local got
  got=$(grep -c -- "$3" "$WORK/out")
  if [ "$got" -eq "$2" ]; then echo "   ok: $1 ($got)"; else
    echo "   FAILED: $1: $got lines of '$3', want $2"; sed 's/^/   | /' "$WORK/out" | tail -n 60; bad=1
  fi
}

# From the death (the first FAILED_AT) to the last survivor's first right all-reduce.
recovery_times() {
  local failed_at recovered_at
  failed_at=$(grep -o "FAILED_AT [0-9]*" "$1" | awk '{print $2}' | sort -n | head -1)
  recovered_at=$(grep -o "RECOVERED_AT [0-9]*" "$1" | awk '{print $2}' | sort -n | tail -1)
  [ -n "$failed_at" ] && [ -n "$recovered_at" ] &&
    echo "RECOVER_ALL_MS $(((recovered_at - failed_at) / 1000000)) (first survivor's failure to the last survivor's first right all-reduce)"
}

train_regrow() {
  [ -x "$TRAIN" ] || { echo "   FAILED: $TRAIN is missing (built only where nvcc works)"; bad=1; return; }
  timeout 300 "$CC_RUN" -n 2 -- "$TRAIN" >"$WORK/clean" 2>&1
  status "train_recover, nothing failing" $? 0
  timeout 300 "$CC_RUN" -n 2 --max-restarts 1 -- "$TRAIN" --die-rank 1 --die-at 50 >"$WORK/out" 2>&1
  status "train_recover, rank 1 killed at step 50" $? 0
  check "rank 1 died at step 50" "$WORK/out" "^\[rank 1\] rank 1: dying at step 50$"
  check "rank 0 regrew" "$WORK/out" "^\[rank 0\] rank 0: regrown to generation 1: rank 0 of 2 (ranks 1 replaced)"
  check "the replacement took rank 0's weights" "$WORK/out" \
    "^\[rank 1\] rank 1: going on from step 50 with rank 0's weights"
  local clean
  clean=$(grep -o "weights hash 0x[0-9a-f]*" "$WORK/clean" | sort -u)
  echo "   without a failure: $clean"
  [ "$(echo "$clean" | wc -l)" -eq 1 ] && [ -n "$clean" ] || { echo "   FAILED: the ranks of the clean run differ"; bad=1; }
  for r in 0 1; do
    check "rank $r: identical weights, bit for bit as without a failure" "$WORK/out" \
      "^\[rank $r\] rank $r: weights identical across 2 ranks after 200 steps (generation 1); $clean;"
  done
}

train_shrink() {
  [ -x "$TRAIN" ] || { echo "   FAILED: $TRAIN is missing (built only where nvcc works)"; bad=1; return; }
  timeout 300 "$CC_RUN" -n 2 --max-restarts 0 -- "$TRAIN" --shrink --die-rank 1 --die-at 50 >"$WORK/out" 2>&1
  status "train_recover --shrink (rank 1's SIGKILL)" $? 137
  check "rank 0 shrank" "$WORK/out" "^\[rank 0\] rank 0: shrunk to generation 1: rank 0 of 1 (ranks 1 left out)"
  check "rank 0 finished" "$WORK/out" "^\[rank 0\] rank 0: weights identical across 1 ranks after 200 steps (generation 1)"
  grep -q "the loss did not fall enough" "$WORK/out" && { echo "   FAILED: the loss did not fall"; bad=1; }
}

for s in "${SCENARIOS[@]}"; do
  echo "== $s"
  case $s in
    shrink-cc-run) shrink_cc_run ;;
    shrink-new-id) shrink_cc_run CC_NCCL_SHRINK=0 ;;
    shrink-by-hand) shrink_by_hand ;;
    regrow-cc-run) regrow_cc_run ;;
    shrink-4) shrink_many 4 ;;
    shrink-8) shrink_many 8 ;;
    regrow-nodes-4) regrow_nodes 4 ;;
    regrow-nodes-8) regrow_nodes 8 ;;
    train-regrow) train_regrow ;;
    train-shrink) train_shrink ;;
    *) echo "unknown scenario $s"; bad=1 ;;
  esac
done
[ $bad -eq 0 ] && echo "gpu_recovery: all passed" || echo "gpu_recovery: FAILED"
exit $bad
