#!/usr/bin/env bash
# The python gpu suite: `import cc` and `import cc.torch` on the GPUs of this
# machine, from a build folder made elsewhere.
#
#   tests/python/gpu/run.sh BUILD OUT
#   PYTHON_GPU_QUICK=1 tests/python/gpu/run.sh BUILD OUT
#
# A step of more ranks than the machine has GPUs runs them all on GPU 0, each
# rank its own host to NCCL, NCCL over sockets, cc's kernels off: under
# `cc-run --share-gpu`, or with CC_SHARE_GPU=1 where torchrun or a script
# starts the ranks (torchrun then as one node per rank, hosts_on_one_gpu.sh,
# so that torch's own "nccl" backend shares the GPU too; the seed examples,
# which name each rank's GPU by its rank, then see every such GPU as GPU 0,
# one_gpu.py). What needs one GPU per rank (cc's all-reduce kernels across
# processes) is skipped there, with the reason, and never counted as passed.
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
#   - a rank killed mid-run: the survivor's next operation raises cc's error message;
#   - dist.all_reduce captured in torch.cuda.graph and replayed, on "nccl"
#     and "cc" (cuda_graph.py; values, and the GPU time of an 8 B all-reduce
#     in a replayed graph);
#   - torch's own clients on "nccl" and "cc", 2 ranks: FSDP2 (fully_shard
#     over a DeviceMesh), a tensor-parallel MLP (parallelize_module) and
#     functional collectives under torch.compile, with each case's losses on
#     cc equal to nccl's (real_clients.py);
#   - a rank killed mid-training, 4 ranks: the survivors call torch's
#     dist.shrink_group in the same process and finish with the right
#     weights, with SHRINK_DEFAULT and SHRINK_ABORT (shrink_group.py; 8 ranks
#     too in the full run);
#   - a rank whose tensor has another shape: every rank raises cc's error message,
#     which name both calls (mismatch.py, 2 and 4 ranks), also when that
#     call is the last before destroy_process_group, which then raises;
#   - the torch backend's operations and a killed rank also with 4 and 8 ranks;
#   - torch's own DistributedTest (its CUDA collectives, point to point and
#     object collectives) on "nccl" and on "cc" side by side, every rank on
#     GPU 0 with the same patches for both (distributed_test.py), at 2 and 4
#     ranks: it fails when a test passes on nccl but not on cc and no reason
#     is named for it. Each rank count's run is bounded by
#     PYTHON_GPU_DT_BUDGET (default 300 s); its counts line is printed
#     after the step, passed or not.
# PYTHON_GPU_QUICK=1 builds the extension once (the pip install, made while
# the steps that need no extension run: cc.Comm's and the nccl reference
# losses), runs every later step on that build, and leaves out the mp.spawn
# launches, the 4 and 8 ranks' "cpu:gloo,cuda:cc", the killed rank 0 and
# torch's DistributedTest at 4 ranks.
# Each step is bounded by PYTHON_GPU_STEP_TIMEOUT (default 120 s; the
# extension's build by PYTHON_GPU_BUILD_TIMEOUT, default 300 s).
# PYTHON_GPU_ONLY, an extended regular expression, keeps the steps whose
# names match it and leaves the others out, uncounted (keep pip-install and
# pip-installed-import for the steps that need the extension).
# PYTHON_GPU_GDB=1 runs each rank of the torch backend's steps under gdb
# (when installed), which prints every thread's native stack if it crashes.
# The last line is "python gpu: N passed, N failed, N skipped", after one
# line per skipped step with its reason; exit status 0 only when none failed.
# A missing GPU, torch or tool is a failure, never a skip.
# PYTHON names the interpreter with torch (default python3, e.g. a venv's);
# NCCL_NVLS_ENABLE=0 is exported for every step.
set -u

