#!/usr/bin/env bash
# The gpu suite on a GPU machine, from a build folder made elsewhere: runs the
# built binaries directly (not `meson test`, whose recorded paths belong to
# the machine that configured the build).
#
#   scripts/gpu-suite.sh BUILD OUT
#
# Prints the GPUs and the libraries the binaries load, runs the gpu test
# binaries under cc-run -n 2 and mpirun -n 2 (when present), gpu_collectives
# also as one rank, cc's kernels with several ranks on one GPU
# (gpu_kernels_one_gpu; GPU_SUITE_ONE_GPU=1 runs only the one-GPU steps), then the
# examples, then the failure scenarios of tests/gpu/gpu_failures.sh (a killed
# rank, a skipped collective, abort from threads, a missing rank, a rank
# whose init fails, and `cc-rendezvous status` against rank 0's embedded
# server of a job), the recovery scenarios of tests/gpu/gpu_recovery.sh
# (shrink, regrow with a rank cc-run restarts, the training example's
# weights), the examples and a shrink over TLS (tests/gpu/gpu_tls.sh),
# then the multi-host start of tests/gpu/gpu_preflight_netns.sh (a NAT
# between namespace hosts; needs ip and nft: BUILD/netns-tools from
# scripts/netns-tools.sh, or IP, IP_LIB, NFT, NFT_LIB naming copies of them),
# each bounded by `timeout`. The gpu test binaries run a second time under
# cc-run with another NCCL (NCCL_ALT_LIB_DIR, else the machine's PyTorch wheel's when
# there is one): cc's all-reduce kernels must work with either. Logs go to
# OUT/<step>.log; the last line is "gpu suite: N passed, N failed". Exit status
# 0 only when all passed. NCCL_LIB_DIR names a folder holding libnccl.so.2 when
# the loader cannot find one.
# On a machine of fewer GPUs than a step's ranks (one H200, say), the ranks
# share GPU 0, each its own host to NCCL (cc-run --share-gpu, CC_SHARE_GPU=1):
# the failure, recovery, init-failure, etcd, namespace, example and
# collective steps run so, also with 4 and 8 ranks; the steps about cc's
# kernels across processes are skipped, each listed with its reason, and the
# last line is then "gpu suite: N passed, N failed, N skipped".
# GPU_SUITE_SOAK=1 adds the soak of scripts/soak.sh (50 failures in one job,
# on cc's server, on etcd, and on elected cc-rendezvous daemons with 5
# leader kills), minutes each. GPU_SUITE_ONLY, an extended
# regular expression, keeps the steps whose names match it and leaves the
# others out, uncounted: parts of the suite can then run side by side, or in
# several sittings of a machine lent by the quarter hour.
set -u

. "$(dirname "$0")/../tests/common/suite_args.sh"
suite_folders gpu-suite "$@"
OUT=$OUT_DIR
STEP_TIMEOUT=${GPU_SUITE_STEP_TIMEOUT:-900}
export NCCL_NVLS_ENABLE=0
export CC_TIMEOUT_MS=${CC_TIMEOUT_MS:-120000}

CC_RUN=$BUILD/tools/cc-run
GPU_TESTS=()
for t in gpu_collectives gpu_fast_paths; do
  [ -x "$BUILD/tests/gpu/$t" ] && GPU_TESTS+=("$BUILD/tests/gpu/$t")
done
EXAMPLES=()
for e in allreduce broadcast train_ddp train_recover; do
  [ -x "$BUILD/examples/$e" ] && EXAMPLES+=("$BUILD/examples/$e")
done

passed=0
failed=0
failed_steps=()

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    2>/dev/null || echo $((20000 + RANDOM % 20000))
}

# wanted NAME: the step is one GPU_SUITE_ONLY keeps (every step without it).
wanted() { [ -z "${GPU_SUITE_ONLY:-}" ] || [[ $1 =~ $GPU_SUITE_ONLY ]]; }

# run NAME CMD...: runs CMD under timeout, logs to OUT/NAME.log, counts it.
# A step GPU_SUITE_ONLY leaves out returns 1 uncounted (its `expect` is skipped).
run() {
  local name=$1
  shift
  wanted "$name" || return 1
  local log=$OUT/$name.log
  echo "== $name: $*" | tee "$log"
  local start=$SECONDS
  timeout --kill-after=30 "$STEP_TIMEOUT" "$@" >>"$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
    echo "-- $name: passed ($((SECONDS - start)) s)" | tee -a "$log"
  else
    failed=$((failed + 1))
    failed_steps+=("$name")
    local why="exit status $rc"
    [ $rc -eq 124 ] && why="timed out after $STEP_TIMEOUT s"
    [ $rc -eq 77 ] && why="skipped (77): no usable GPU"
    echo "-- $name: FAILED, $why ($((SECONDS - start)) s); last lines:" | tee -a "$log"
    tail -n 25 "$log" | sed 's/^/   | /'
  fi
  return $rc
}

