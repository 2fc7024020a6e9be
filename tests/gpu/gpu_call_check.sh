#!/usr/bin/env bash
# Calls checked across ranks, on one GPU: every rank under
# `cc-run --share-gpu -n N` (N = 2 and 4), messages and flight recorder files
# checked.
#
#   gpu_call_check.sh BUILD [SCENARIO...]     (default: all of them)
#   scenarios: diverge-WAY-N (WAY: kind count type op root skip extra; N: 2 4),
#              legal-2, legal-4, split-4, trace-mismatch, trace-timeout, trace-kill,
#              trace-sigusr1
#
# diverge: rank 1 makes another call at op #50; every rank must return
# CC_ERR_MISMATCH within 5 s naming both calls. legal: two communicators used
# interleaved on two streams: nothing flagged. split: two children of a
# split, one whose ranks differ (flagged) and one whose ranks agree (not
# flagged), each compared on its own. trace-*: after a mismatch,
# a timeout, a killed rank and a SIGUSR1, the files in CC_TRACE_DIR and what
# `cc-doctor trace` says of them. Exit 0 when every scenario passed, 77 with
# no GPU, 1 otherwise.
set -u
BUILD=${1:?usage: gpu_call_check.sh BUILD [SCENARIO...]}
shift
BIN=$BUILD/tests/gpu/gpu_call_check
CC_RUN=$BUILD/tools/cc-run
DOCTOR=$BUILD/tools/cc-doctor
WAYS=(kind count type op root skip extra)
SCENARIOS=("$@")
if [ ${#SCENARIOS[@]} -eq 0 ]; then
  for n in 2 4; do
    for way in "${WAYS[@]}"; do SCENARIOS+=("diverge-$way-$n"); done
    SCENARIOS+=("legal-$n")
  done
  SCENARIOS+=(split-4 trace-mismatch trace-timeout trace-kill trace-sigusr1)
fi

. "$(dirname "$0")/gpu_ranks_lib.sh" gpu_call_check
. "$(dirname "$0")/../common/poll.sh"
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export CC_LOG_LEVEL=${CC_LOG_LEVEL:-warn}

# ccrun N OUT ARGS...: the program under cc-run --share-gpu, output in OUT.
ccrun() {
  local n=$1 out=$2
  shift 2
  timeout --kill-after=10 120 "$CC_RUN" --share-gpu -n "$n" --grace-ms 15000 -- "$BIN" "$@" \
    >"$out" 2>&1
}

diverge() {  # diverge WAY N
  local way=$1 n=$2 out=$WORK/diverge-$1-$2 r
  ccrun "$n" "$out" diverge "$way"
  local rc=$?
  [ $rc -eq 0 ] || { echo "   FAILED: cc-run exited with $rc"; sed 's/^/   | /' "$out" | tail -n 40; bad=1; }
  for ((r = 0; r < n; r++)); do
    check "rank $r: CC_ERR_MISMATCH" "$out" "^\[rank $r\] MISMATCH_MS [0-9]* CC_ERR_MISMATCH"
  done
  # Which of the two is named first depends on which ranks' reports the
  # rendezvous compared first (with 4 ranks rank 1 may meet rank 2 or 3 before
  # rank 0): the higher rank comes first, so either order is right here.
  check "names op #50 and rank 1" "$out" "rank [0-9] (host [^)]*) called op #50 .*, but rank [0-9] (host [^)]*) called op #50 .*" &&
    check "rank 1 among them" "$out" "MISMATCH_MS.*rank 1 (host [^)]*) called op #50"
  local odd even
  case $way in
    kind) odd="cc_allgather 1024 x FLOAT32" even="cc_allreduce 4096 x FLOAT32 SUM" ;;
    count) odd="cc_allreduce 4097 x FLOAT32 SUM" even="cc_allreduce 4096 x FLOAT32 SUM" ;;
    type) odd="cc_allreduce 4096 x FLOAT16 SUM" even="cc_allreduce 4096 x FLOAT32 SUM" ;;
    op) odd="cc_allreduce 4096 x FLOAT32 MAX" even="cc_allreduce 4096 x FLOAT32 SUM" ;;
    root) odd="cc_broadcast 4096 x FLOAT32 root 1" even="cc_broadcast 4096 x FLOAT32 root 0" ;;
    skip) odd="cc_allreduce 4096 x FLOAT32 SUM" even="cc_broadcast 4096 x FLOAT32 root 0" ;;
    extra) odd="cc_barrier" even="cc_allreduce 4096 x FLOAT32 SUM" ;;
  esac
  check "both calls" "$out" "$odd, but .* $even; the ranks diverged after op #49\|$even, but .* $odd; the ranks diverged after op #49"
}

legal() {  # legal N
  local n=$1 out=$WORK/legal-$1
  ccrun "$n" "$out" legal
  local rc=$?
  [ $rc -eq 0 ] || { echo "   FAILED: cc-run exited with $rc"; sed 's/^/   | /' "$out" | tail -n 40; bad=1; }
  [ "$(grep -c '^\[rank [0-9]*\] OK legal' "$out")" -eq "$n" ] && echo "   ok: $n ranks not flagged" ||
    { echo "   FAILED: not every rank said OK legal"; bad=1; }
}