. "$(dirname "$0")/../../common/suite_args.sh"
suite_folders "python gpu" "$@"
TOP=$OUT_DIR
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../../.." && pwd)
WORK=${PYTHON_GPU_WORK:-$SRC/build-python}  # kept between runs: the extension's build cache
OUT=$TOP/logs           # where each step logs
[ "${PYTHON_GPU_PACK_ONLY:-0}" = 1 ] && OUT=$WORK/logs
rm -rf "$OUT" && mkdir -p "$OUT"
STEP_TIMEOUT=${PYTHON_GPU_STEP_TIMEOUT:-120}
BUILD_TIMEOUT=${PYTHON_GPU_BUILD_TIMEOUT:-300}
DT_BUDGET=${PYTHON_GPU_DT_BUDGET:-300}

PYTHON=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0
export CC_TIMEOUT_MS=${CC_TIMEOUT_MS:-60000}
export CC_LIBRARY=$BUILD/lib/libcc.so.0
export CC_TORCH_BUILD_DIR=${CC_TORCH_BUILD_DIR:-$WORK/torch-ext}
export PYTHONPATH=$SRC/python:$HERE${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
CC_RUN=$BUILD/tools/cc-run

passed=0
failed=0
skipped=0
failed_steps=()
skipped_steps=()

free_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

limit() {  # NAME: the step's time limit in seconds
  case $1 in
    pip-install | extension-jit) echo "$BUILD_TIMEOUT" ;;
    distributed-test-*) echo "$((DT_BUDGET + 60))" ;;
    *) echo "$STEP_TIMEOUT" ;;
  esac
}

# wanted NAME: the step is one PYTHON_GPU_ONLY keeps (every step without it).
wanted() { [ -z "${PYTHON_GPU_ONLY:-}" ] || [[ $1 =~ $PYTHON_GPU_ONLY ]]; }

# run NAME CMD...: runs CMD under timeout, logs to OUT/NAME.log, counts it.
# A step PYTHON_GPU_ONLY leaves out returns 1, uncounted.
run() {
  local name=$1
  shift
  wanted "$name" || return 1
  echo "== $name: $*" | tee "$OUT/$name.log"
  local start=$SECONDS
  timeout --kill-after=10 "$(limit "$name")" "$@" >>"$OUT/$name.log" 2>&1
  count "$name" $? "$start"
}

# start NAME CMD...: as run, in the background; finish NAME waits and counts it.
declare -A bg_pid bg_start
start() {
  local name=$1
  shift
  wanted "$name" || return 0
  echo "== $name (in the background): $*" | tee "$OUT/$name.log"
  bg_start[$name]=$SECONDS
  timeout --kill-after=10 "$(limit "$name")" "$@" >>"$OUT/$name.log" 2>&1 &
  bg_pid[$name]=$!
}
finish() {
  [ -n "${bg_pid[$1]:-}" ] || return 1
  wait "${bg_pid[$1]}"
  count "$1" $? "${bg_start[$1]}"
}