# skip NAME REASON: a step this machine cannot run; counted and listed, never passed.
skipped=0
skipped_steps=()
skip() {
  wanted "$1" || return 0
  skipped=$((skipped + 1))
  skipped_steps+=("$1 ($2)")
  echo "-- $1: skipped: $2" | tee "$OUT/${1//[^A-Za-z0-9_.-]/_}.log"
}

# expect NAME PATTERN COUNT: the step's log holds PATTERN at least COUNT times.
expect() {
  local n
  n=$(grep -c -- "$2" "$OUT/$1.log")
  if [ "$n" -lt "$3" ]; then
    failed=$((failed + 1))
    passed=$((passed - 1))
    failed_steps+=("$1 (output)")
    echo "-- $1: output has '$2' $n times, want $3" | tee -a "$OUT/$1.log"
  fi
}

{
  echo "== machine"
  uname -a
  nvidia-smi -L || echo "nvidia-smi failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null
} 2>&1 | tee "$OUT/machine.log"

# The libraries each binary loads: libnccl must resolve.
{
  for bin in "$BUILD/lib/libcc.so" "${GPU_TESTS[@]}" "${EXAMPLES[@]}"; do
    echo "== ldd $bin"
    ldd "$bin"
  done
} >"$OUT/ldd.log" 2>&1
grep -E "libnccl|libcc\.so|libcudart" "$OUT/ldd.log" | sort | uniq -c
if grep -q "not found" "$OUT/ldd.log"; then
  echo "gpu-suite: some libraries do not resolve (see $OUT/ldd.log):"
  grep "not found" "$OUT/ldd.log" | sort -u
  known=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
  for dir in ${NCCL_LIB_DIR:-} ${known:+$(dirname "$known")} /usr/local/cuda/lib64 /usr/local/cuda/lib \
             /usr/lib/x86_64-linux-gnu /usr/local/lib; do
    if ls "$dir"/libnccl.so.2 >/dev/null 2>&1; then
      export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      echo "gpu-suite: using libnccl from $dir"
      break
    fi
  done
fi

if [ ! -x "$CC_RUN" ]; then
  echo "gpu-suite: $CC_RUN is missing; build the project first" >&2
  exit 2
fi

# The other NCCL: NCCL_ALT_LIB_DIR, else the machine's PyTorch wheel's.
ALT=${NCCL_ALT_LIB_DIR:-$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)}

# What one GPU can check: cc's kernels with 2 to 8 ranks as streams of one
# process, and a communicator of one rank (a job's first try, a test) with
# each NCCL. GPU_SUITE_ONE_GPU=1 runs only these, for a machine of one GPU.
# GPU_SUITE_MULTI_ONLY=1 leaves these out (a session that ran them apart).
if [ "${GPU_SUITE_MULTI_ONLY:-0}" != 1 ]; then
  run gpu_kernels_one_gpu "$BUILD/tests/gpu/gpu_kernels_one_gpu"
  run "gpu_collectives-one-rank" "$CC_RUN" -n 1 -- "$BUILD/tests/gpu/gpu_collectives"
fi
# Calls checked across ranks, 2 and 4 ranks on one GPU (cc-run --share-gpu):
# ranks that diverge at op #50 in each way, a legal program on two
# communicators, the flight recorder after a mismatch, a timeout, a kill and
# SIGUSR1, read by cc-doctor trace.
CALL_CHECK_SH=$(cd "$(dirname "$0")/.." && pwd)/tests/gpu/gpu_call_check.sh
if [ -x "$BUILD/tests/gpu/gpu_call_check" ] && [ -f "$CALL_CHECK_SH" ]; then
  STEP_TIMEOUT=$((STEP_TIMEOUT > 1200 ? STEP_TIMEOUT : 1200)) \
    run gpu-call-check bash "$CALL_CHECK_SH" "$BUILD" &&
    expect gpu-call-check "gpu_call_check: all passed" 1
