# Sourced by the scripts that run a GPU suite and take BUILD OUT
# (scripts/gpu-suite.sh, tests/python/gpu/run.sh).

# suite_folders NAME ARG...: exactly two arguments, else the usage and exit 2;
# then BUILD, the build folder, and OUT_DIR, the output folder (made), both
# absolute; NAME's error message and exit 2 when either will not do.
suite_folders() {
  local name=$1
  shift
  if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD OUT" >&2
    exit 2
  fi
  BUILD=$(cd "$1" && pwd) || { echo "$name: no build folder '$1'" >&2; exit 2; }
  mkdir -p "$2" && OUT_DIR=$(cd "$2" && pwd) || { echo "$name: cannot make '$2'" >&2; exit 2; }
}