count() {  # NAME RC START
  if [ "$2" -eq 0 ]; then
    passed=$((passed + 1))
    echo "-- $1: passed ($((SECONDS - $3)) s)" | tee -a "$OUT/$1.log"
  else
    fail_step "$1" "exit status $2$([ "$2" -eq 124 ] && echo ", timed out after $(limit "$1") s") ($((SECONDS - $3)) s)"
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

# skip NAME WHY: a step this machine cannot run, listed with its reason.
skip() {
  wanted "$1" || return 0
  skipped=$((skipped + 1))
  skipped_steps+=("$1: $2")
  echo "-- $1: skipped, $2" | tee "$OUT/$1.log"
}

# check NAME CMD...: a check on a finished step's output; counts as a step.
check() {
  local name=$1
  shift
  wanted "$name" || return 0
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
if [ "$gpus" -lt 1 ]; then
  echo "python gpu: needs a GPU and torch; found $gpus GPU(s) through $PYTHON (set PYTHON to an interpreter with torch)" | tee -a "$OUT/machine.log"
  echo "python gpu: 0 passed, 1 failed, 0 skipped"
  exit 1
fi
echo "python gpu: $gpus GPU(s); a step of more ranks shares GPU 0 (cc-run --share-gpu, CC_SHARE_GPU=1)" \
  | tee -a "$OUT/machine.log"

# ---------------------------------------------------------------- launchers
shares() { [ "$gpus" -lt "$1" ]; }  # N: N ranks must share a GPU here
KERNELS_NEED="cc's all-reduce kernels map each other's memory across processes, which needs one GPU per rank (sharing GPU 0 turns them off)"

# Each sets the array `launch` to a command line that starts N ranks (the
# program and its arguments follow), sharing GPU 0 where there are fewer GPUs.
cc_run_for() {  # N
  launch=("$CC_RUN" -n "$1" --timeout-ms "$CC_TIMEOUT_MS")
  if shares "$1"; then launch+=(--share-gpu); fi
}
torchrun_for() {  # N PORT [ADDR]
  if shares "$1"; then
    launch=(bash "$HERE/hosts_on_one_gpu.sh" "$PYTHON" "$1" "$2" "${3:-127.0.0.1}")
  else
    launch=("$PYTHON" -m torch.distributed.run --nproc-per-node "$1" --master-addr "${3:-127.0.0.1}"
            --master-port "$2")
  fi
}
sharing_for() {  # N: the environment of ranks started by a script
  launch=(env)
  if shares "$1"; then launch+=(CC_SHARE_GPU=1); fi
}

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
  cc_run_for 2
  run comm-ops "${launch[@]}" -- "$PYTHON" "$HERE/comm_ops.py"
  # Two communicators of their own rendezvous per process, one ended early
  # (a torch subgroup's life), with cc's small all-reduce kernel and without.
  if shares 2; then
    skip comm-two "two_comms.py with cc's small all-reduce kernel: $KERNELS_NEED"
  else
    run comm-two "${launch[@]}" -- "$PYTHON" "$HERE/two_comms.py"
  fi
  run comm-two-no-fast-allreduce env CC_FAST_ALLREDUCE=0 "${launch[@]}" -- "$PYTHON" "$HERE/two_comms.py"
}

# The torch backend's operations on N ranks, for each backend string; with
# PYTHON_GPU_GDB=1 (and gdb or cuda-gdb here) each rank runs under it.
torch_ops() {  # N BACKEND...
  local ranks=$1 backend name under_gdb=()
  shift
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
  for backend in "$@"; do
    name=torch-ops-${backend//[:,]/-}
    [ "$ranks" -ne 2 ] && name+=-${ranks}ranks
    torchrun_for "$ranks" "$(free_port)"
    run "$name" env CC_LOG_LEVEL=debug TORCH_SHOW_CPP_STACKTRACES="${TORCH_SHOW_CPP_STACKTRACES:-0}" \
      "${launch[@]}" "${under_gdb[@]}" "$HERE/torch_backend_ops.py" "$backend"
    # gdb's exit status may hide a crash: every rank must also have said it passed.
    [ ${#under_gdb[@]} -gt 0 ] && check "$name-summary" expect_summary "$OUT/$name.log" "$backend" "$ranks"
  done
  return 0
}

expect_summary() {  # LOG BACKEND N: each rank's last line says nothing failed
  local r
  for ((r = 0; r < $3; r++)); do
    grep -q "^rank $r \[$2\]: [0-9]* passed, 0 failed$" "$1" || { echo "rank $r: no clean summary"; return 1; }
  done
}
expect_sum() {  # LOG N: every rank printed the sum 1 + ... + N
  local r want="$(($2 * ($2 + 1) / 2)).0"
  for ((r = 0; r < $2; r++)); do
    grep -q "^Rank $r after all-reduce: $want$" "$1" || { echo "rank $r: no sum $want"; return 1; }
  done
}
expect_broadcast() {  # LOG N SHARED: every rank holds rank 0's [1., 2., 3.] on its GPU
  local r gpu
  for ((r = 0; r < $2; r++)); do
    gpu=$r
    [ "$3" = 1 ] && gpu=0  # one GPU for all
    grep -q "^Rank $r after broadcast: tensor(\[1\., 2\., 3\.\], device='cuda:$gpu')$" "$1" \
      || { echo "rank $r: no broadcast value [1., 2., 3.] on cuda:$gpu"; return 1; }
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
SEED_PORT=12355  # the guide's setup() sets MASTER_ADDR=localhost and MASTER_PORT to it

# The unchanged guide (backend "nccl") for the losses to compare with: the
# DDP script and the setup it imports, side by side (the script's folder comes
# first on its path). Where two ranks must share a GPU, it runs as the cc runs
# do there: two torchrun nodes on GPU 0 (seed_entry.py beside them).
seed_ddp_nccl() {
  mkdir -p "$OUT/seeds-nccl"
  local f
  for f in seed_ddp.py seed_common.py; do
    sed -e '/^import cc\.torch$/d' -e 's/init_process_group("cc"/init_process_group("nccl"/' \
      "$HERE/$f" >"$OUT/seeds-nccl/$f"
  done
  if shares 2; then
    cp "$HERE/seed_entry.py" "$OUT/seeds-nccl/"
    torchrun_for 2 "$SEED_PORT" localhost
    run seed-ddp-nccl env CC_SEED_TORCH=1234 PYTHONPATH="$SEEDING:$PYTHONPATH" \
      "${launch[@]}" "$OUT/seeds-nccl/seed_entry.py" seed_ddp
  else
    run seed-ddp-nccl env CC_SEED_TORCH=1234 PYTHONPATH="$SEEDING:$PYTHONPATH" \
      "$PYTHON" "$OUT/seeds-nccl/seed_ddp.py"
  fi
}

# Each seed script under each launch: spawn (the guide's own main: one rank
# per GPU of this machine), torchrun and byhand (two ranks, sharing GPU 0
# where there is one GPU).
seeds() {  # LAUNCH...
  local how seed name ranks shared
  for how in "$@"; do
    for seed in allreduce broadcast ddp; do
      name=seed-$seed-$how
      local seeding=()  # the DDP script's torch seed, fixed as in the nccl run
      [ "$seed" = ddp ] && seeding=(CC_SEED_TORCH=1234 PYTHONPATH="$SEEDING:$PYTHONPATH")
      ranks=2
      case $how in
        spawn)
          ranks=$gpus
          run "$name" env "${seeding[@]}" "$PYTHON" "$HERE/seed_$seed.py" ;;
        torchrun)
          torchrun_for 2 "$SEED_PORT" localhost
          run "$name" env "${seeding[@]}" "${launch[@]}" "$HERE/seed_entry.py" "seed_$seed" ;;
        byhand)
          sharing_for 2
          run "$name" env "${seeding[@]}" "${launch[@]}" bash "$HERE/by_hand.sh" "$PYTHON" "seed_$seed" ;;
      esac
      shared=0
      [ "$how" != spawn ] && shares 2 && shared=1
      case $seed in
        allreduce) check "$name" expect_sum "$OUT/$name.log" "$ranks" ;;
        broadcast) check "$name" expect_broadcast "$OUT/$name.log" "$ranks" "$shared" ;;
        ddp) check "$name" expect_losses "$OUT/$name.log" ;;
      esac
    done
  done
}

