#!/usr/bin/env bash
# The python gpu suite: `import cc` and `import cc.torch` on 2 GPUs, from a
# build folder made elsewhere.
#
#   tests/python/gpu/run.sh BUILD OUT
#   PYTHON_GPU_QUICK=1 tests/python/gpu/run.sh BUILD OUT    # about 3 minutes
#
# Steps (each bounded by `timeout`, logged to OUT/logs/<step>.log; all logs
# also packed into OUT/python-gpu-logs.tar.gz; with PYTHON_GPU_PACK_ONLY=1
# the logs stay in build-python/logs and OUT holds the packed file alone):
#   - build cc.torch's extension (torch.utils.cpp_extension, cached in
#     build-python/torch-ext of the source tree) and `pip install
#     --no-build-isolation` the package with it (into build-python/pip);
#   - cc.Comm on torch tensors, DLPack and __cuda_array_interface__ arrays,
#     every collective, argument errors, split, CUDA graph capture and replay
#     (comm_ops.py under cc-run); two communicators with rendezvous of their
#     own in one process, one ended early, as a torch subgroup's
#     (two_comms.py, with cc's small all-reduce kernel and without);
#   - the torch backend's operations under torchrun, with "cc" and with
#     "cpu:gloo,cuda:cc" (torch_backend_ops.py; cc's debug log on, and each
#     check's PASS/FAIL printed as it ends, so a crash shows where it was);
#   - the seed guide's all-reduce, broadcast and DDP scripts with backend "cc":
#     as the guide launches them (mp.spawn), under torchrun, and by hand with
#     RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT/LOCAL_RANK as on two Docker hosts
#     (there with NCCL's socket transport, as between hosts); every rank's sum
#     and broadcast value checked, and the DDP losses (fixed torch seed)
#     compared with the unchanged guide's backend "nccl";
#   - a rank killed mid-run: the survivor's next operation raises cc's words.
# PYTHON_GPU_QUICK=1 builds the extension once (the pip install, made while
# the steps that need no extension run: cc.Comm's and the nccl reference
# losses), runs every later step on that build, and leaves out the mp.spawn
# launches and the second killed-rank case.
# PYTHON_GPU_GDB=1 runs each rank of the torch backend's steps under gdb
# (when installed), which prints every thread's native stack if it crashes.
# The last line is "python gpu: N passed, N failed"; exit status 0 only when
# all passed. Nothing is skipped: a missing GPU, torch or tool is a failure.
# PYTHON names the interpreter with torch (default python3, e.g. a venv's);
# NCCL_NVLS_ENABLE=0 is exported for every step.
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD OUT" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd) || { echo "python gpu: no build folder '$1'" >&2; exit 2; }
mkdir -p "$2" && TOP=$(cd "$2" && pwd) || { echo "python gpu: cannot make '$2'" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../../.." && pwd)
WORK=$SRC/build-python  # kept between runs: the extension's build cache
OUT=$TOP/logs           # where each step logs
[ "${PYTHON_GPU_PACK_ONLY:-0}" = 1 ] && OUT=$WORK/logs
rm -rf "$OUT" && mkdir -p "$OUT"
STEP_TIMEOUT=${PYTHON_GPU_STEP_TIMEOUT:-600}

PYTHON=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0
export CC_TIMEOUT_MS=${CC_TIMEOUT_MS:-120000}
export CC_LIBRARY=$BUILD/lib/libcc.so.0
export CC_TORCH_BUILD_DIR=${CC_TORCH_BUILD_DIR:-$WORK/torch-ext}
export PYTHONPATH=$SRC/python:$HERE${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
CC_RUN=$BUILD/tools/cc-run

passed=0
failed=0
failed_steps=()

free_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run NAME CMD...: runs CMD under timeout, logs to OUT/NAME.log, counts it.
run() {
  local name=$1
  shift
  echo "== $name: $*" | tee "$OUT/$name.log"
  local start=$SECONDS
  timeout --kill-after=30 "$STEP_TIMEOUT" "$@" >>"$OUT/$name.log" 2>&1
  count "$name" $? "$start"
}

# start NAME CMD...: as run, in the background; finish NAME waits and counts it.
declare -A bg_pid bg_start
start() {
  local name=$1
  shift
  echo "== $name (in the background): $*" | tee "$OUT/$name.log"
  bg_start[$name]=$SECONDS
  timeout --kill-after=30 "$STEP_TIMEOUT" "$@" >>"$OUT/$name.log" 2>&1 &
  bg_pid[$name]=$!
}
finish() {
  wait "${bg_pid[$1]}"
  count "$1" $? "${bg_start[$1]}"
}

count() {  # NAME RC START
  if [ "$2" -eq 0 ]; then
    passed=$((passed + 1))
    echo "-- $1: passed ($((SECONDS - $3)) s)" | tee -a "$OUT/$1.log"
  else
    fail_step "$1" "exit status $2$([ "$2" -eq 124 ] && echo ", timed out after $STEP_TIMEOUT s") ($((SECONDS - $3)) s)"
  fi
  return "$2"
}

fail_step() {  # NAME WHY
  failed=$((failed + 1))
  failed_steps+=("$1")
  echo "-- $1: FAILED, $2; last lines:"
  tail -n 30 "$OUT/$1.log" | sed 's/^/   | /'
  echo "-- $1: FAILED, $2" >>"$OUT/$1.log"
}

# check NAME CMD...: a check on a finished step's output; counts as a step.
check() {
  local name=$1
  shift
  if "$@" >>"$OUT/$name.log" 2>&1; then
    passed=$((passed + 1))
    echo "-- $name: passed" | tee -a "$OUT/$name.log"
  else
    fail_step "$name" "its output is wrong"
  fi
}

echo "== machine" >"$OUT/machine.log"
{
  nvidia-smi -L
  "$PYTHON" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
  ldd "$CC_LIBRARY" | grep -E "nccl|not found"
} >>"$OUT/machine.log" 2>&1
cat "$OUT/machine.log"
gpus=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if [ "$gpus" -lt 2 ]; then
  echo "python gpu: needs 2 GPUs and torch; found $gpus GPU(s) through $PYTHON (set PYTHON to an interpreter with torch)" | tee -a "$OUT/machine.log"
  echo "python gpu: 0 passed, 1 failed"
  exit 1
fi

# ---------------------------------------------------------------- the steps
pip_install() {
  rm -rf "$WORK/pip"
  "${1:-run}" pip-install env CC_BUILD_TORCH=1 "$PYTHON" -m pip install --no-build-isolation \
    --no-deps --target "$WORK/pip" "$SRC/python"
}
pip_installed_import() {
  run pip-installed-import env PYTHONPATH="$WORK/pip" "$PYTHON" -c '
import cc, cc.torch
assert cc.torch._C.__file__.startswith("'"$WORK/pip"'"), cc.torch._C.__file__
print("cc", cc.version(), "from", cc.library_path())
print("pip-built extension", cc.torch._C.__file__)'
  rm -rf "$SRC/python/build" "$SRC/python/"*.egg-info
}

comm_ops() {
  run comm-ops "$CC_RUN" -n 2 --timeout-ms 120000 -- "$PYTHON" "$HERE/comm_ops.py"
  # Two communicators of their own rendezvous per process, one ended early
  # (a torch subgroup's life), with cc's small all-reduce kernel and without.
  run comm-two "$CC_RUN" -n 2 --timeout-ms 120000 -- "$PYTHON" "$HERE/two_comms.py"
  run comm-two-no-fast-allreduce env CC_FAST_ALLREDUCE=0 \
    "$CC_RUN" -n 2 --timeout-ms 120000 -- "$PYTHON" "$HERE/two_comms.py"
}

# The torch backend's operations, for each backend string; with
# PYTHON_GPU_GDB=1 (and gdb or cuda-gdb here) each rank runs under it.
torch_ops() {
  local backend name under_gdb=()
  if [ "${PYTHON_GPU_GDB:-0}" = 1 ]; then
    # The GPU machines have cuda-gdb, which debugs host code too, and no gdb.
    local debugger
    debugger=$(command -v gdb || command -v cuda-gdb || true)
    if [ -n "$debugger" ]; then
      under_gdb=(--no-python "$debugger" -q -batch -return-child-result -ex "set print thread-events off"
                 -ex run -ex "thread apply all bt" --args "$PYTHON")
    else
      echo "python gpu: PYTHON_GPU_GDB=1 but there is no gdb or cuda-gdb here; running without it"
    fi
  fi
  for backend in cc cpu:gloo,cuda:cc; do
    name=torch-ops-${backend//[:,]/-}
    run "$name" env CC_LOG_LEVEL=debug TORCH_SHOW_CPP_STACKTRACES="${TORCH_SHOW_CPP_STACKTRACES:-0}" \
      "$PYTHON" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
      --master-port "$(free_port)" "${under_gdb[@]}" "$HERE/torch_backend_ops.py" "$backend"
    # gdb's exit status may hide a crash: every rank must also have said it passed.
    [ ${#under_gdb[@]} -gt 0 ] && check "$name-summary" expect_summary "$OUT/$name.log" "$backend"
  done
  return 0
}

expect_summary() {  # LOG BACKEND: each rank's last line says nothing failed
  for r in 0 1; do
    grep -q "^rank $r \[$2\]: [0-9]* passed, 0 failed$" "$1" || { echo "rank $r: no clean summary"; return 1; }
  done
}
expect_sum() {  # LOG: every rank printed the sum 1 + 2 = 3
  for r in 0 1; do grep -q "^Rank $r after all-reduce: 3.0$" "$1" || { echo "rank $r: no sum 3.0"; return 1; }; done
}
expect_broadcast() {  # LOG: every rank holds rank 0's [1., 2., 3.]
  for r in 0 1; do
    grep -q "^Rank $r after broadcast: tensor(\[1\., 2\., 3\.\], device='cuda:$r')$" "$1" \
      || { echo "rank $r: no broadcast value [1., 2., 3.] on cuda:$r"; return 1; }
  done
}
expect_losses() {  # LOG: five epochs' losses, equal to the nccl run's within tolerance
  "$PYTHON" - "$1" "$OUT/seed-ddp-nccl.log" <<'PY'
import re, sys
def losses(path):
    return [float(m.group(2)) for m in re.finditer(r"^Epoch (\d+), Loss: (\S+)$", open(path).read(), re.M)]
cc, nccl = losses(sys.argv[1]), losses(sys.argv[2])
print("cc  ", cc)
print("nccl", nccl)
assert len(cc) == 5 and len(nccl) == 5, "want 5 loss lines from each run"
for a, b in zip(cc, nccl):
    assert abs(a - b) <= 1e-5 * max(1.0, abs(b)), "loss %r (cc) differs from %r (nccl)" % (a, b)
print("losses equal within 1e-5")
PY
}

SEEDING=$HERE/seed_seeding

# The unchanged guide (backend "nccl") for the losses to compare with: the
# DDP script and the setup it imports, side by side (the script's folder comes
# first on its path).
seed_ddp_nccl() {
  mkdir -p "$OUT/seeds-nccl"
  local f
  for f in seed_ddp.py seed_common.py; do
    sed -e '/^import cc\.torch$/d' -e 's/init_process_group("cc"/init_process_group("nccl"/' \
      "$HERE/$f" >"$OUT/seeds-nccl/$f"
  done
  run seed-ddp-nccl env CC_SEED_TORCH=1234 PYTHONPATH="$SEEDING:$PYTHONPATH" \
    "$PYTHON" "$OUT/seeds-nccl/seed_ddp.py"
}

seeds() {  # LAUNCH...: each seed script under each launch (spawn, torchrun, byhand)
  local launch seed name
  for launch in "$@"; do
    for seed in allreduce broadcast ddp; do
      name=seed-$seed-$launch
      local seeding=()  # the DDP script's torch seed, fixed as in the nccl run
      [ "$seed" = ddp ] && seeding=(CC_SEED_TORCH=1234 PYTHONPATH="$SEEDING:$PYTHONPATH")
      case $launch in
        spawn) run "$name" env "${seeding[@]}" "$PYTHON" "$HERE/seed_$seed.py" ;;
        torchrun) run "$name" env "${seeding[@]}" "$PYTHON" -m torch.distributed.run \
                    --nproc-per-node 2 --master-addr localhost --master-port 12355 \
                    "$HERE/seed_entry.py" "seed_$seed" ;;
        byhand) run "$name" env "${seeding[@]}" bash "$HERE/by_hand.sh" "$PYTHON" "seed_$seed" ;;
      esac
      case $seed in
        allreduce) check "$name" expect_sum "$OUT/$name.log" ;;
        broadcast) check "$name" expect_broadcast "$OUT/$name.log" ;;
        ddp) check "$name" expect_losses "$OUT/$name.log" ;;
      esac
    done
  done
}