fi
# Ranks whose calls differ and then destroy at once, 2 and 4 ranks on one
# GPU: every way of differing, in the middle and among the last ten calls,
# named by cc_comm_destroy (or a call) on every rank; the control told nothing.
CALL_ENDS_SH=$(cd "$(dirname "$0")/.." && pwd)/tests/gpu/gpu_call_ends.sh
if [ -x "$BUILD/tests/gpu/gpu_call_ends" ] && [ -f "$CALL_ENDS_SH" ]; then
  run gpu-call-ends bash "$CALL_ENDS_SH" "$BUILD" &&
    expect gpu-call-ends "gpu_call_ends: all passed" 1
fi
# NCCL's scalable init, 2 and 4 ranks on one GPU made from several ids
# (CC_NCCL_RANKS_PER_ID below the size), checked against a plain init; with
# the other NCCL too.
SCALABLE_SH=$(cd "$(dirname "$0")/.." && pwd)/tests/gpu/gpu_scalable_init.sh
if [ -x "$BUILD/tests/gpu/gpu_scalable_init" ] && [ -f "$SCALABLE_SH" ]; then
  run gpu-scalable-init bash "$SCALABLE_SH" "$BUILD" &&
    expect gpu-scalable-init "gpu_scalable_init: all passed" 1
  if [ -n "$ALT" ] && [ -e "$ALT/libnccl.so.2" ]; then
    LD_LIBRARY_PATH=$ALT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
      run gpu-scalable-init-alt-nccl bash "$SCALABLE_SH" "$BUILD" 4-1 &&
      expect gpu-scalable-init-alt-nccl "gpu_scalable_init: all passed" 1
  fi
fi
if [ "${GPU_SUITE_ONE_GPU:-0}" = 1 ]; then
  if [ -n "$ALT" ] && [ -e "$ALT/libnccl.so.2" ]; then
    LD_LIBRARY_PATH=$ALT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
      run "gpu_collectives-one-rank-alt-nccl" "$CC_RUN" -n 1 -- "$BUILD/tests/gpu/gpu_collectives"
  fi
  echo
  [ ${#failed_steps[@]} -gt 0 ] && printf 'failed: %s\n' "${failed_steps[@]}"
  echo "logs: $OUT"
  echo "gpu suite (one GPU): $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
fi

# Fewer GPUs than a step's ranks: the ranks share GPU 0, each its own host to
# NCCL (cc-run --share-gpu, CC_SHARE_GPU=1 for ranks started otherwise;
# lib/launch/share_gpu.hpp). Everything but cc's kernels across processes
# and the timings is then tested; what needs one GPU per rank is skipped,
# with its reason, and never counted as passed.
NGPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
SHARE=()
KERNEL_CASES=()
if [ "$NGPUS" -lt 2 ]; then
  SHARE=(--share-gpu)
  export CC_SHARE_GPU=1
  KERNEL_CASES=("~[one-gpu-per-rank]")
  export SECOND_GPU=0  # the namespace hosts of gpu_preflight_netns.sh
  echo "gpu-suite: $NGPUS GPU(s): the steps of 2 ranks and more share GPU 0, each rank its own host to NCCL"
fi
NEEDS_GPU_PER_RANK="needs one GPU per rank: cc's kernels across processes (this machine has $NGPUS GPU(s))"
# cc-run's flag for a step of N ranks.
share_for() { [ "$NGPUS" -lt "$1" ] && echo --share-gpu; }

for t in "${GPU_TESTS[@]}"; do
  name=$(basename "$t")
  run "$name-cc-run" "$CC_RUN" -n 2 "${SHARE[@]}" -- "$t" "${KERNEL_CASES[@]}"
done
[ ${#KERNEL_CASES[@]} -gt 0 ] &&
  skip "gpu_collectives [one-gpu-per-rank] cases" "$NEEDS_GPU_PER_RANK"

# Past two ranks: point-to-point and split with 4 and 8 ranks.
if [ -x "$BUILD/tests/gpu/gpu_collectives" ]; then
  for n in 4 8; do
    run "gpu_collectives-p2p-split-$n" "$CC_RUN" -n $n $(share_for $n) -- "$BUILD/tests/gpu/gpu_collectives" \
      "send and recv*,split*,a 1-rank*,a negative color*,a group mixing*"
  done
fi

# The same binaries with the other NCCL.
if [ -n "$ALT" ] && [ -e "$ALT/libnccl.so.2" ]; then
  for t in "${GPU_TESTS[@]}"; do
    name=$(basename "$t")
    LD_LIBRARY_PATH=$ALT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} run "$name-cc-run-alt-nccl" "$CC_RUN" -n 2 \
      "${SHARE[@]}" -- "$t" "${KERNEL_CASES[@]}"
  done
else
  echo "gpu-suite: no second NCCL (NCCL_ALT_LIB_DIR unset, no PyTorch wheel's); the -alt-nccl runs are left out"
fi

MPIRUN=$(command -v mpirun || true)
MPI_FLAGS=()
if [ -n "$MPIRUN" ]; then
  [ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)
  MPI_FLAGS+=(--oversubscribe -n 2 -x NCCL_NVLS_ENABLE -x CC_TIMEOUT_MS -x MASTER_ADDR -x MASTER_PORT)
  [ ${#SHARE[@]} -gt 0 ] && MPI_FLAGS+=(-x CC_SHARE_GPU)
  for t in "${GPU_TESTS[@]}"; do
    name=$(basename "$t")
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) run "$name-mpirun" "$MPIRUN" "${MPI_FLAGS[@]}" "$t" \
      "${KERNEL_CASES[@]}"
  done
else
  echo "gpu-suite: mpirun not found; the mpirun runs are left out"
fi

# What each example must print, once per rank.
expect_example() {
  case $1 in
    allreduce) expect "$2" "after all-reduce: 3.0" 2 ;;
    broadcast) expect "$2" "\[1.0, 2.0, 3.0\]" 2 ;;
    train_ddp) expect "$2" "weights identical" 2 ;;
    train_recover) expect "$2" "weights identical across 2 ranks after 200 steps (generation 0)" 2 ;;
  esac
}
for e in "${EXAMPLES[@]}"; do
  base=$(basename "$e")
  run "example-$base-cc-run" "$CC_RUN" -n 2 "${SHARE[@]}" -- "$e" && expect_example "$base" "example-$base-cc-run"
