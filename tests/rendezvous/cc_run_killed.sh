#!/bin/bash
# cc-run killed outright (SIGKILL): its ranks die with it, and the folder of
# its node agent's socket, left behind, is removed by the next cc-run.
# Usage: cc_run_killed.sh PATH/TO/cc-run
set -u
run=$1
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
export TMPDIR=$dir
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$dir/out" 2>/dev/null; exit 1; }
# A process that has exited, even one nobody reaped yet, is not running.
running() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }

"$run" -n 2 -- sh -c 'echo $$ >"$TMPDIR/rank$RANK.pid"; exec sleep 300' >"$dir/out" 2>&1 &
pid=$!
for ((i = 0; i < 300; i++)); do
  [ -s "$dir/rank0.pid" ] && [ -s "$dir/rank1.pid" ] && break
  sleep 0.1
done
[ -s "$dir/rank0.pid" ] && [ -s "$dir/rank1.pid" ] || fail "the ranks did not start in 30 s"
ranks=("$(cat "$dir/rank0.pid")" "$(cat "$dir/rank1.pid")")
folders=("$dir"/cc-agent-*)
[ ${#folders[@]} -eq 1 ] && [ -S "${folders[0]}/agent.sock" ] ||
  fail "want one node agent folder with its socket in $dir, found: ${folders[*]}"

kill -9 "$pid"
wait "$pid" 2>/dev/null
for ((i = 0; i < 100; i++)); do
  running "${ranks[0]}" || running "${ranks[1]}" || break
  sleep 0.1
done
for r in "${ranks[@]}"; do
  running "$r" && fail "rank process $r still runs 10 s after its cc-run was killed"
done
echo "ok: both ranks ended with their cc-run"
[ -d "${folders[0]}" ] || fail "the killed cc-run's folder is gone already: nothing left to test"

timeout 60 "$run" -n 1 -- true >"$dir/out" 2>&1 || fail "the next cc-run failed"
[ -d "${folders[0]}" ] && fail "the next cc-run left the killed one's folder ${folders[0]}"
left=("$dir"/cc-agent-*)
[ -e "${left[0]}" ] && fail "folders left after a clean cc-run: ${left[*]}"
echo "ok: the next cc-run removed the folder the killed one left"
echo "cc_run_killed: all passed"
