"""cc.Comm on real GPUs, one process per rank (run under cc-run -n 2).

Every collective on torch tensors with the values checked; the same through
DLPack and __cuda_array_interface__ producers (wrappers exposing only that
protocol over real CUDA memory); stream=; argument errors as text; split;
a graph captured once and replayed. Prints PASS/FAIL as each check ends; exit
status 1 when any failed.
"""

import functools
import sys

import torch

import cc
import harness
from harness import equal

comm, rank, size, dev, device = harness.cc_rank()
total = size * (size + 1) // 2  # sum over ranks of (rank + 1)
check = harness.Checks("rank %d" % rank)
full = functools.partial(harness.full, device=device)


def refused(fn, *phrases):
    try:
        fn()
    except cc.InvalidArgumentError as e:
        for p in phrases:
            if p not in str(e):
                raise AssertionError("words %r lack %r" % (str(e), p))
        return
    raise AssertionError("not refused")


@check("allreduce sum, in place, float32")
def _():
    x = full(1000, rank + 1)
    assert comm.allreduce(x) is x
    equal(x, full(1000, total), "sum")


@check("allreduce every op")
def _():
    for op, want in (("sum", total), ("prod", float(torch.arange(1, size + 1).prod())),
                     ("max", size), ("min", 1), ("avg", total / size)):
        x = full(64, rank + 1)
        comm.allreduce(x, op=op)
        equal(x, full(64, want), op)


@check("allreduce every dtype")
def _():
    dtypes = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
              torch.float64, torch.float32]
    for name in ("uint32", "uint64", "float8_e4m3fn", "float8_e5m2"):
        if hasattr(torch, name):
            dtypes.append(getattr(torch, name))
    for dtype in dtypes:
        try:  # torch's own support for uint32/uint64 is partial
            x, want = full(300, rank + 1, dtype), full(300, total, dtype)
            want.float()
        except (RuntimeError, NotImplementedError) as e:
            harness.say("rank %d: torch cannot make or compare %s here (%s); not tried"
                        % (rank, dtype, str(e).splitlines()[0]))
            continue
        comm.allreduce(x)
        equal(x, want, str(dtype))


@check("allreduce out of place, small (cc's kernel) and large")
def _():
    for n in (16, 1 << 20):
        x, out = full(n, rank + 1), torch.zeros(n, device=device)
        assert comm.allreduce(x, out) is out
        equal(out, full(n, total), "out")
        equal(x, full(n, rank + 1), "x untouched")


@check("broadcast from the last rank")
def _():
    x = full(257, 100 + rank)
    comm.broadcast(x, root=size - 1)
    equal(x, full(257, 100 + size - 1), "broadcast")


@check("reduce to rank 0")
def _():
    x, out = full(99, rank + 1), torch.zeros(99, device=device)
    comm.reduce(x, out, op="max", root=0)
    if rank == 0:
        equal(out, full(99, size), "reduce")


@check("allgather")
def _():
    n = 1000
    out = torch.zeros(size * n, device=device)
    comm.allgather(full(n, rank + 1), out)
    equal(out, torch.arange(1, size + 1, device=device, dtype=torch.float32).repeat_interleave(n),
          "allgather")


@check("reducescatter")
def _():
    n = 512
    x = torch.cat([full(n, rank + j) for j in range(size)])
    out = torch.zeros(n, device=device)
    comm.reducescatter(x, out)
    equal(out, full(n, sum(r + rank for r in range(size))), "reducescatter")


@check("alltoall")
def _():
    n = 128
    x = torch.cat([full(n, rank * 100 + j) for j in range(size)])
    out = torch.zeros(size * n, device=device)
    comm.alltoall(x, out)
    equal(out, torch.cat([full(n, j * 100 + rank) for j in range(size)]), "alltoall")


@check("send/recv ring inside cc.group()")
def _():
    x, got = full(1000, rank), torch.zeros(1000, device=device)
    with cc.group():
        comm.send(x, (rank + 1) % size)
        comm.recv(got, (rank - 1) % size)
    equal(got, full(1000, (rank - 1) % size), "ring")


@check("barrier")
def _():
    comm.barrier()
    torch.cuda.synchronize()


@check("stream= as a torch stream and as an int")
def _():
    s = torch.cuda.Stream()
    x = full(4096, rank + 1)
    s.wait_stream(torch.cuda.current_stream())
    comm.allreduce(x, stream=s)
    comm.allreduce(x, stream=s.cuda_stream)
    s.synchronize()
    equal(x, full(4096, total * size), "two sums on a side stream")


