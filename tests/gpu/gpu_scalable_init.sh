#!/usr/bin/env bash
# NCCL's scalable init on one GPU: N ranks under `cc-run --share-gpu`, made
# from several NCCL ids (CC_NCCL_RANKS_PER_ID below N: ncclCommInitRankScalable)
# and from one (the default: ncclCommInitRankConfig); each rank checks an
# all-reduce and an all-gather, and the two runs' checksums must agree. The
# scalable run's ids are made by the ranks that root NCCL's bootstrap groups,
# each in its own process.
#
#   gpu_scalable_init.sh BUILD [SCENARIO...]    (default: all of them)
#   scenarios: N-PER (N ranks, CC_NCCL_RANKS_PER_ID=PER): 2-1 4-1 4-2
#
# Exit 0 when every scenario passed, 77 with no GPU, 1 otherwise.
set -u
BUILD=${1:?usage: gpu_scalable_init.sh BUILD [SCENARIO...]}
shift
BIN=$BUILD/tests/gpu/gpu_scalable_init
CC_RUN=$BUILD/tools/cc-run
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -eq 0 ] && SCENARIOS=(2-1 4-1 4-2)

. "$(dirname "$0")/gpu_ranks_lib.sh" gpu_scalable_init
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export CC_LOG_LEVEL=info

# run N OUT [PER]: the ranks under cc-run; every rank must print OK values.
run() {
  local n=$1 out=$2 per=${3:-}
  if [ -n "$per" ]; then
    CC_NCCL_RANKS_PER_ID=$per timeout --kill-after=10 180 "$CC_RUN" --share-gpu -n "$n" -- \
      "$BIN" values >"$out" 2>&1
  else
    timeout --kill-after=10 180 "$CC_RUN" --share-gpu -n "$n" -- "$BIN" values >"$out" 2>&1
  fi
  local rc=$?
  [ $rc -eq 0 ] || { echo "   FAILED: cc-run exited with $rc"; sed 's/^/   | /' "$out" | tail -n 40; bad=1; }
  local ok
  ok=$(grep -c "^\[rank [0-9]*\] OK values $n " "$out")
  [ "$ok" -eq "$n" ] && echo "   ok: $n ranks' all-reduce and all-gather right" ||
    { echo "   FAILED: $ok of $n ranks said OK values"; sed 's/^/   | /' "$out" | tail -n 40; bad=1; }
}
checksum() { grep -o "OK values [0-9]* [0-9]*" "$1" | awk '{ print $4 }' | sort -u; }

for s in "${SCENARIOS[@]}"; do
  n=${s%-*} per=${s#*-}
  ids=$(((n + per - 1) / per))
  echo "== $s: $n ranks, CC_NCCL_RANKS_PER_ID=$per ($ids ids)"
  run "$n" "$WORK/scalable-$s" "$per"
  check "every rank made by ncclCommInitRankScalable from $ids ids" "$WORK/scalable-$s" \
    "ncclCommInitRankScalable from $ids NCCL ids"
  [ "$(grep -c "ncclCommInitRankScalable from $ids NCCL ids" "$WORK/scalable-$s")" -eq "$n" ] ||
    { echo "   FAILED: not every rank said so"; bad=1; }
  # Each id made by the first rank of its NCCL root's group, in its own
  # process: ranks i*(n/ids) + min(i, n%ids).
  for ((i = 0; i < ids; i++)); do
    maker=$((i * (n / ids) + (i < n % ids ? i : n % ids)))
    check "id $i made by rank $maker" "$WORK/scalable-$s" \
      "^\[rank $maker\] .*rank $maker makes NCCL id $i of $ids"
  done
  [ "$(grep -c "makes NCCL id" "$WORK/scalable-$s")" -eq "$ids" ] ||
    { echo "   FAILED: not $ids ranks made ids"; bad=1; }
  run "$n" "$WORK/plain-$s"
  check "the default at $n ranks: one id" "$WORK/plain-$s" "ncclCommInitRankConfig from 1 NCCL id)"
  a=$(checksum "$WORK/scalable-$s") b=$(checksum "$WORK/plain-$s")
  if [ -n "$a" ] && [ "$a" = "$b" ]; then
    echo "   ok: the same values as a plain init ($a)"
  else
    echo "   FAILED: checksums '$a' (scalable) and '$b' (plain) differ"; bad=1
  fi
done
[ $bad -eq 0 ] && echo "gpu_scalable_init: all passed" || echo "gpu_scalable_init: FAILED"
exit $bad
