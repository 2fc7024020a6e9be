# Shared by the GPU figure scripts (failure-bench.sh, recovery-bench.sh).
# Sourced once BUILD is set, with the script's OUT argument (may be empty):
# sets OUT (a new scratch folder when not given) as an absolute path, HERE
# (the source tree) and TRIALS (10 unless set), exports NCCL_NVLS_ENABLE=0,
# and defines median and summary.
OUT=${1:-$(mktemp -d)}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
HERE=$(cd "$(dirname "$0")/.." && pwd)
TRIALS=${TRIALS:-10}
export NCCL_NVLS_ENABLE=0

median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
summary() {  # summary FILE WHAT -> prints and sets MED and WORST
  MED=$(median <"$1")
  WORST=$(sort -n "$1" | tail -n 1)
  echo "$2: median $MED ms, worst ${WORST:-nan} ms over $(wc -l <"$1") trials"
}