peer_failure() {  # VICTIM...
  local victim
  for victim in "$@"; do
    run "peer-failure-victim-$victim" "$PYTHON" "$HERE/peer_failure.py" --victim "$victim"
  done
}

if [ "${PYTHON_GPU_QUICK:-0}" = 1 ]; then
  # One build, the pip install, made while the steps that need no extension
  # run; every later step imports the package it installed.
  pip_install start
  comm_ops
  seed_ddp_nccl
  finish pip-install
  pip_installed_import
  export PYTHONPATH=$WORK/pip:$HERE${PYTHONPATH#"$SRC/python:$HERE"}
  torch_ops
  seeds torchrun byhand
  peer_failure 1
else
  run extension-jit "$PYTHON" -c '
import cc, cc.torch
print("cc", cc.version(), "from", cc.library_path())
print("extension", cc.torch._C.__file__)'
  pip_install
  pip_installed_import
  comm_ops
  torch_ops
  seed_ddp_nccl
  seeds spawn torchrun byhand
  peer_failure 1 0
fi

tar -czf "$TOP/python-gpu-logs.tar.gz" -C "$OUT" . 2>/dev/null
if [ ${#failed_steps[@]} -gt 0 ]; then
  echo "failed: ${failed_steps[*]}"
fi
echo "python gpu: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
