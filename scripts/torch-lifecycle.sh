#!/usr/bin/env bash
# torch.distributed's life cycle with "cc" against "nccl" on a GPU machine,
# from a build folder made elsewhere: `import cc.torch`, then ROUNDS rounds
# of init_process_group, one all-reduce and destroy_process_group, 2 ranks.
# With one GPU both ranks share it as two hosts (NCCL over sockets, its P2P
# and SHM off, a host id per rank; CC_SHARE_GPU=1 for cc); with two or more,
# one GPU each. A last cc pass with CC_LOG_LEVEL=debug keeps libcc's account
# of each cc_comm_destroy (its NCCL teardown and its leave) in OUT.
#
#   scripts/torch-lifecycle.sh BUILD OUT [ROUNDS]     # ROUNDS: 5
#
# Writes OUT/lifecycle-<backend>.jsonl (one line per rank and round),
# OUT/lifecycle.md (medians over rounds of the slower rank) and
# OUT/cc-destroy-debug.log. PYTHON as for tests/python/gpu/run.sh.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD OUT [ROUNDS]" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd)
mkdir -p "$2" && OUT=$(cd "$2" && pwd)
ROUNDS=${3:-5}
SRC=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0
export CC_LIBRARY=$BUILD/lib/libcc.so.0
export CC_TORCH_BUILD_DIR=${CC_TORCH_BUILD_DIR:-$SRC/build-python/torch-ext}
export PYTHONPATH=$SRC/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "$ngpus" -ge 1 ] || { echo "torch-lifecycle: no GPU" >&2; exit 1; }

port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

"$PYTHON" -c 'import cc.torch'  # the extension, built once before the timed runs

run() {  # backend, output file, extra environment...
  local backend=$1 out=$2
  shift 2
  local base
  base=$(port)
  local pids=()
  for rank in 0 1; do
    local env=(RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank)
    if [ "$ngpus" -eq 1 ]; then
      env=(RANK=$rank WORLD_SIZE=2 LOCAL_RANK=0 NCCL_HOSTID="lifecycle-rank$rank"
           NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 CC_SHARE_GPU=1)
    fi
    env "${env[@]}" "$@" timeout 300 "$PYTHON" "$SRC/tests/python/gpu/bench_lifecycle.py" \
      "$backend" "$base" "$ROUNDS" >"$out.rank$rank" 2>"$out.rank$rank.err" &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$out.rank0" "$out.rank1" | grep '^{' >"$out" || true
  if [ $rc -ne 0 ]; then
    echo "torch-lifecycle: $backend failed; its stderr:" >&2
    cat "$out.rank0.err" "$out.rank1.err" >&2
    exit 1
  fi
}

for backend in nccl cc; do
  echo "== $backend: $ROUNDS rounds of init, all-reduce, destroy"
  run "$backend" "$OUT/lifecycle-$backend.jsonl"
done
echo "== cc once more with CC_LOG_LEVEL=debug (libcc's account of cc_comm_destroy)"
run cc "$OUT/lifecycle-cc-debug.jsonl" CC_LOG_LEVEL=debug
grep -h "destroyed\|NCCL communicators" "$OUT"/lifecycle-cc-debug.jsonl.rank*.err >"$OUT/cc-destroy-debug.log" || true

"$PYTHON" - "$OUT" "$ngpus" <<'PY'
import json, os, statistics, sys
out, ngpus = sys.argv[1], int(sys.argv[2])
rows = {}
for backend in ("nccl", "cc"):
    recs = [json.loads(l) for l in open(os.path.join(out, "lifecycle-%s.jsonl" % backend)) if l.strip()]
    assert all(r["ok"] for r in recs), "an all-reduce gave a wrong sum"
    per_round = {}
    for r in recs:
        per_round.setdefault(r["round"], []).append(r)
    def med(key):  # the slower rank of each round, then the median over rounds
        return statistics.median(max(x[key] for x in rs) for rs in per_round.values())
    rows[backend] = {k: med(k) for k in ("init_s", "first_allreduce_s", "destroy_s")}
    rows[backend]["import_s"] = max(r["cc_torch_import_s"] for r in recs)
    rows[backend]["destroy_all"] = [round(max(x["destroy_s"] for x in rs), 3)
                                    for _, rs in sorted(per_round.items())]
md = ["# torch.distributed life cycle: \"cc\" against \"nccl\"", "",
      "`scripts/torch-lifecycle.sh`, 2 ranks, %s; median over rounds of the slower rank."
      % ("one GPU shared as two hosts" if ngpus == 1 else "one GPU each"), "",
      "| backend | import cc.torch s | init_process_group s | first all_reduce s | destroy_process_group s | destroy per round s |",
      "|---|---:|---:|---:|---:|---|"]
for b, r in rows.items():
    md.append("| %s | %s | %.3f | %.3f | %.3f | %s |" % (
        b, "%.3f" % r["import_s"] if b == "cc" else "-", r["init_s"], r["first_allreduce_s"],
        r["destroy_s"], ", ".join("%.3f" % d for d in r["destroy_all"])))
open(os.path.join(out, "lifecycle.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
echo "libcc's account of cc_comm_destroy (debug pass):"
cat "$OUT/cc-destroy-debug.log"