peer_failure() {  # N VICTIM...: N ranks, one victim at a time
  local ranks=$1 victim name
  shift
  for victim in "$@"; do
    name=peer-failure-victim-$victim
    [ "$ranks" -ne 2 ] && name=peer-failure-${ranks}ranks-victim-$victim
    sharing_for "$ranks"
    run "$name" "${launch[@]}" "$PYTHON" "$HERE/peer_failure.py" --ranks "$ranks" --victim "$victim"
  done
}

# dist.all_reduce captured in torch.cuda.graph and replayed, on "nccl" and on
# "cc" (2 ranks, torchrun): values checked; each prints the GPU time of one
# 8 B all-reduce in a replayed graph.
cuda_graph_steps() {  # BACKEND...
  local backend
  for backend in "$@"; do
    torchrun_for 2 "$(free_port)"
    run "cuda-graph-$backend" "${launch[@]}" "$HERE/cuda_graph.py" "$backend"
    grep -h "graph replay:" "$OUT/cuda-graph-$backend.log" | sed "s/^/   /"
  done
}

# torch's own clients on "nccl" and on "cc", 2 ranks (torchrun): FSDP2, a
# tensor-parallel layer, functional collectives under torch.compile; each
# case's losses on cc must equal nccl's (real_clients.py --compare).
real_clients_steps() {  # CASE...
  local case backend
  for case in "$@"; do
    for backend in nccl cc; do
      torchrun_for 2 "$(free_port)"
      run "real-clients-$case-$backend" "${launch[@]}" "$HERE/real_clients.py" "$backend" "$case"
    done
    check "real-clients-$case" "$PYTHON" "$HERE/real_clients.py" --compare \
      "$OUT/real-clients-$case-nccl.log" "$OUT/real-clients-$case-cc.log"
    grep -h "^losses equal" "$OUT/real-clients-$case.log" | sed "s/^/   $case: /"
  done
}

