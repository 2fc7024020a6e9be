#!/bin/bash
# cc-run --max-restarts: a failed rank is started again with CC_RESTART_COUNT
# while restarts are left, the others are never stopped for it, and the exit
# status is that of the first rank that failed and was not started again.
# Then whole jobs of recovery_member ranks (the library's recovery step, no
# GPU): one rank killed and started again rejoins through regrow; rank 0
# killed while the server lives in cc-run, the others shrink.
# Usage: cc_run_restarts.sh PATH/TO/cc-run PATH/TO/recovery_member
set -u
run=$1 member=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$dir/out"; exit 1; }
expect() { grep -q -- "$1" "$dir/out" || fail "no '$1'"; }
# job STEP WANT CMD...: runs the step's job, its output in $dir/out; its exit
# status must be WANT.
job() {
  local step=$1 want=$2
  shift 2
  "$@" >"$dir/out" 2>&1
  local rc=$?
  [ $rc -eq "$want" ] || fail "$step: exit status $rc, want $want"
}

# 1. Rank 1 dies once and is started again; the job ends well.
job 1 0 timeout 60 "$run" -n 3 --max-restarts 1 -- sh -c \
  'if [ "$RANK" = 1 ] && [ -z "${CC_RESTART_COUNT:-}" ]; then kill -9 $$; fi; sleep 0.3;
   echo "rank $RANK restart ${CC_RESTART_COUNT:-none}"'
expect "^\[rank 1\] rank 1 restart 1$"
expect "^\[rank 0\] rank 0 restart none$"
expect "^\[rank 2\] rank 2 restart none$"
expect "cc-run: rank 1 (pid [0-9]*) exited with status 137 (killed by signal 9: Killed); starting it again (restart 1 of 1)"

# 2. Rank 1 dies every time: two restarts, then it stays down; rank 0 is never
# stopped (it outlives the grace period) and cc-run exits with rank 1's status.
job 2 137 timeout 60 "$run" -n 2 --max-restarts 2 --grace-ms 100 -- sh -c \
  'if [ "$RANK" = 1 ]; then echo "start ${CC_RESTART_COUNT:-0}"; kill -9 $$; fi; sleep 1.5;
   echo "rank 0 lived"'
expect "^\[rank 1\] start 0$"
expect "^\[rank 1\] start 1$"
expect "^\[rank 1\] start 2$"
grep -q "start 3" "$dir/out" && fail "2: a third restart"
expect "no restart left (2 used); the other ranks run on"
expect "^\[rank 0\] rank 0 lived$"

# 3. --max-restarts 0: no restart, and the others still run on.
job 3 3 timeout 60 "$run" -n 2 --max-restarts 0 --grace-ms 100 -- sh -c \
  'if [ "$RANK" = 0 ]; then exit 3; fi; sleep 1; echo "rank 1 lived"'
expect "^\[rank 1\] rank 1 lived$"

# 4. A job that recovers: rank 1 killed, started again, taken back by regrow.
job 4 0 env CC_LOG_LEVEL=error timeout 90 "$run" -n 4 --max-restarts 1 -- \
  "$member" env --auto regrow --die-rank 1
for r in 0 2 3; do
  expect "^\[rank $r\] RECOVERED gen=1 rank=$r size=4 members=0,1,2,3 failed=1 "
done
expect "^\[rank 1\] READY rank=1 gen=1 size=4 failed=1$"
[ "$(grep -c '\] LEFT$' "$dir/out")" -eq 4 ] || fail "4: not every rank left"

# 5. Rank 0 killed: the server lives in cc-run, so the others shrink and go on.
job 5 137 env CC_LOG_LEVEL=error timeout 90 "$run" -n 3 --max-restarts 0 -- \
  "$member" env --auto shrink --die-rank 0  # rank 0's status
expect "^\[rank 1\] RECOVERED gen=1 rank=0 size=2 members=1,2 failed=0 "
expect "^\[rank 2\] RECOVERED gen=1 rank=1 size=2 members=1,2 failed=0 "
echo "ok"
