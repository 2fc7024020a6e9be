#!/usr/bin/env bash
# Ranks whose calls differ and then end at once, on one GPU: every rank
# under `cc-run --share-gpu -n N` (N = 2 and 4) makes 200 calls and destroys
# its communicator without waiting for the GPU; rank 1 differs at op #AT.
#
#   gpu_call_ends.sh BUILD [SCENARIO...]     (default: all of them)
#   scenarios: WAY-AT-N (WAY: kind count type root skip extra; AT: 50, the
#              middle, or 195, among the last ten calls; N: 2 4), none-N;
#              broadcast-AT-N: every rank broadcasts from root 0 at op #AT
#              (root's control: no rank may be told);
#              split-N: the ranks split, and rank 1's child makes op #15 of
#              its 20 calls with one float more, then destroys the child;
#              replay-other-N: every rank captures two CUDA graphs, and rank 1
#              replays the other one at replay #3 of 5; replay-same-N: every
#              rank replays the same (the control); replay-unchecked-N: the
#              same with CC_CHECK_CALLS=0 (destroy still refused while the
#              graphs live)
#
# Every rank must get CC_ERR_MISMATCH, from a call or from cc_comm_destroy,
# naming op #AT and both calls; with none and broadcast, no rank may. A split child's
# ranks are told so by the child (op #15), and the parent's destroy is
# clean; replay-other names graph replay #3 and both graphs. Exit 0 when
# every scenario passed, 77 with no GPU, 1 otherwise.
set -u
BUILD=${1:?usage: gpu_call_ends.sh BUILD [SCENARIO...]}
shift
BIN=$BUILD/tests/gpu/gpu_call_ends
CC_RUN=$BUILD/tools/cc-run
WAYS=(kind count type root skip extra)
SCENARIOS=("$@")
if [ ${#SCENARIOS[@]} -eq 0 ]; then
  for n in 2 4; do
    for way in "${WAYS[@]}"; do
      for at in 50 195; do SCENARIOS+=("$way-$at-$n"); done
    done
    SCENARIOS+=("none-$n" "broadcast-195-$n" "split-$n" "replay-other-$n" "replay-same-$n"
                "replay-unchecked-$n")
  done
fi

. "$(dirname "$0")/gpu_ranks_lib.sh" gpu_call_ends
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export CC_LOG_LEVEL=${CC_LOG_LEVEL:-error}

ccrun() {  # ccrun N OUT ARGS...
  local n=$1 out=$2
  shift 2
  timeout --kill-after=10 120 "$CC_RUN" --share-gpu -n "$n" --grace-ms 15000 -- "$BIN" "$@" \
    >"$out" 2>&1
}

ends() {  # ends WAY AT N
  local way=$1 at=$2 n=$3 out=$WORK/$1-$2-$3 r
  ccrun "$n" "$out" "$way" "$at"
  local rc=$?
  [ $rc -eq 0 ] || { echo "   FAILED: cc-run exited with $rc"; sed 's/^/   | /' "$out" | tail -n 40; bad=1; }
  if [ "$way" = none ] || [ "$way" = broadcast ]; then
    [ "$(grep -c '^\[rank [0-9]*\] VERDICT none' "$out")" -eq "$n" ] && echo "   ok: no rank told" ||
      { echo "   FAILED: a rank was told"; sed 's/^/   | /' "$out" | tail -n 40; bad=1; }
    return
  fi
  local odd even c=$((1024 + at)) before=$((at - 1))
  case $way in
    kind) odd="cc_allgather 256 x FLOAT32" even="cc_allreduce $c x FLOAT32 SUM" ;;
    count) odd="cc_allreduce $((c + 1)) x FLOAT32 SUM" even="cc_allreduce $c x FLOAT32 SUM" ;;
    type) odd="cc_allreduce $c x FLOAT16 SUM" even="cc_allreduce $c x FLOAT32 SUM" ;;
    root) odd="cc_broadcast $c x FLOAT32 root 1" even="cc_broadcast $c x FLOAT32 root 0" ;;
    skip) odd="cc_allreduce $((c + 1)) x FLOAT32 SUM" even="cc_allreduce $c x FLOAT32 SUM" ;;
    extra) odd="cc_barrier" even="cc_allreduce $c x FLOAT32 SUM" ;;
  esac
  for ((r = 0; r < n; r++)); do
    # The higher rank is named first: rank 1 first, or a rank above it first.
    check "rank $r: CC_ERR_MISMATCH naming op #$at and both calls" "$out" \
      "^\[rank $r\] VERDICT .* CC_ERR_MISMATCH.*\(rank 1 (host [^)]*) called op #$at $odd, but rank [0-9] (host [^)]*) called op #$at $even\|rank [2-9] (host [^)]*) called op #$at $even, but rank 1 (host [^)]*) called op #$at $odd\); the ranks diverged after op #$before"
  done
}