# dist.shrink_group after a rank dies mid-training: the survivors shrink
# in the same process and finish with the right weights; with "abort",
# through SHRINK_ABORT. The log has each survivor's time from the death to
# its first correct all-reduce on the shrunk group.
shrink_group_steps() {  # N VICTIM [abort]...
  local ranks=$1 victim=$2 how name
  shift 2
  for how in "$@"; do
    name=shrink-group-${ranks}ranks-victim-$victim
    local flag=()
    [ "$how" = abort ] && { name+=-abort; flag=(--abort); }
    sharing_for "$ranks"
    run "$name" "${launch[@]}" "$PYTHON" "$HERE/shrink_group.py" --ranks "$ranks" --victim "$victim" "${flag[@]}"
    grep -h "first correct all-reduce\|shrink_group(" "$OUT/$name.log" | sed "s/^/   /"
  done
}

# torch's own DistributedTest on "nccl" and "cc", N ranks on GPU 0; each
# backend's log and results beside the step's log.
distributed_test() {  # N...
  local ranks
  for ranks in "$@"; do
    run "distributed-test-${ranks}ranks" "$PYTHON" "$HERE/distributed_test.py" --ranks "$ranks" \
      --budget "$DT_BUDGET" --logs "$OUT"
    # The counts, passed or not.
    grep -h "^distributed test: nccl" "$OUT/distributed-test-${ranks}ranks.log" | sed "s/^/   ${ranks} ranks: /"
  done
}

mismatch() {  # N...: N ranks, rank 1's tensor of another shape, in the
  # middle and in the last call before destroy_process_group
  local ranks
  for ranks in "$@"; do
    sharing_for "$ranks"
    run "mismatch-shape-${ranks}ranks" "${launch[@]}" "$PYTHON" "$HERE/mismatch.py" --ranks "$ranks"
    run "mismatch-at-end-${ranks}ranks" "${launch[@]}" "$PYTHON" "$HERE/mismatch.py" \
      --ranks "$ranks" --at-end
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
  torch_ops 2 cc cpu:gloo,cuda:cc
  cuda_graph_steps nccl cc
  real_clients_steps fsdp2 tp compiled
  distributed_test 2
  torch_ops 4 cc
  torch_ops 8 cc
  seeds torchrun byhand
  peer_failure 2 1
  peer_failure 4 2
  peer_failure 8 5
  shrink_group_steps 4 2 default abort
  mismatch 2 4
else
  run extension-jit "$PYTHON" -c '
import cc, cc.torch
print("cc", cc.version(), "from", cc.library_path())
print("extension", cc.torch._C.__file__)'
  pip_install
  pip_installed_import
  comm_ops
  torch_ops 2 cc cpu:gloo,cuda:cc
  torch_ops 4 cc cpu:gloo,cuda:cc
  torch_ops 8 cc cpu:gloo,cuda:cc
  cuda_graph_steps nccl cc
  real_clients_steps fsdp2 tp compiled
  distributed_test 2 4
  seed_ddp_nccl
  seeds spawn torchrun byhand
  peer_failure 2 1 0
  peer_failure 4 2 0
  peer_failure 8 5 0
  shrink_group_steps 4 2 default abort
  shrink_group_steps 8 5 default
  mismatch 2 4
fi

tar -czf "$TOP/python-gpu-logs.tar.gz" -C "$OUT" . 2>/dev/null
if [ ${#failed_steps[@]} -gt 0 ]; then
  echo "failed: ${failed_steps[*]}"
fi
for s in "${skipped_steps[@]}"; do echo "skipped $s"; done
echo "python gpu: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