class DLPackOnly:
    """A producer that offers only DLPack (as JAX or CuPy would)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None, max_version=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


class InterfaceOnly:
    """A producer that offers only __cuda_array_interface__ (as Numba does)."""

    def __init__(self, t):
        self.__cuda_array_interface__ = t.__cuda_array_interface__


@check("DLPack producer")
def _():
    t = full(777, rank + 1)
    info = cc.array_info(DLPackOnly(t))
    assert (info.source, info.ptr, info.count, info.device) == ("dlpack", t.data_ptr(), 777, dev), info
    torch.cuda.synchronize()
    comm.allreduce(DLPackOnly(t), stream=torch.cuda.current_stream())
    equal(t, full(777, total), "dlpack")


@check("__cuda_array_interface__ producer")
def _():
    t = full(555, rank + 1)
    info = cc.array_info(InterfaceOnly(t))
    assert (info.source, info.ptr, info.count, info.device) == (
        "cuda_array_interface", t.data_ptr(), 555, dev), info
    torch.cuda.synchronize()
    comm.allreduce(InterfaceOnly(t))  # torch names no stream: the legacy default stream
    equal(t, full(555, total), "interface")


@check("arrays cc cannot use are refused in words")
def _():
    refused(lambda: comm.allreduce(torch.ones(4)), "torch.Tensor on cpu", ".cuda()")
    refused(lambda: comm.allreduce(torch.ones(4, 6, device=device).t()), "not contiguous")
    refused(lambda: comm.allreduce(torch.ones(4, dtype=torch.bool, device=device)),
            "view a bool array as uint8")
    refused(lambda: comm.allreduce(torch.ones(4, device=device),
                                   torch.ones(4, dtype=torch.float16, device=device)),
            "out has dtype float16 but x has float32")
    refused(lambda: comm.allgather(torch.ones(4, device=device), torch.ones(4, device=device)),
            "allgather needs out of world size times x's elements")
    other = (dev + 1) % torch.cuda.device_count()
    if other != dev:
        refused(lambda: comm.allreduce(torch.ones(4, device=torch.device("cuda", other))),
                "is on cuda:%d but this communicator (rank %d) runs on cuda:%d" % (other, rank, dev))


@check("split into one communicator per rank, and a second full one")
def _():
    alone = comm.split(color=rank)
    whole = comm.split(color=0, key=size - rank)  # reversed order
    try:
        assert (alone.size, alone.rank) == (1, 0), alone
        assert (whole.size, whole.rank) == (size, size - 1 - rank), whole
        x = full(10, rank + 1)
        alone.allreduce(x)
        equal(x, full(10, rank + 1), "alone")
        whole.allreduce(x)
        comm.allreduce(x)
        equal(x, full(10, total * size), "two communicators")
    finally:
        alone.destroy()
        whole.destroy()
    assert comm.split(color=-1) is None


@check("CUDA graph: captured once, replayed with fresh inputs")
def _():
    small, large = torch.zeros(256, device=device), torch.zeros(1 << 18, device=device)
    gathered = torch.zeros(size * 1024, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture
        comm.allreduce(small)
        comm.allreduce(large)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # torch's capture stream is current: cc launches there
        comm.allreduce(small)
        comm.allreduce(large)
        comm.allgather(large[:1024], gathered)
    for i in range(20):
        small.fill_(rank + 1 + i)
        large.fill_(2 * (rank + 1) + i)
        graph.replay()
        want_small = sum(r + 1 + i for r in range(size))
        want_large = sum(2 * (r + 1) + i for r in range(size))
        equal(small, torch.full_like(small, want_small), "small after replay %d" % i)
        equal(large, torch.full_like(large, want_large), "large after replay %d" % i)
        equal(gathered, torch.full_like(gathered, want_large), "gathered after replay %d" % i)
    del graph


@check("recovery calls, where libcc has them")
def _():
    api = cc._library.api()
    if not api.has("cc_comm_generation") or not api.has("cc_comm_failed_ranks"):
        harness.say("rank %d: libcc lacks the recovery calls; calling one names it:" % rank)
        try:
            comm.generation
        except cc.MissingFunctionError as e:
            harness.say("    %s" % e)
            return
        raise AssertionError("no MissingFunctionError")
    assert comm.generation == 0, comm.generation
    assert comm.failed_ranks() == [], comm.failed_ranks()


@check("destroy, twice")
def _():
    comm.destroy()
    comm.destroy()


sys.exit(check.summary())
