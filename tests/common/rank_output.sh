# Sourced by the tests' shell scripts that run ranks and read their output
# files ($dir/*.out, $dir set by the script): the failure with every output
# shown, a line expected in a file, a free port, and waiting for lines.

# fail WORDS: prints them and every $dir/*.out, then exits 1.
fail() {
  echo "FAIL: $*"
  for f in "$dir"/*.out; do echo "--- $f:"; cat "$f"; done
  exit 1
}

# expect FILE PATTERN: the pattern is in the file, or fail.
expect() {
  grep -q -- "$2" "$1" || fail "no '$2' in $(basename "$1")"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_for FILE PATTERN COUNT SECONDS: COUNT lines match within SECONDS, or fail.
wait_for() {
  local n=0
  for _ in $(seq $((10 * $4))); do
    n=$(grep -c -- "$2" "$1" 2>/dev/null)
    [ "${n:-0}" -ge "$3" ] && return 0
    sleep 0.1
  done
  fail "$(basename "$1"): $n of $3 lines '$2' within $4 s"
}