done
# The all-reduce example with 4 and 8 ranks: each gets the sum 1 + ... + N.
if [ -x "$BUILD/examples/allreduce" ]; then
  for n in 4 8; do
    run "example-allreduce-cc-run-$n" "$CC_RUN" -n $n $(share_for $n) -- "$BUILD/examples/allreduce" &&
      expect "example-allreduce-cc-run-$n" "after all-reduce: $((n * (n + 1) / 2)).0" $n
  done
fi

# Without --share-gpu, two ranks on a machine of one GPU are refused at
# once, in the words that name the flag's reason.
if [ -x "$BUILD/examples/allreduce" ] && [ "$NGPUS" -eq 1 ]; then
  refused() { ! env -u CC_SHARE_GPU "$CC_RUN" -n 2 -- "$BUILD/examples/allreduce"; }
  export -f refused
  export CC_RUN BUILD
  run example-allreduce-one-gpu-refused bash -c refused &&
    expect example-allreduce-one-gpu-refused "use the same GPU" 1
fi

if [ -x "$BUILD/examples/allreduce" ]; then
  if [ -n "$MPIRUN" ]; then
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) \
      run example-allreduce-mpirun "$MPIRUN" "${MPI_FLAGS[@]}" "$BUILD/examples/allreduce" &&
      expect example-allreduce-mpirun "after all-reduce: 3.0" 2
  fi
  # By hand, as on two hosts: two processes with the torchrun-style variables.
  port=$(free_port)
  by_hand() {
    RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port LOCAL_RANK=1 \
      "$BUILD/examples/allreduce" &
    local other=$!
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port LOCAL_RANK=0 \
      "$BUILD/examples/allreduce"
    local rc0=$?
    wait $other
    local rc1=$?
    [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]
  }
  export -f by_hand
  export BUILD port
  run example-allreduce-by-hand bash -c by_hand && expect example-allreduce-by-hand "after all-reduce: 3.0" 2
fi

# cc_comm_init on an etcd rendezvous (MASTER_ADDR=etcd://...): skipped, not
# counted, where the machine has no etcd or libcc-etcd.so cannot load.
ETCD_SH=$(cd "$(dirname "$0")/.." && pwd)/tests/gpu/gpu_etcd.sh
if [ -f "$ETCD_SH" ] && wanted gpu-etcd; then
  echo "== gpu-etcd: $ETCD_SH $BUILD" | tee "$OUT/gpu-etcd.log"
  timeout --kill-after=30 "$STEP_TIMEOUT" bash "$ETCD_SH" "$BUILD" >>"$OUT/gpu-etcd.log" 2>&1
  rc=$?
  if [ $rc -eq 77 ]; then
    echo "-- gpu-etcd: left out: $(grep SKIP "$OUT/gpu-etcd.log" | head -1)"
  elif [ $rc -eq 0 ] && grep -q "gpu_etcd: all passed" "$OUT/gpu-etcd.log"; then
    passed=$((passed + 1))
    echo "-- gpu-etcd: passed"
  else
    failed=$((failed + 1))
    failed_steps+=(gpu-etcd)
    echo "-- gpu-etcd: FAILED, exit status $rc; last lines:"
    tail -n 25 "$OUT/gpu-etcd.log" | sed 's/^/   | /'
  fi
