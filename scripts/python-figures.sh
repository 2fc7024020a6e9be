#!/usr/bin/env bash
# Figures for the Python side on a GPU machine, from a build folder made
# elsewhere, in one run:
#   - torch's init_process_group (with a first all_reduce) and
#     destroy_process_group through "cc" and through "nccl", 2 ranks,
#     PYTHON_FIGURES_LIFECYCLE_RUNS times each (default 3, each a new pair of
#     processes);
#   - with 2 GPUs or more: torch's all_reduce through "cc" and through "nccl",
#     8 B to 512 MiB; a small DDP model's step time with each;
#     cc.Comm.allreduce on a torch tensor against cc-bench at the same sizes,
#     eagerly and in a CUDA graph (the cost of a call from Python).
# On one GPU the two ranks share it as two hosts (torchrun as one node per
# rank with CC_SHARE_GPU=1, tests/python/gpu/hosts_on_one_gpu.sh), NCCL over
# sockets: only the init and destroy times are measured there, as the
# collectives' times would say nothing of a real machine.
#
#   scripts/python-figures.sh BUILD OUT
#
# Writes OUT/python-figures.md (tables, ready for docs/) and the raw
# OUT/*.jsonl and cc-bench JSON. PYTHON as for tests/python/gpu/run.sh.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD OUT" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd)
mkdir -p "$2" && OUT=$(cd "$2" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
GPU=$SRC/tests/python/gpu
PYTHON=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0
export CC_LIBRARY=$BUILD/lib/libcc.so.0
export CC_TORCH_BUILD_DIR=${CC_TORCH_BUILD_DIR:-$SRC/build-python/torch-ext}
export PYTHONPATH=$SRC/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1

port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

RUNS=${PYTHON_FIGURES_LIFECYCLE_RUNS:-3}
gpus=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')
rm -f "$OUT"/torch-*.jsonl "$OUT"/comm.jsonl "$OUT"/cc-bench-G*.json

"$PYTHON" -c 'import cc.torch' # the extension, built once before the timed runs
torchrun2() {  # SCRIPT ARG...: two ranks, sharing GPU 0 where there is one GPU
  if [ "$gpus" -ge 2 ]; then
    "$PYTHON" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
      --master-port "$(port)" "$@"
  else
    bash "$GPU/hosts_on_one_gpu.sh" "$PYTHON" 2 "$(port)" 127.0.0.1 "$@"
  fi
}
for backend in nccl cc; do
  for ((run = 1; run <= RUNS; run++)); do
    if [ "$gpus" -ge 2 ] && [ "$run" -eq 1 ]; then
      echo "== torch all_reduce and DDP step through $backend (with init and destroy)"
      torchrun2 "$GPU/bench_torch.py" "$backend" | grep '^{' >>"$OUT/torch-$backend.jsonl"
    else
      echo "== torch init and destroy through $backend, run $run of $RUNS"
      BENCH_TORCH_LIFECYCLE_ONLY=1 torchrun2 "$GPU/bench_torch.py" "$backend" \
        | grep '^{' >>"$OUT/torch-$backend.jsonl"
    fi
  done
done
if [ "$gpus" -ge 2 ]; then
  echo "== cc.Comm.allreduce from Python"
  "$BUILD/tools/cc-run" -n 2 -- "$PYTHON" "$GPU/bench_comm.py" | sed 's/^\[rank [0-9]*\] //' \
    | grep '^{' >"$OUT/comm.jsonl"
  echo "== cc-bench at the same sizes, eager and graphed"
  for graph in 0 100; do
    args=(-b 8 -e 16M -f 2 -n 2000 --small-iters 2000 -i 1 --json "$OUT/cc-bench-G$graph.json")
    [ "$graph" -gt 0 ] && args+=(-G "$graph")
    "$BUILD/tools/cc-run" -n 2 -- "$BUILD/tools/cc-bench" "${args[@]}" >"$OUT/cc-bench-G$graph.log"
  done
fi

"$PYTHON" - "$OUT" "$gpus" <<'PY'
import json, os, statistics, sys
out, gpus = sys.argv[1], int(sys.argv[2])
def lines(name):
    return [json.loads(l) for l in open(os.path.join(out, name)) if l.strip()]
def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n
torch = {b: lines("torch-%s.jsonl" % b) for b in ("nccl", "cc")}
where = ("2 GPUs, one process per GPU" if gpus >= 2 else
         "one GPU shared by 2 ranks as two hosts (NCCL over sockets, cc's kernels off)")
md = ["# Python figures", "",
      "One run of `scripts/python-figures.sh` on %s." % where, "",
      "## torch.distributed init and destroy: \"cc\" against \"nccl\"", "",
      "Seconds, each run a new pair of processes: `init_process_group`, then a first "
      "`all_reduce` of one element until the GPU is done (where both backends make their "
      "communicator), the larger of the two ranks; `destroy_process_group` after a barrier, "
      "the larger of the two ranks. Median, and every run in brackets.", "",
      "| backend | init_process_group s | first all_reduce s | destroy_process_group s |",
      "|---|---:|---:|---:|"]
def cell(values):
    return "%.3f (%s)" % (statistics.median(values), ", ".join("%.3f" % v for v in values))
for b in ("nccl", "cc"):
    inits = [r for r in torch[b] if r["kind"] == "init"]
    destroys = [r["destroy_process_group_s"] for r in torch[b] if r["kind"] == "destroy"]
    # destroy records come one per rank, runs in order: the larger of each pair
    per_run = [max(destroys[i:i + 2]) for i in range(0, len(destroys), 2)]
    md.append("| %s | %s | %s | %s |" % (b, cell([r["init_process_group_s"] for r in inits]),
                                        cell([r["first_all_reduce_s"] for r in inits]), cell(per_run)))
if gpus < 2:
    md += ["", "The collectives' times are not measured on one GPU: over sockets between "
           "processes sharing it they say nothing of a real machine."]
else:
    md += ["", "## torch.distributed all_reduce: \"cc\" against \"nccl\"", "",
           "Mean wall time per `dist.all_reduce(x)` of float32 (in place, synchronous) over a timed loop, the "
           "largest over ranks; bus bandwidth as nccl-tests.", "",
           "| size | nccl µs | cc µs | nccl busbw GB/s | cc busbw GB/s |", "|---|---:|---:|---:|---:|"]
    rows = {b: {r["bytes"]: r for r in torch[b] if r["kind"] == "allreduce"} for b in torch}
    for n in sorted(rows["nccl"]):
        a, c = rows["nccl"][n], rows["cc"].get(n)
        md.append("| %s | %.1f | %s | %.1f | %s |" % (human(n), a["us"], "%.1f" % c["us"] if c else "-",
                  a["busbw_gbs"], "%.1f" % c["busbw_gbs"] if c else "-"))
    md += ["", "## A small DDP step", ""]
    for b in ("nccl", "cc"):
        for r in torch[b]:
            if r["kind"] == "ddp_step":
                md.append("- %s: %.0f µs per step (%d parameters, batch %d)" % (b, r["us"], r["params"], r["batch"]))
    bench = {}
    for g in (0, 100):
        data = json.load(open(os.path.join(out, "cc-bench-G%d.json" % g)))
        for row in data["collectives"][0]["rows"]:
            if row["impl"] == "cc" and row["mode"] == "in-place":
                bench[(g, row["size"])] = row["time_us"]
    md += ["", "## cc.Comm.allreduce from Python against cc-bench", "",
           "Per call, in place, on a torch tensor: a timed loop of `comm.allreduce(x)` (eager) and "
           "100 calls captured in one CUDA graph and replayed (graph); cc-bench runs the same sizes "
           "from C (`-G 100` for the graph column). The eager difference is what Python and ctypes "
           "add per call; in a graph replay neither runs.", "",
           "| size | Python eager µs | cc-bench eager µs | Python graph µs | cc-bench graph µs |",
           "|---|---:|---:|---:|---:|"]
    for r in lines("comm.jsonl"):
        n = r["bytes"]
        md.append("| %s | %.2f | %s | %.2f | %s |" % (
            human(n), r["eager_us"], "%.2f" % bench[(0, n)] if (0, n) in bench else "-",
            r["graph_us"], "%.2f" % bench[(100, n)] if (100, n) in bench else "-"))
open(os.path.join(out, "python-figures.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
