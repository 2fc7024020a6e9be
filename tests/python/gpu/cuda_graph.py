"""dist.all_reduce captured in torch.cuda.graph and replayed, on a backend
named on the command line ("nccl" or "cc"), under torchrun:

    python -m torch.distributed.run --nproc-per-node 2 cuda_graph.py cc

Checks, with values: one all_reduce captured and replayed with new inputs
each time; an async all_reduce whose wait() is captured too, followed by
work on the captured stream; several all-reduces of different sizes and
ops in one graph. Then times a graph of 100 captured 8-byte all-reduces
(GPU time per all-reduce, from CUDA events around the replays) and prints

    rank R [BACKEND] graph replay: X us per 8 B all_reduce

for comparing the backends in one run. Exit status 1 when a check failed.
"""

import sys

import torch
import torch.distributed as dist

import cc.torch  # noqa: F401 (registers the backend)
import harness
from harness import equal

backend = sys.argv[1]
rank, size, local, device = harness.torchrun_rank()
dist.init_process_group(backend)
check = harness.Checks("rank %d [%s]" % (rank, backend))
full = lambda n, v, dtype=torch.float32: harness.full(n, v, dtype, device)  # noqa: E731


def warm_up(*tensors):
    """The communicator exists before a capture (its first operation makes
    it), and every collective ran once eagerly, as torch's docs ask of
    anything captured."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for t in tensors:
            dist.all_reduce(t)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


@check("one all_reduce captured, replayed with new inputs")
def _():
    x = full(1 << 16, 0.0)
    warm_up(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(x)
    for i in range(5):
        x.fill_(rank + 1 + i)
        graph.replay()
        want = sum(r + 1 + i for r in range(size))
        equal(x, full(1 << 16, want), "replay %d" % i)


@check("async all_reduce with wait() captured, then work on the captured stream")
def _():
    x = full(4096, 0.0)
    y = full(4096, 0.0)
    warm_up(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        y.copy_(x * 2)
    for i in range(3):
        x.fill_(rank + 10 * i)
        graph.replay()
        want = sum(r + 10 * i for r in range(size))
        equal(y, full(4096, 2 * want), "replay %d" % i)


@check("all-reduces of several sizes, dtypes and ops in one graph")
def _():
    a = full(7, 0.0)
    b = full(1 << 20, 0.0, torch.bfloat16)
    c = full(33, 0, torch.int64)
    warm_up(a, b, c)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(a)
        dist.all_reduce(b)
        dist.all_reduce(c, op=dist.ReduceOp.MAX)
    for i in range(3):
        a.fill_(rank + i)
        b.fill_(1.0)
        c.fill_(rank * 3 + i)
        graph.replay()
        equal(a, full(7, sum(r + i for r in range(size))), "a, replay %d" % i)
        equal(b, full(1 << 20, float(size), torch.bfloat16), "b, replay %d" % i)
        equal(c, full(33, (size - 1) * 3 + i, torch.int64), "c, replay %d" % i)


@check("graph replay time of 8 B all-reduces")
def _():
    x = full(2, 1.0)
    warm_up(x)
    per_graph = 100
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per_graph):
            dist.all_reduce(x, op=dist.ReduceOp.MAX)  # values stay finite
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    replays = 20
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    us = start.elapsed_time(end) * 1000.0 / (replays * per_graph)
    harness.say("rank %d [%s] graph replay: %.2f us per 8 B all_reduce" % (rank, backend, us))


dist.barrier()
dist.destroy_process_group()
sys.exit(check.summary())