split4() {
  local out=$WORK/split-4
  ccrun 4 "$out" split
  local rc=$?
  [ $rc -eq 0 ] || { echo "   FAILED: cc-run exited with $rc"; sed 's/^/   | /' "$out" | tail -n 40; bad=1; }
  for r in 0 2; do
    check "rank $r (the differing child): CC_ERR_MISMATCH" "$out" "^\[rank $r\] MISMATCH_MS [0-9]* CC_ERR_MISMATCH"
  done
  for r in 1 3; do
    check "rank $r (the agreeing child): not flagged" "$out" "^\[rank $r\] OK split alike"
  done
  check "both calls" "$out" "cc_allreduce 4097 x FLOAT32 SUM, but .* cc_allreduce 4096 x FLOAT32 SUM; the ranks diverged after op #49\|cc_allreduce 4096 x FLOAT32 SUM, but .* cc_allreduce 4097 x FLOAT32 SUM; the ranks diverged after op #49"
}

# doctor DIR OUT: cc-doctor trace on DIR, its text in OUT.
doctor() { "$DOCTOR" trace "$1" >"$2" 2>&1; }

trace_mismatch() {
  local dir=$WORK/trace-mismatch out=$WORK/trace-mismatch.out
  CC_TRACE_DIR=$dir ccrun 2 "$out" diverge kind
  ls "$dir"/cc-trace.*.r0.json "$dir"/cc-trace.*.r1.json >/dev/null 2>&1 && echo "   ok: both files" ||
    { echo "   FAILED: no file from every rank in $dir: $(ls "$dir" 2>&1)"; bad=1; }
  doctor "$dir" "$WORK/doctor-mismatch"
  check "cc-doctor names op #50" "$WORK/doctor-mismatch" "first difference: op #50: .*cc_allgather 1024 x FLOAT32.*the ranks diverged after op #49"
  check "written on a mismatch" "$WORK/doctor-mismatch" "written on mismatch"
}

trace_timeout() {
  local dir=$WORK/trace-timeout out=$WORK/trace-timeout.out
  CC_TRACE_DIR=$dir CC_TIMEOUT_MS=3000 ccrun 2 "$out" skip
  check "the deadline's words say where each rank is" "$out" "rank 1 is in op #19 cc_allreduce 4096 x FLOAT32 SUM while rank 0 is in op #20 cc_allreduce 4096 x FLOAT32 SUM"
  doctor "$dir" "$WORK/doctor-timeout"
  check "rank 0's file, written on the timeout" "$WORK/doctor-timeout" "rank 0 (host [^)]*), written on timeout"
  check "cc-doctor: rank 1 behind" "$WORK/doctor-timeout" "behind: rank 1 is in op #19"
}

trace_kill() {
  local dir=$WORK/trace-kill out=$WORK/trace-kill.out
  CC_TRACE_DIR=$dir LOOP_MS=60000 ccrun 2 "$out" loop &
  local job=$!
  if ! poll 60 grep -q '^\[rank 1\] LOOPING pid' "$out"; then
    echo "   FAILED: rank 1 never looped"; sed 's/^/   | /' "$out" | tail -n 20; bad=1; return
  fi
  kill -9 "$(sed -n 's/^\[rank 1\] LOOPING pid \([0-9]*\).*/\1/p' "$out" | head -1)"
  wait "$job"
  check "rank 0 names the failed rank" "$out" "^\[rank 0\] ERROR CC_ERR_PEER_FAILED"
  doctor "$dir" "$WORK/doctor-kill"
  check "rank 0's file, written on the failure" "$WORK/doctor-kill" "rank 0 (host [^)]*), written on failure"
  check "no file from the killed rank" "$WORK/doctor-kill" "no file from rank 1"
}

has_match() { compgen -G "$1" >/dev/null; }  # has_match PATTERN: some file matches it now

trace_sigusr1() {
  local dir=$WORK/trace-sigusr1 out=$WORK/trace-sigusr1.out
  CC_TRACE_DIR=$dir LOOP_MS=8000 ccrun 2 "$out" loop &
  local job=$!
  if ! poll 60 grep -q '^\[rank 0\] LOOPING pid' "$out"; then
    echo "   FAILED: rank 0 never looped"; bad=1; wait "$job"; return
  fi
  kill -USR1 "$(sed -n 's/^\[rank 0\] LOOPING pid \([0-9]*\).*/\1/p' "$out" | head -1)"
  # The pattern goes to poll unexpanded: expanded here, before the file exists, it would never match.
  poll 5 has_match "$dir/cc-trace.*.r0.json" && echo "   ok: rank 0 wrote its file on SIGUSR1" ||
    { echo "   FAILED: no file after SIGUSR1"; bad=1; }
  wait "$job"
  check "the ranks went on" "$out" "^\[rank 0\] OK loop ended"
  doctor "$dir" "$WORK/doctor-sigusr1"
  check "written on SIGUSR1" "$WORK/doctor-sigusr1" "written on SIGUSR1"
}

for s in "${SCENARIOS[@]}"; do
  echo "== $s"
  case $s in
    diverge-*) way=${s#diverge-}; diverge "${way%-*}" "${way##*-}" ;;
    legal-*) legal "${s#legal-}" ;;
    split-4) split4 ;;
    trace-mismatch) trace_mismatch ;;
    trace-timeout) trace_timeout ;;
    trace-kill) trace_kill ;;
    trace-sigusr1) trace_sigusr1 ;;
    *) echo "unknown scenario $s"; bad=1 ;;
  esac
done
[ $bad -eq 0 ] && echo "gpu_call_check: all passed" || echo "gpu_call_check: FAILED"
exit $bad
