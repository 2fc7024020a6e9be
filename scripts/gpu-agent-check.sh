#!/usr/bin/env bash
# cc-run's node agent on a GPU machine, from a staged build
# (scripts/stage-build.sh; STAGE_ETCD=1 carries etcd, as etcd or etcd.xz, and
# the plugin's libraries): the examples through the agent on etcd (2 ranks
# sharing GPU 0, cc-run --share-gpu), a rank killed under it (the regrow's
# weights equal a run without failure; the shrink), and cc_comm_init's time
# with and without the agent on cc's server and on etcd (cc-bench, 5 runs
# each, printed, not judged).
#
#   scripts/gpu-agent-check.sh BUILD OUT
#
# Logs go to OUT/; the last line is "gpu agent check: N passed, N failed".
set -u
[ $# -eq 2 ] || { echo "usage: $0 BUILD OUT" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && OUT=$(cd "$2" && pwd) || exit 2
export NCCL_NVLS_ENABLE=0 CC_LOG_LEVEL=${CC_LOG_LEVEL:-error}
TOOLS=$BUILD/etcd-tools
if [ -f "$TOOLS/etcd.xz" ] && [ ! -x "$TOOLS/etcd" ]; then
  python3 -c "import lzma, sys; open(sys.argv[2], 'wb').write(lzma.open(sys.argv[1]).read())" \
    "$TOOLS/etcd.xz" "$TOOLS/etcd" && chmod +x "$TOOLS/etcd"
fi
[ -d "$TOOLS/lib" ] && export LD_LIBRARY_PATH=$TOOLS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ETCD=$([ -x "$TOOLS/etcd" ] && echo "$TOOLS/etcd" || command -v etcd)
[ -n "$ETCD" ] || { echo "gpu agent check: no etcd"; exit 77; }
RUN=$BUILD/tools/cc-run
. "$(dirname "$0")/../tests/common/etcd_member.sh"
DATA=$(mktemp -d)
start_etcd_member "$ETCD" "$DATA" "$OUT/etcd.log"
trap 'kill $ETCD_PID 2>/dev/null; rm -rf "$DATA"' EXIT
sleep 2
ADDR=etcd://127.0.0.1:$CLIENT
passed=0 failed=0
step() {  # NAME OK(0/1)
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "-- $1: passed"
  else failed=$((failed + 1)); echo "-- $1: FAILED (log: $OUT/$1.log)"; tail -5 "$OUT/$1.log" | sed 's/^/   | /'; fi
}
hash_of() { grep -o 'weights hash [0-9a-fx]*' "$1" | sort -u; }

timeout 300 "$RUN" -n 2 --share-gpu --master-addr "$ADDR" -- "$BUILD/examples/allreduce" \
  >"$OUT/etcd-agent-allreduce.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'after all-reduce: 3.0' "$OUT/etcd-agent-allreduce.log")" -eq 2 ]
step etcd-agent-allreduce $?

timeout 300 "$RUN" -n 2 --share-gpu --master-addr "$ADDR" -- "$BUILD/examples/train_recover" \
  >"$OUT/etcd-agent-train.log" 2>&1
ok=$?
timeout 300 "$RUN" -n 2 --share-gpu --max-restarts 1 --master-addr "$ADDR" -- \
  "$BUILD/examples/train_recover" --die-rank 1 --die-at 50 >"$OUT/etcd-agent-regrow.log" 2>&1
rc=$?
want=$(hash_of "$OUT/etcd-agent-train.log") got=$(hash_of "$OUT/etcd-agent-regrow.log")
[ $ok -eq 0 ] && [ $rc -eq 0 ] && [ -n "$want" ] && [ "$want" = "$got" ]
step etcd-agent-regrow $?

for how in agent no-agent; do
  flag=$([ $how = no-agent ] && echo --no-agent)
  start=$(date +%s%N)
  timeout 300 "$RUN" -n 2 --share-gpu --max-restarts 0 $flag --master-addr "$ADDR" -- \
    "$BUILD/examples/train_recover" --shrink --die-rank 1 --die-at 50 >"$OUT/etcd-$how-shrink.log" 2>&1
  rc=$?
  echo "   shrink run ($how): $(((($(date +%s%N) - start) / 1000000))) ms in all"
  [ $rc -eq 137 ] && grep -q "weights hash" "$OUT/etcd-$how-shrink.log"
  step "etcd-$how-shrink" $?
done

{
  for i in 1 2 3 4 5; do
    for rv in server etcd; do
      for how in agent no-agent; do
        flag=$([ $how = no-agent ] && echo --no-agent)
        addr=$([ $rv = etcd ] && echo "--master-addr $ADDR")
        # shellcheck disable=SC2086
        timeout 120 "$RUN" -n 2 --share-gpu $flag $addr -- "$BUILD/tools/cc-bench" -b 8 -e 8 -n 2 -w 1 \
          2>&1 | grep 'cc_comm_init:' | sed "s/^/$rv $how: /"
      done
    done
  done
} >"$OUT/init-times.log"
cat "$OUT/init-times.log"
echo "gpu agent check: $passed passed, $failed failed"
[ $failed -eq 0 ]
