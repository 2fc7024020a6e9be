#!/bin/bash
# Two members of a job on hosts a and b heartbeat to the rendezvous on rv.
# b's cable is pulled mid-job: the server misses b's heartbeats and tells a
# (rank 1 failed) within the configured window; b's own heartbeat fails.
. "$(dirname "$0")/netns_lib.sh"
netns_setup
HB_TIMEOUT=1500
HB_MS=300
start_server --heartbeat-timeout-ms "$HB_TIMEOUT"

bg "$NS_A" m0 "$MEMBER" "$HOST_RV" "$RV_PORT" 0 2 "$HB_MS" 20000
bg "$NS_B" m1 "$MEMBER" "$HOST_RV" "$RV_PORT" 1 2 "$HB_MS" 20000
wait_line m0 '^joined' 10 || fail "rank 0 did not join"
wait_line m1 '^joined' 10 || fail "rank 1 did not join"

sleep 2  # longer than the heartbeat timeout: a healthy job raises nothing
grep -qE '^(event|hbfail)' "$WORK/m0.out" "$WORK/m1.out" && fail "an event while every link was up"

t_down=$(now_ms)
link_down b
wait_line m0 '^event' 8 || fail "rank 0 was not told within 8 s of rank 1's link going down"
line=$(grep -m1 '^event' "$WORK/m0.out")
at=$(echo "$line" | sed -E 's/.* at_ms ([0-9]+):.*/\1/')
delay=$(( at - t_down ))
note "rank 0 told after $delay ms: $line"
echo "$line" | grep -q "^event failed rank 1 " || fail "expected 'failed rank 1': $line"
echo "$line" | grep -q "heartbeat" || fail "the reason does not mention heartbeats: $line"
# Not suspiciously early (the verdict is about heartbeats), no later than the window + one heartbeat + slack.
[ "$delay" -ge $(( HB_TIMEOUT / 3 )) ] || fail "told after $delay ms: too soon for a missed-heartbeat verdict ($HB_TIMEOUT ms)"
[ "$delay" -le $(( HB_TIMEOUT + HB_MS + 1500 )) ] || fail "told after $delay ms: later than the window ($HB_TIMEOUT ms) + slack"

wait_line m1 '^hbfail' 8 || fail "rank 1 did not notice that its rendezvous is gone"
note "rank 1: $(grep -m1 '^hbfail' "$WORK/m1.out")"
