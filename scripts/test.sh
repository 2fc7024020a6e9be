#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite. Suites that
# need what this machine lacks (GPUs, root for namespaces, mpirun) report
# themselves skipped. With CC_TEST_HARDENING=1 it then runs
# scripts/ci-hardening.sh (sanitizers and fuzzing). Ends with one line summing
# every stage: "N passed, N failed, N skipped"; non-zero status if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1
build=${BUILD:-build}
# A folder scripts/demo.sh configured on a machine without GPUs has no
# kernels; the tests build them (and their one-GPU tests) for Ampere and
# Hopper, as any build does. A folder it configured before the test packages
# were installed is configured again, so that Catch2, cmake and mpirun are
# found.
if [ -f "$build/.demo-without-kernels" ]; then
  meson configure "$build" -Dfast_kernels=auto -Dkernel_archs=80,90 >/dev/null || exit 1
  rm -f "$build/.demo-without-kernels"
fi
if [ -f "$build/.demo-setup" ]; then
  meson setup --reconfigure "$build" >/dev/null || exit 1
  rm -f "$build/.demo-setup"
fi
# A folder configured here on a machine with GPUs has the kernels compiled
# for those GPUs alone, as scripts/demo.sh does: each architecture is
# minutes of device compile on a small machine.
setup=()
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  setup=(-Dkernel_archs=native)
fi
scripts/build.sh "${setup[@]}" || exit 1
suites=${CC_TEST_SUITES:-unit rendezvous packaging etcd mpi netns gpu python}
args=()
for s in $suites; do args+=(--suite "$s"); done
meson test -C "$build" --print-errorlogs --num-processes 2 "${args[@]}"
rc=$?
summary=$(python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
passed = failed = skipped = 0
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line).get("result", "")
        if r in ("OK", "EXPECTEDFAIL"): passed += 1
        elif r == "SKIP": skipped += 1
        else: failed += 1
print(passed, failed, skipped)
PY
) || summary="0 1 0"
read -r passed failed skipped <<<"$summary"

if [ "${CC_TEST_HARDENING:-0}" = 1 ]; then
  hlog=$(mktemp)
  scripts/ci-hardening.sh 2>&1 | tee "$hlog"
  hrc=${PIPESTATUS[0]}
  last=$(tail -n 1 "$hlog")
  rm -f "$hlog"
  if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
    passed=$((passed + BASH_REMATCH[1])); failed=$((failed + BASH_REMATCH[2])); skipped=$((skipped + BASH_REMATCH[3]))
  else
    failed=$((failed + 1))
  fi
  [ "$hrc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
  [ "$hrc" -ne 0 ] && rc=1
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -ne 0 ] && [ "$rc" -eq 0 ] && rc=1
exit $rc