# Every rank of the child is told of op #15 by the child; the parent ends clean.
split_ends() {  # split_ends N
  local n=$1 out=$WORK/split-$1 c=$((1024 + 15))
  ccrun "$n" "$out" split 15 || { echo "   FAILED: cc-run exited with $?"; bad=1; }
  local odd="cc_allreduce $((c + 1)) x FLOAT32 SUM" even="cc_allreduce $c x FLOAT32 SUM"
  for ((r = 0; r < n; r++)); do
    check "rank $r: the child's CC_ERR_MISMATCH naming op #15 and both calls" "$out" \
      "^\[rank $r\] VERDICT .* CC_ERR_MISMATCH.*\(rank 1 (host [^)]*) called op #15 $odd, but rank [0-9] (host [^)]*) called op #15 $even\|rank [2-9] (host [^)]*) called op #15 $even, but rank 1 (host [^)]*) called op #15 $odd\); the ranks diverged after op #14"
    check "rank $r: the parent's destroy clean" "$out" "^\[rank $r\] PARENT ok"
  done
}

# replay-other: graph replay #3 named on every rank, both graphs named;
# replay-same and replay-unchecked (the check off): no rank told. In each,
# cc_comm_destroy is refused while the graphs live (NCCL would wait for
# them without end): the communicator counts them, check or not.
replay_ends() {  # replay_ends WAY N
  local way=$1 n=$2 out=$WORK/replay-$1-$2
  if [ "$way" = unchecked ]; then
    CC_CHECK_CALLS=0 ccrun "$n" "$out" replay same || { echo "   FAILED: cc-run exited with $?"; bad=1; }
  else
    ccrun "$n" "$out" replay "$way" || { echo "   FAILED: cc-run exited with $?"; bad=1; }
  fi
  for ((r = 0; r < n; r++)); do
    check "rank $r: cc_comm_destroy refused while the graphs live" "$out" \
      "^\[rank $r\] GRAPHS refused: .* CUDA graph(s) that captured this communicator's calls are still alive"
  done
  if [ "$way" != other ]; then
    [ "$(grep -c '^\[rank [0-9]*\] VERDICT none' "$out")" -eq "$n" ] && echo "   ok: no rank told" ||
      { echo "   FAILED: a rank was told"; sed 's/^/   | /' "$out" | tail -n 40; bad=1; }
    return
  fi
  local odd="a graph of 2 calls (the first cc_allreduce 1024 x FLOAT32 MAX)"
  local even="a graph of 2 calls (the first cc_allreduce 1024 x FLOAT32 SUM)"
  for ((r = 0; r < n; r++)); do
    check "rank $r: CC_ERR_MISMATCH naming graph replay #3 and both graphs" "$out" \
      "^\[rank $r\] VERDICT .* CC_ERR_MISMATCH.*graph replay #3: \(rank 1 (host [^)]*) replayed $odd, but rank [0-9] (host [^)]*) replayed $even\|rank [2-9] (host [^)]*) replayed $even, but rank 1 (host [^)]*) replayed $odd\); their replays agree up to graph replay #2"
  done
}

for s in "${SCENARIOS[@]}"; do
  echo "== $s"
  case $s in
    none-*) ends none 0 "${s#none-}" ;;
    split-*) split_ends "${s#split-}" ;;
    replay-other-* | replay-same-* | replay-unchecked-*)
      IFS=- read -r _ way n <<<"$s"; replay_ends "$way" "$n" ;;
    *-*-*) IFS=- read -r way at n <<<"$s"; ends "$way" "$at" "$n" ;;
    *) echo "unknown scenario $s"; bad=1 ;;
  esac
done
[ $bad -eq 0 ] && echo "gpu_call_ends: all passed" || echo "gpu_call_ends: FAILED"
exit $bad
