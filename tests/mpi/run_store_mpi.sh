#!/bin/sh
# The store test under mpirun: the ranks take their rank and world size from
# Open MPI's variables (OMPI_COMM_WORLD_*), rank 0 hosts the rendezvous server
# on a free port that this script picks and exports.
#   run_store_mpi.sh MPIRUN STORE_RANKS [NP] [MODE]
set -u
mpirun_bin=${1:-}
store_ranks=$2
np=${3:-4}
mode=${4:-basic}

if [ -z "$mpirun_bin" ] || ! command -v "$mpirun_bin" >/dev/null 2>&1; then
  echo "mpirun not found: skipping the mpi suite (install openmpi-bin, or configure with -Dmpi=disabled)"
  exit 77
fi

# Only Open MPI's variables may tell a rank who it is.
unset CC_RANK RANK PMI_RANK SLURM_PROCID CC_WORLD_SIZE WORLD_SIZE PMI_SIZE SLURM_NTASKS \
      CC_LOCAL_RANK LOCAL_RANK MPI_LOCALRANKID SLURM_LOCALID CC_MASTER_ADDR CC_MASTER_PORT
export MASTER_ADDR=127.0.0.1
export CC_TEST_HOST_SERVER=1
export CC_TEST_EXPECT_RANK_VAR=OMPI_COMM_WORLD_RANK

# The port is free when picked, but another test running beside this one may
# take it before rank 0 listens: then (and only then) a new port, twice at
# most.
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
for attempt in 1 2 3; do
  port=$("$store_ranks" --free-port) || { echo "cannot find a free port"; exit 1; }
  export MASTER_PORT="$port"
  export CC_JOB_ID="mpi-store-$$-$attempt"
  timeout -k 5 150 "$mpirun_bin" --allow-run-as-root --oversubscribe -n "$np" \
    -x MASTER_ADDR -x MASTER_PORT -x CC_JOB_ID -x CC_TEST_HOST_SERVER -x CC_TEST_EXPECT_RANK_VAR \
    "$store_ranks" "$mode" >"$out" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $attempt -lt 3 ] && grep -q "address already in use" "$out"; then
    echo "port $port was taken before rank 0 listened: again on another port"
    continue
  fi
  cat "$out"
  exit $rc
done
