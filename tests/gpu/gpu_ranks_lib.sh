# Shared by the gpu scripts whose ranks are one-rank programs started by hand
# or by cc-run (gpu_failures.sh, gpu_recovery.sh). Sourced after BIN (the
# program) is set, with the script's name as its argument: exits 77
# (skipped) when BIN finds no CUDA device, 1 when its probe fails. Then
# WORK is a scratch folder (removed on exit, background jobs killed) and
# bad is 0 (check sets it to 1).
LIB_NAME=$1
"$BIN" probe >/dev/null 2>&1
rc=$?
if [ $rc -eq 77 ]; then
  echo "$LIB_NAME: no CUDA device here; skipped"
  exit 77
fi
[ $rc -ne 0 ] && { echo "$LIB_NAME: $BIN probe failed ($rc)"; exit 1; }

WORK=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT
bad=0

# A free port below the kernel's ephemeral range, so that no socket another
# step's NCCL opened (their ports come from that range) takes it first.
free_port() {
  python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    p = random.randrange(10000, max(low, 10001))
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", p))
        print(p)
        break
    except OSError:
        pass
    finally:
        s.close()
'
}
now_ns() { date +%s%N; }
check() {  # check NAME FILE PATTERN
  if grep -q -- "$3" "$2"; then
    echo "   ok: $1"
  else
    echo "   FAILED: $1: no '$3' in:"
    sed 's/^/   | /' "$2" | tail -n 60
    bad=1
  fi
}
