#!/usr/bin/env bash
# The failure figures, on a GPU machine with 2 GPUs (about 3 minutes):
#  1. Time from the death of a rank to the survivor's error: TRIALS runs of
#     tests/gpu/gpu_failures.sh kill-loop (2 ranks by hand looping 64 MiB
#     all-reduces, rank 1 SIGKILLed); prints every trial, the median and the
#     worst. Goal: median <= 1000 ms, worst <= 2000 ms.
#  2. The watchdog's cost on small all-reduces: cc-bench -C allreduce -b 8
#     -e 64K under cc-run -n 2, with CC_WATCHDOG=1 and =0 (same build),
#     ROUNDS alternating runs each; prints the median time per size for both
#     and the difference. Goal: <= 0.5 us.
#
#   scripts/failure-bench.sh BUILD [OUT]      (TRIALS=10 ROUNDS=3 by default)
# Exit status 0 when both goals are met.
set -u
BUILD=$(cd "${1:?usage: failure-bench.sh BUILD [OUT]}" && pwd) || exit 2
. "$(dirname "$0")/bench_lib.sh" "${2:-}"
ROUNDS=${ROUNDS:-3}
export CC_LOG_LEVEL=${CC_LOG_LEVEL:-warn}
ok=0

echo "== time from a rank's death to the survivor's error ($TRIALS trials)"
: >"$OUT/detect_ms.txt"
for ((t = 1; t <= TRIALS; t++)); do
  timeout --kill-after=10 120 bash "$HERE/tests/gpu/gpu_failures.sh" "$BUILD/tests/gpu/gpu_failures" kill-loop \
    >"$OUT/kill-$t.log" 2>&1
  rc=$?
  ms=$(awk '/^DETECT_MS/{print $2; exit}' "$OUT/kill-$t.log")
  echo "trial $t: ${ms:-none} ms (exit $rc)"
  [ $rc -eq 77 ] && { echo "no GPU here"; exit 77; }
  if [ -n "$ms" ]; then echo "$ms" >>"$OUT/detect_ms.txt"; else ok=1; fi
done
summary "$OUT/detect_ms.txt" "death to error"
awk -v m="$MED" -v w="${WORST:-999999}" 'BEGIN {exit !(m <= 1000 && w <= 2000)}' || { echo "!! over the goal (median <= 1000, worst <= 2000)"; ok=1; }

echo "== watchdog cost on small all-reduces (cc-bench, CC_WATCHDOG=1 vs 0, $ROUNDS rounds)"
for ((r = 1; r <= ROUNDS; r++)); do
  for wd in 1 0; do
    CC_WATCHDOG=$wd timeout --kill-after=10 120 "$BUILD/tools/cc-run" -n 2 --timeout-ms 60000 -- \
      "$BUILD/tools/cc-bench" -C allreduce -b 8 -e 64K -n 2000 -w 200 -i 0 -c 0 \
      --csv "$OUT/bench-wd$wd-$r.csv" >"$OUT/bench-wd$wd-$r.txt" 2>&1 ||
      { echo "!! cc-bench CC_WATCHDOG=$wd round $r failed: see $OUT/bench-wd$wd-$r.txt"; ok=1; }
  done
done
# size -> median time over rounds, for cc's own rows.
table() {
  cat "$OUT"/bench-wd"$1"-*.csv 2>/dev/null | awk -F, '$1 == "allreduce" && $9 == "cc" {print $3, $12}' |
    sort -n -k1,1 -k2,2 | awk '{v[$1] = v[$1] " " $2} END {for (s in v) print s, v[s]}' |
    while read -r size times; do echo "$size $(echo "$times" | tr ' ' '\n' | grep . | median)"; done | sort -n
}
table 1 >"$OUT/wd1.txt"
table 0 >"$OUT/wd0.txt"
printf '%10s %12s %12s %10s\n' bytes "on (us)" "off (us)" "cost (us)"
join <(sort -k1,1 "$OUT/wd1.txt") <(sort -k1,1 "$OUT/wd0.txt") | sort -n | awk '{printf "%10d %12.2f %12.2f %10.2f\n", $1, $2, $3, $2 - $3; d += $2 - $3; n++}
  END {if (n) printf "mean cost over %d sizes: %.2f us\n", n, d / n; else print "no rows"}' | tee "$OUT/cost.txt"
awk '/^mean cost/ {found = 1; good = ($(NF-1) <= 0.5)} END {exit !(found && good)}' "$OUT/cost.txt" || { echo "!! the watchdog costs more than 0.5 us"; ok=1; }
echo "logs: $OUT"
exit $ok
