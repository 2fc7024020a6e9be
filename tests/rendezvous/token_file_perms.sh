#!/bin/bash
# Token files others can read are warned about by cc-run and by every rank
# that reads CC_RENDEZVOUS_TOKEN_FILE; a 600 file is not; the job runs either way.
# Usage: token_file_perms.sh PATH/TO/cc-run PATH/TO/store_ranks
set -u
run=$1 ranks=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf 'perm-test-token\n' > "$dir/token"
for mode in 644 640 604; do
  chmod "$mode" "$dir/token"
  CC_RENDEZVOUS_TOKEN_FILE="$dir/token" CC_LOG_LEVEL=warn timeout 60 "$run" -n 2 --timeout-ms 30000 -- "$ranks" \
    >"$dir/out" 2>&1 || fail "mode $mode: the job failed: $(cat "$dir/out")"
  grep -v '^\[rank' "$dir/out" | grep -q "the token file '$dir/token' can be read by other users (mode $mode): chmod 600 it" \
    || fail "mode $mode: cc-run did not warn: $(cat "$dir/out")"
  for r in 0 1; do
    grep -q "^\[rank $r\] .*the token file '$dir/token' can be read by other users (mode $mode)" "$dir/out" \
      || fail "mode $mode: rank $r did not warn: $(cat "$dir/out")"
  done
done
chmod 600 "$dir/token"
CC_RENDEZVOUS_TOKEN_FILE="$dir/token" CC_LOG_LEVEL=warn timeout 60 "$run" -n 2 --timeout-ms 30000 -- "$ranks" \
  >"$dir/out" 2>&1 || fail "mode 600: the job failed: $(cat "$dir/out")"
grep -q "can be read by other users" "$dir/out" && fail "mode 600 was warned about: $(cat "$dir/out")"
grep -q "rank 1 of 2: ok" "$dir/out" || fail "mode 600: rank 1 did not finish: $(cat "$dir/out")"
echo "ok"
