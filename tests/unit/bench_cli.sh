#!/bin/sh
# cc-bench's command line without a GPU: --help, a bad flag (exit 2, message),
# and no visible device (exit 1, message). Usage: bench_cli.sh CC_BENCH
bench="$1"
fail() { echo "bench_cli: $*"; exit 1; }

out=$("$bench" --help) || fail "--help exited $?"
echo "$out" | grep -q "^usage: cc-bench" || fail "--help printed no usage: $out"
echo "$out" | grep -q -- "--raw" || fail "--help does not mention --raw"

out=$("$bench" -d float7 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "-d float7 exited $rc, not 2"
echo "$out" | grep -q "cc-bench: -d float7: unknown datatype; use one of int8" ||
  fail "-d float7 said: $out"

out=$(CUDA_VISIBLE_DEVICES= "$bench" -C allreduce -b 8 -e 1K 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "without a device it exited $rc, not 1"
echo "$out" | grep -q "cc-bench: no CUDA device is visible" || fail "without a device it said: $out"
echo "bench_cli: ok"
