# Sourced by the tests' shell scripts: waiting for something to happen.

# poll SECONDS CMD...: true as soon as CMD succeeds (tried every 0.05 s),
# false once SECONDS (a whole number) have passed.
poll() {
  local i tries=$(($1 * 20))
  shift
  for ((i = 0; i < tries; i++)); do
    "$@" && return 0
    sleep 0.05
  done
  return 1
}