fi

# The failure scenarios: a killed rank, a skipped collective, abort from threads, a rank
# that never arrives; ranks by hand, words checked by the script.
FAILURES_SH=$(cd "$(dirname "$0")/.." && pwd)/tests/gpu/gpu_failures.sh
if [ -x "$BUILD/tests/gpu/gpu_failures" ] && [ -f "$FAILURES_SH" ]; then
  for scenario in kill-loop kill-small kill-oneshot kill-twoshot skip skip-small skip-oneshot \
                  skip-twoshot abort-threads init-missing status init-fail init-nosock \
                  kill-loop-4 kill-loop-8 init-fail-4; do
    # The -small, -oneshot and -twoshot cases are about cc's kernels.
    if [ ${#SHARE[@]} -gt 0 ] && [[ $scenario =~ -(small|oneshot|twoshot)$ ]]; then
      skip "gpu-failures-$scenario" "$NEEDS_GPU_PER_RANK"
      continue
    fi
    run "gpu-failures-$scenario" bash "$FAILURES_SH" "$BUILD/tests/gpu/gpu_failures" "$scenario" &&
      expect "gpu-failures-$scenario" "gpu_failures: all passed" 1
  done
fi

# Recovery: a killed rank; the survivor shrinks, or cc-run starts it again and
# regrow takes it back; the training example ends with the weights of a run
# without a failure.
RECOVERY_SH=$(cd "$(dirname "$0")/.." && pwd)/tests/gpu/gpu_recovery.sh
if [ -x "$BUILD/tests/gpu/gpu_recovery" ] && [ -f "$RECOVERY_SH" ]; then
  for scenario in shrink-cc-run shrink-new-id shrink-by-hand regrow-cc-run train-regrow train-shrink \
                  shrink-4 shrink-8 regrow-nodes-4 regrow-nodes-8; do
    run "gpu-recovery-$scenario" bash "$RECOVERY_SH" "$BUILD" "$scenario" &&
      expect "gpu-recovery-$scenario" "gpu_recovery: all passed" 1
  done
  # A regrown generation's communicator from several NCCL ids (scalable init).
  CC_LOG_LEVEL=info CC_NCCL_RANKS_PER_ID=1 run gpu-recovery-regrow-nodes-4-scalable-init \
    bash "$RECOVERY_SH" "$BUILD" regrow-nodes-4 &&
    expect gpu-recovery-regrow-nodes-4-scalable-init "gpu_recovery: all passed" 1 &&
    expect gpu-recovery-regrow-nodes-4-scalable-init \
      "made by a new NCCL communicator (ncclCommInitRankScalable from 4 NCCL ids)" 1
  # The same with the other NCCL (whether it has ncclCommShrink or not).
  if [ -n "$ALT" ] && [ -e "$ALT/libnccl.so.2" ]; then
    for scenario in shrink-cc-run regrow-cc-run train-regrow; do
      LD_LIBRARY_PATH=$ALT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        run "gpu-recovery-$scenario-alt-nccl" bash "$RECOVERY_SH" "$BUILD" "$scenario" &&
        expect "gpu-recovery-$scenario-alt-nccl" "gpu_recovery: all passed" 1
    done
  fi
else
  echo "gpu-suite: $BUILD/tests/gpu/gpu_recovery is missing: the recovery steps cannot run"
  failed=$((failed + 1))
  failed_steps+=("gpu-recovery (not built)")
fi

# The rendezvous over TLS (certificates made there with openssl): the
# examples, ranks by hand, a killed rank's shrink, and the control whose
# clear clients are refused by the TLS server.
TLS_SH=$(cd "$(dirname "$0")/.." && pwd)/tests/gpu/gpu_tls.sh
if [ -x "$BUILD/tests/gpu/gpu_recovery" ] && [ -f "$TLS_SH" ]; then
  run gpu-tls bash "$TLS_SH" "$BUILD" && expect gpu-tls "gpu_tls: all passed" 1
fi

# A communicator's start across namespace hosts (NAT, --network host, a
# routed NAT), when ip and nft can be had: IP/IP_LIB and NFT/NFT_LIB, or a
# folder made by scripts/netns-tools.sh (NETNS_TOOLS, default
# BUILD/netns-tools when it exists).
PREFLIGHT_SH=$(cd "$(dirname "$0")/.." && pwd)/tests/gpu/gpu_preflight_netns.sh
NETNS_TOOLS=${NETNS_TOOLS:-$BUILD/netns-tools}
if [ -x "$NETNS_TOOLS/bin/ip" ] && [ -x "$NETNS_TOOLS/bin/nft" ]; then
  export IP=${IP:-$NETNS_TOOLS/bin/ip} IP_LIB=${IP_LIB:-$NETNS_TOOLS/lib}
  export NFT=${NFT:-$NETNS_TOOLS/bin/nft} NFT_LIB=${NFT_LIB:-$NETNS_TOOLS/lib}
fi
if [ -x "$BUILD/tests/gpu/gpu_failures" ] && [ -f "$PREFLIGHT_SH" ]; then
  if LD_LIBRARY_PATH=${IP_LIB:-${LD_LIBRARY_PATH-}} "${IP:-ip}" -V >/dev/null 2>&1; then
    for scenario in nat host routed; do
      run "gpu-preflight-netns-$scenario" bash "$PREFLIGHT_SH" "$BUILD/tests/gpu/gpu_failures" \
        "$scenario" && expect "gpu-preflight-netns-$scenario" "gpu_preflight_netns: all passed" 1
    done
  else
    echo "gpu-suite: no ip here (scripts/netns-tools.sh BUILD/netns-tools on a machine with ip and nft, or set IP/IP_LIB and NFT/NFT_LIB): the namespace steps are left out"
  fi
fi

# The soak (scripts/soak.sh): 50 failures in one training job of 4 ranks, on
# cc's server, on a 3-member etcd whose leader is killed midway, and on
# cc-rendezvous --etcd daemons whose leader is killed 5 times among the rank
# kills (elected; cc-run --no-agent: the node agent does not follow the
# leader yet); minutes each, so only with GPU_SUITE_SOAK=1. Its figures:
# OUT/soak-*/summary.md. Only the leader kills:
#   GPU_SUITE_SOAK=1 GPU_SUITE_ONLY=soak-elected scripts/gpu-suite.sh BUILD OUT
if [ "${GPU_SUITE_SOAK:-0}" = 1 ]; then
  SOAK_SH=$(cd "$(dirname "$0")" && pwd)/soak.sh
  for mode in server etcd elected; do
    if [ $mode != server ] && [ ! -x "$BUILD/etcd-tools/etcd" ] && [ -z "${CC_ETCD_BIN:-}" ] &&
      ! command -v etcd >/dev/null; then
      skip "soak-$mode" "no etcd program (STAGE_ETCD=1 scripts/stage-build.sh, or CC_ETCD_BIN)"
      continue
    fi
    # elected: 50 rank kills and 5 kills of the leading cc-rendezvous daemon
    # (the fifth inside a recovery), gaps short enough to stay near 5 minutes;
    # paced steps (6000 of at least 40 ms while kills go on) outlast the kills.
    if [ $mode = elected ]; then
      SOAK_CC_RUN_FLAGS=$(share_for 4) SOAK_GAP_MS=${SOAK_GAP_MS:-500-1500} \
        SOAK_STEPS=${SOAK_STEPS:-6000} SOAK_STEP_MS=${SOAK_STEP_MS:-40} \
        SOAK_LEADER_DURING_RECOVERY=${SOAK_LEADER_DURING_RECOVERY:-5} SOAK_LIMIT_S=${SOAK_LIMIT_S:-420} \
        run "soak-$mode" bash "$SOAK_SH" "$BUILD" "$OUT/soak-$mode" $mode &&
        expect "soak-$mode" "soak: passed" 1
      continue
    fi
    SOAK_CC_RUN_FLAGS=$(share_for 4) run "soak-$mode" bash "$SOAK_SH" "$BUILD" "$OUT/soak-$mode" $mode &&
      expect "soak-$mode" "soak: passed" 1
  done
fi

echo
[ ${#failed_steps[@]} -gt 0 ] && printf 'failed: %s\n' "${failed_steps[@]}"
[ ${#skipped_steps[@]} -gt 0 ] && printf 'skipped: %s\n' "${skipped_steps[@]}"
echo "logs: $OUT"
echo "gpu suite: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
