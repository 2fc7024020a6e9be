"""cc.Comm.allreduce on torch tensors, the cost of a call from Python, one
process per rank (cc-run -n 2); rank 0 prints one JSON object per line.

For each size: "eager", a timed loop of comm.allreduce(x) on torch's current
stream (wall time per call, after a final synchronize: what Python adds to
cc's own cost shows against cc-bench's time for the same size); and "graph",
GRAPH_CALLS calls captured once in a CUDA graph and replayed (time per call:
no Python, no ctypes, in the replay). Times are the largest over ranks.
"""

import json
import time

import torch

import cc

GRAPH_CALLS = 100
comm = cc.Comm.from_env()
rank, dev = comm.rank, comm.device
torch.cuda.set_device(dev)
device = torch.device("cuda", dev)


def slowest(seconds):
    t = torch.tensor([seconds], dtype=torch.float64, device=device)
    comm.allreduce(t, op="max")
    return t.item()


def eager(x, iters):
    for _ in range(max(10, iters // 10)):
        comm.allreduce(x)
    torch.cuda.synchronize()
    comm.barrier()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        comm.allreduce(x)
    torch.cuda.synchronize()
    return slowest((time.perf_counter() - start) / iters)


def graphed(x, replays):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        comm.allreduce(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_CALLS):
            comm.allreduce(x)
    graph.replay()
    torch.cuda.synchronize()
    comm.barrier()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()
    seconds = slowest((time.perf_counter() - start) / (replays * GRAPH_CALLS))
    del graph
    return seconds


for nbytes in (8, 1 << 10, 64 << 10, 1 << 20, 16 << 20):
    x = torch.ones(max(1, nbytes // 4), device=device)
    iters = 2000 if nbytes <= (64 << 10) else 200
    e = eager(x, iters)
    g = graphed(x, max(2, iters // GRAPH_CALLS))
    if rank == 0:
        print(json.dumps({"kind": "comm_allreduce", "bytes": nbytes, "eager_us": e * 1e6,
                          "graph_us": g * 1e6, "iters": iters}), flush=True)
comm.destroy()
