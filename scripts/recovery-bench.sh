#!/usr/bin/env bash
# The recovery figures, on a GPU machine with 2 GPUs (about 5 minutes):
#  1. Death of a rank to the survivor's first correct collective on the
#     shrunk communicator: TRIALS runs of tests/gpu/gpu_recovery.sh
#     shrink-by-hand (2 ranks by hand, rank 0 hosting the server, rank 1
#     SIGKILLed while both loop all-reduces), once as cc does by default
#     (ncclCommShrink where the NCCL loaded has it) and once with
#     CC_NCCL_SHRINK=0 (a new NCCL communicator). Goal: median <= 1000 ms.
#  2. A replacement's start to its first correct collective on the regrown
#     communicator (cc-run -n 2 --max-restarts 1, rank 1 killed and started
#     again, gpu_recovery regrow), next to a plain start's to its first
#     collective (cc-run -n 2, gpu_recovery init): TRIALS runs each.
#     Goal: regrow median <= init median + 1000 ms.
# Each prints every trial, the median and the worst.
#
#   scripts/recovery-bench.sh BUILD [OUT]      (TRIALS=10 by default)
# Exit status 0 when every trial worked and every goal is met (last line
# "recovery bench: 1 passed, 0 failed"), 77 with no GPU. Also a part of
# scripts/gpu-session.sh (recovery-bench).
set -u
BUILD=$(cd "${1:?usage: recovery-bench.sh BUILD [OUT]}" && pwd) || exit 2
. "$(dirname "$0")/bench_lib.sh" "${2:-}"
export CC_TIMEOUT_MS=${CC_TIMEOUT_MS:-60000}
BIN=$BUILD/tests/gpu/gpu_recovery
ok=0

"$BIN" probe || { [ $? -eq 77 ] && { echo "no GPU here"; exit 77; }; echo "gpu_recovery probe failed"; exit 1; }

for how in default new-id; do
  echo "== death to the first correct collective on the shrunk communicator ($how, $TRIALS trials)"
  : >"$OUT/shrink-$how.txt"
  for ((t = 1; t <= TRIALS; t++)); do
    env $([ $how = new-id ] && echo CC_NCCL_SHRINK=0) RECOVERY_LOGS="$OUT/shrink-$how-$t" timeout --kill-after=10 180 \
      bash "$HERE/tests/gpu/gpu_recovery.sh" "$BUILD" shrink-by-hand >"$OUT/shrink-$how-$t.log" 2>&1
    rc=$?
    ms=$(awk '/^RECOVER_MS/{print $2; exit}' "$OUT/shrink-$how-$t.log")
    made=$(grep -o "made by [a-zA-Z ]*" "$OUT/shrink-$how-$t.log" | head -1)
    echo "trial $t: ${ms:-none} ms (exit $rc; $made)"
    if [ -n "$ms" ] && [ $rc -eq 0 ]; then echo "$ms" >>"$OUT/shrink-$how.txt"; else ok=1; fi
  done
  summary "$OUT/shrink-$how.txt" "death to first correct collective, $how"
  [ "$how" = default ] && { awk -v m="$MED" 'BEGIN {exit !(m <= 1000)}' || { echo "!! over the goal (median <= 1000 ms)"; ok=1; }; }
done

# ms from START_AT to FIRST_AT in a log, for one rank.
first_ms() { awk -v r="[rank $2]" 'index($0, r " START_AT") == 1 {s = $4} index($0, r " FIRST_AT") == 1 {f = $4} END {if (s && f) print int((f - s) / 1000000)}' "$1"; }

echo "== a replacement's start to its first correct collective, against a plain start ($TRIALS trials each)"
: >"$OUT/regrow.txt"
: >"$OUT/init.txt"
for ((t = 1; t <= TRIALS; t++)); do
  timeout --kill-after=10 180 "$BUILD/tools/cc-run" -n 2 --max-restarts 1 -- "$BIN" regrow >"$OUT/regrow-$t.log" 2>&1
  rc=$?
  ms=$(first_ms "$OUT/regrow-$t.log" 1)
  timeout --kill-after=10 180 "$BUILD/tools/cc-run" -n 2 -- "$BIN" init >"$OUT/init-$t.log" 2>&1
  rc2=$?
  ms2=$(first_ms "$OUT/init-$t.log" 1)
  echo "trial $t: replacement ${ms:-none} ms (exit $rc), plain start ${ms2:-none} ms (exit $rc2)"
  if [ -n "$ms" ] && [ $rc -eq 0 ]; then echo "$ms" >>"$OUT/regrow.txt"; else ok=1; fi
  if [ -n "$ms2" ] && [ $rc2 -eq 0 ]; then echo "$ms2" >>"$OUT/init.txt"; else ok=1; fi
done
summary "$OUT/regrow.txt" "replacement start to first correct collective (regrow)"
regrow_med=$MED
summary "$OUT/init.txt" "plain start to first correct collective (init)"
awk -v g="$regrow_med" -v i="$MED" 'BEGIN {exit !(g <= i + 1000)}' ||
  { echo "!! over the goal (regrow <= init + 1000 ms)"; ok=1; }
echo "logs: $OUT"
if [ $ok -eq 0 ]; then echo "recovery bench: 1 passed, 0 failed"; else echo "recovery bench: 0 passed, 1 failed"; fi
exit $ok
