#!/usr/bin/env bash
# Hardening stage of CI: the unit and rendezvous suites under ASan+UBSan, the
# server and store tests under TSan (both built with clang-14, so Catch2's
# <regex> gives GCC 12's sanitizer false positives no chance), and each
# libFuzzer target for CC_FUZZ_SECONDS (default 60) seconds, failing on any
# crash. The sanitizer trees build only what those tests need.
# Ends with one line: "N passed, N failed, N skipped"; exits 1 if any failed.
#   CC_FUZZ_SECONDS=600 scripts/ci-hardening.sh      # fuzz longer
set -uo pipefail
cd "$(dirname "$0")/.."
asan=${CC_ASAN_BUILD:-build-asan}
tsan=${CC_TSAN_BUILD:-build-tsan}
fuzz_seconds=${CC_FUZZ_SECONDS:-60}
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
export CC=clang-14 CXX=clang++-14
passed=0 failed=0 skipped=0

if ! command -v clang++-14 >/dev/null; then
  echo "ci-hardening: clang++-14 not found; install clang-14 and libclang-rt-14-dev (apt-get)" >&2
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi

# Halt on the first report, so a finding fails the test; no shadow-gap
# protection, which the CUDA runtime linked into some unit tests needs; see
# scripts/ubsan.supp for the one check left out where the C API takes enums.
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:protect_shadow_gap=0:print_summary=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1:suppressions=$PWD/scripts/ubsan.supp
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

setup() {  # DIR SANITIZERS [meson options...]
  local dir=$1 san=$2
  shift 2
  [ -f "$dir/build.ninja" ] && return 0
  local log
  log=$(mktemp)
  # No nvcc here: the sanitizers are clang's, and cc's all-reduce kernels
  # have no host code worth instrumenting that the gpu suite does not cover.
  meson setup "$dir" -Db_sanitize="$san" -Db_lundef=false -Dexamples=disabled -Dmpi=disabled \
    -Dfast_kernels=disabled ${CUDA_HOME:+-Dcudatoolkit=$CUDA_HOME} "$@" >"$log" 2>&1 || { cat "$log"; rm -f "$log"; return 1; }
  rm -f "$log"
}

# The ninja targets that the named suites' (or tests') programs need.
targets() {  # DIR suite:NAME|test:NAME ...
  meson introspect "$1" --tests --targets | python3 -c '
import json, os, sys
data = json.load(sys.stdin)
want = sys.argv[2:]
by_id = {t["id"]: t for t in data["targets"]}
by_file = {f: t for t in data["targets"] for f in t["filename"]}
out = {}
for t in data["tests"]:
    suites = {s.split(":")[-1] for s in t["suite"]}
    if not any(w == "test:" + t["name"] or (w.startswith("suite:") and w[6:] in suites) for w in want):
        continue
    deps = [by_id[d] for d in t.get("depends", []) if d in by_id]
    if t["cmd"] and t["cmd"][0] in by_file: deps.append(by_file[t["cmd"][0]])
    for d in deps: out[d["id"]] = d
for t in out.values():
    for f in t["filename"]:
        print(os.path.relpath(f, os.path.abspath(sys.argv[1])))
' "$@"
}

# Adds a meson test run's results to the totals.
count() {  # TESTLOG.json
  read -r p f s < <(python3 - "$1" <<'PY'
import json, sys
p = f = s = 0
try:
    for line in open(sys.argv[1]):
        r = json.loads(line).get("result", "")
        if r in ("OK", "EXPECTEDFAIL"): p += 1
        elif r == "SKIP": s += 1
        else: f += 1
except OSError:
    f = 1
print(p, f, s)
PY
)
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

run_sanitized() {  # DIR LOGBASE SELECTORS... -- MESON_TEST_ARGS...
  local dir=$1 logbase=$2
  shift 2
  local sel=() args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do sel+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  args=("$@")
  ninja -C "$dir" build.ninja >/dev/null  # regenerate, so introspection is current
  mapfile -t tg < <(targets "$dir" "${sel[@]}")
  if [ ${#tg[@]} -eq 0 ] || ! ninja -C "$dir" "${tg[@]}"; then
    echo "ci-hardening: building ${sel[*]} in $dir failed"
    failed=$((failed + 1))
    return
  fi
  rm -f "$dir/meson-logs/$logbase.json"
  meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 --logbase "$logbase" "${args[@]}"
  count "$dir/meson-logs/$logbase.json"
}

t0=$(date +%s)
echo "== ASan+UBSan: unit and rendezvous suites ($asan)"
if setup "$asan" address,undefined -Dfuzz=enabled; then
  run_sanitized "$asan" asan suite:unit suite:rendezvous -- --suite unit --suite rendezvous
else
  failed=$((failed + 1))
fi

echo "== TSan: server and store tests ($tsan)"
tsan_tests=(server-core server-hostile hostile-table store embedded_server)
if setup "$tsan" thread; then
  sel=(); for t in "${tsan_tests[@]}"; do sel+=("test:$t"); done
  run_sanitized "$tsan" tsan "${sel[@]}" -- "${tsan_tests[@]}"
else
  failed=$((failed + 1))
fi

echo "== libFuzzer: ${fuzz_seconds} s per target ($asan)"
for target in frame server_core hello client_push agent tls_server; do
  exe="$asan/tests/fuzz/fuzz_$target"
  work="$asan/fuzz-corpus/$target"
  mkdir -p "$work" "$asan/fuzz-artifacts"
  if ! ninja -C "$asan" "tests/fuzz/fuzz_$target" >/dev/null; then
    echo "fuzz $target: FAILED to build"; failed=$((failed + 1)); continue
  fi
  # New inputs go to the build tree's corpus; the committed seeds are read only.
  if "$exe" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$asan/fuzz-artifacts/$target-" "$work" "tests/fuzz/corpus/$target" \
       >"$asan/fuzz-$target.log" 2>&1; then
    echo "fuzz $target: OK ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$asan/fuzz-$target.log" | grep -o '[0-9]*$') runs)"
    passed=$((passed + 1))
  else
    echo "fuzz $target: FAILED (crash input under $asan/fuzz-artifacts):"
    tail -n 40 "$asan/fuzz-$target.log"
    failed=$((failed + 1))
  fi
done
echo "ci-hardening: $(( $(date +%s) - t0 )) s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
