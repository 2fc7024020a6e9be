#!/bin/bash
# The watchdog's control channel across a pulled cable: ranks 0 (host a) and
# 1 (host b) of a job on a plain cc-rendezvous (no --heartbeat-timeout-ms:
# each member declares its own window, 300 ms x 5 misses). b's link goes
# down: a is told "rank 1 failed: no heartbeat" after about the window, and
# b, hearing nothing from the server, gives up on it too. Argument 5: the
# failure_member program.
. "$(dirname "$0")/netns_lib.sh"
FAILURE_MEMBER=${5:?netns_watchdog.sh needs the failure_member program}
netns_setup
start_server
export CC_LOG_LEVEL=error

bg "$NS_A" m0 "$FAILURE_MEMBER" "$ADDR_RV" "$RV_PORT" wd 0 2 --external --interval 300 --misses 5
bg "$NS_B" m1 "$FAILURE_MEMBER" "$ADDR_RV" "$RV_PORT" wd 1 2 --external --interval 300 --misses 5
wait_line m0 '^READY 0' 15 || fail "rank 0 did not join"
wait_line m1 '^READY 1' 15 || fail "rank 1 did not join"

sleep 2.5  # longer than the window: a healthy job hears of no failure
grep -q '^FAILED' "$WORK/m0.out" "$WORK/m1.out" && fail "a failure while every link was up"

t_down=$(now_ms)
link_down b
wait_line m0 '^FAILED' 8 || fail "rank 0 was not told within 8 s of rank 1's link going down"
delay=$(( $(now_ms) - t_down ))
line=$(grep -m1 '^FAILED' "$WORK/m0.out")
note "rank 0 told after about $delay ms: $line"
echo "$line" | grep -q "^FAILED rank 1 (host .* pid [0-9]*) failed: no heartbeat for 1500 ms" ||
  fail "expected 'rank 1 (host .. pid ..) failed: no heartbeat for 1500 ms': $line"
[ "$delay" -ge 700 ] || fail "told after $delay ms: too soon for a 1500 ms window"
[ "$delay" -le 4500 ] || fail "told after $delay ms: much later than the 1500 ms window"

wait_line m1 '^FAILED' 8 || fail "rank 1 did not notice that the rendezvous is out of reach"
line=$(grep -m1 '^FAILED' "$WORK/m1.out")
note "rank 1: $line"
echo "$line" | grep -q "^FAILED the rendezvous server at $ADDR_RV:$RV_PORT is gone: nothing heard from it" ||
  fail "expected rank 1 to name the unreachable server: $line"
note "passed"
