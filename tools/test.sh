#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite. Suites that
# need what this machine lacks (GPUs, root for namespaces, mpirun) report
# themselves skipped. Ends with one line: "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh || exit 1
tools/build.sh || exit 1
build=${BUILD:-build}
suites=${CC_TEST_SUITES:-unit rendezvous mpi netns gpu}
args=()
for s in $suites; do args+=(--suite "$s"); done
meson test -C "$build" --print-errorlogs --num-processes 2 "${args[@]}"
rc=$?
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
passed = failed = skipped = 0
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line).get("result", "")
        if r in ("OK", "EXPECTEDFAIL"): passed += 1
        elif r == "SKIP": skipped += 1
        else: failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $rc
