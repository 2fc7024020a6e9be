"""torch.distributed's operations through the "cc" backend, under torchrun:

    python -m torch.distributed.run --nproc-per-node 2 torch_backend_ops.py cc
    python -m torch.distributed.run --nproc-per-node 2 torch_backend_ops.py cpu:gloo,cuda:cc

Every operation DDP and FSDP use, and gather, scatter, the list all_to_all,
all_gather/reduce_scatter with sizes differing by rank and the object
collectives, with values checked; async work and its
future; stream semantics (the result is there for the caller's stream after
wait(), with no host synchronisation in between); coalesced and batched
operations; a subgroup; errors carrying cc's message; the final barrier and
destroy_process_group. Prints PASS/FAIL as each check ends; exit status 1
when any failed.
"""

import functools
import sys

import torch
import torch.distributed as dist

import cc.torch  # noqa: F401 (registers the backend)
import harness
from harness import equal

backend = sys.argv[1]
rank, size, local, device = harness.torchrun_rank()
dist.init_process_group(backend)
total = size * (size + 1) // 2
check = harness.Checks("rank %d" % rank)
full = functools.partial(harness.full, device=device)


@check("backend is cc for CUDA")
def _():
    name = dist.get_backend()
    assert "cc" in name, name
    be = dist.group.WORLD._get_backend(device)
    assert be.name() == "cc", be.name()


@check("all_reduce every op")
def _():
    for op, want in ((dist.ReduceOp.SUM, total), (dist.ReduceOp.MAX, size),
                     (dist.ReduceOp.MIN, 1), (dist.ReduceOp.AVG, total / size),
                     (dist.ReduceOp.PRODUCT, float(torch.arange(1, size + 1).prod()))):
        x = full(1000, rank + 1)
        dist.all_reduce(x, op=op)
        equal(x, full(1000, want), str(op))


@check("all_reduce dtypes, bool and complex")
def _():
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64,
                  torch.int8, torch.uint8):
        x = full(333, rank + 1, dtype)
        dist.all_reduce(x)
        equal(x, full(333, total, dtype), str(dtype))
    flags = torch.tensor([rank == 0, False], device=device)
    dist.all_reduce(flags)  # SUM of bool is or
    equal(flags, torch.tensor([True, False], device=device), "bool or")
    z = torch.full((7,), complex(rank + 1, -(rank + 1)), dtype=torch.complex64, device=device)
    dist.all_reduce(z)
    equal(z, torch.full((7,), complex(total, -total), dtype=torch.complex64, device=device),
          "complex")


@check("all_reduce on a dense non-contiguous (transposed) tensor")
def _():
    x = torch.full((6, 4), rank + 1.0, device=device).t()
    dist.all_reduce(x)
    equal(x, torch.full((4, 6), float(total), device=device), "transposed")


@check("async all_reduce: wait() orders the caller's stream, no host wait")
def _():
    x = full(1 << 22, rank + 1)
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    y = x * 2  # queued after the wait on the current stream
    equal(y, full(1 << 22, 2 * total), "after wait")
    assert work.is_completed()


@check("async all_reduce future (as DDP's comm hook uses it)")
def _():
    x = full(4096, rank + 1)
    fut = dist.all_reduce(x, async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    equal(doubled.wait(), full(4096, 2 * total), "future then")


@check("broadcast from every root")
def _():
    for root in range(size):
        x = full(100, 10 * rank + 1)
        dist.broadcast(x, src=root)
        equal(x, full(100, 10 * root + 1), "root %d" % root)


@check("reduce")
def _():
    x = full(50, rank + 1)
    dist.reduce(x, dst=size - 1)
    if rank == size - 1:
        equal(x, full(50, total), "reduce")


@check("all_gather (list) and all_gather_into_tensor")
def _():
    outs = [torch.zeros(64, device=device) for _ in range(size)]
    dist.all_gather(outs, full(64, rank + 1))
    for r in range(size):
        equal(outs[r], full(64, r + 1), "all_gather %d" % r)
    out = torch.zeros(size * 64, device=device)
    dist.all_gather_into_tensor(out, full(64, rank + 1))
    equal(out, torch.cat([full(64, r + 1) for r in range(size)]), "into tensor")


@check("reduce_scatter (list) and reduce_scatter_tensor")
def _():
    out = torch.zeros(32, device=device)
    dist.reduce_scatter(out, [full(32, rank + j) for j in range(size)])
    equal(out, full(32, sum(r + rank for r in range(size))), "reduce_scatter")
    inp = torch.cat([full(32, rank + j) for j in range(size)])
    out2 = torch.zeros(32, device=device)
    dist.reduce_scatter_tensor(out2, inp)
    equal(out2, full(32, sum(r + rank for r in range(size))), "reduce_scatter_tensor")


@check("all_to_all_single, even and uneven splits")
def _():
    x = torch.cat([full(16, rank * 100 + j) for j in range(size)])
    out = torch.zeros_like(x)
    dist.all_to_all_single(out, x)
    equal(out, torch.cat([full(16, j * 100 + rank) for j in range(size)]), "even")
    # rank r sends j+1 rows to rank j; receives r+1 rows from every rank
    send = [j + 1 for j in range(size)]
    recv = [rank + 1] * size
    x = torch.cat([torch.full((j + 1, 3), float(rank * 10 + j), device=device)
                   for j in range(size)])
    out = torch.zeros(sum(recv), 3, device=device)
    dist.all_to_all_single(out, x, output_split_sizes=recv, input_split_sizes=send)
    equal(out, torch.cat([torch.full((rank + 1, 3), float(j * 10 + rank), device=device)
                          for j in range(size)]), "uneven")


@check("gather and scatter, every rank the root in turn")
def _():
    for root in range(size):
        x = full(24, rank * 10 + root)
        gathered = [torch.zeros(24, device=device) for _ in range(size)] if rank == root else None
        dist.gather(x, gather_list=gathered, dst=root)
        if rank == root:
            for r in range(size):
                equal(gathered[r], full(24, r * 10 + root), "gather to %d from %d" % (root, r))
        out = torch.zeros(24, device=device)
        pieces = [full(24, root * 10 + r) for r in range(size)] if rank == root else None
        dist.scatter(out, scatter_list=pieces, src=root)
        equal(out, full(24, root * 10 + rank), "scatter from %d" % root)
    # complex tensors travel as their real pairs
    z = torch.full((5,), complex(rank, -rank), dtype=torch.complex64, device=device)
    zs = [torch.zeros_like(z) for _ in range(size)] if rank == 0 else None
    dist.gather(z, gather_list=zs, dst=0)
    if rank == 0:
        for r in range(size):
            equal(zs[r], torch.full((5,), complex(r, -r), dtype=torch.complex64, device=device),
                  "complex gather from %d" % r)


@check("all_to_all (list), a size per pair")
def _():
    # rank r sends r + j + 1 elements to rank j
    ins = [full(rank + j + 1, rank * 100 + j) for j in range(size)]
    outs = [torch.zeros(rank + j + 1, device=device) for j in range(size)]
    dist.all_to_all(outs, ins)
    for j in range(size):
        equal(outs[j], full(rank + j + 1, j * 100 + rank), "all_to_all from %d" % j)


@check("all_gather and reduce_scatter with sizes differing by rank (all_gather_v, reduce_scatter_v)")
def _():
    sizes = [r + 2 for r in range(size)]
    flat = torch.zeros(sum(sizes), device=device)
    dist.all_gather(list(torch.split(flat, sizes)), full(rank + 2, rank + 1))
    equal(flat, torch.cat([full(r + 2, r + 1) for r in range(size)]), "all_gather_v")
    out = torch.zeros(rank + 2, device=device)
    dist.reduce_scatter(out, [full(j + 2, rank + j) for j in range(size)])
    equal(out, full(rank + 2, sum(r + rank for r in range(size))), "reduce_scatter_v")


@check("gather_object and scatter_object_list")
def _():
    got = [None] * size if rank == 0 else None
    dist.gather_object({"rank": rank, "s": "x" * rank}, got, dst=0)
    if rank == 0:
        assert got == [{"rank": r, "s": "x" * r} for r in range(size)], got
    out = [None]
    dist.scatter_object_list(out, [("to", r) for r in range(size)] if rank == 0 else None, src=0)
    assert out[0] == ("to", rank), out


@check("barrier")
def _():
    dist.barrier()


@check("send/recv and batch_isend_irecv ring")
def _():
    if rank == 0:
        dist.send(full(10, 42.0), dst=1)
    elif rank == 1:
        got = torch.zeros(10, device=device)
        dist.recv(got, src=0)
        equal(got, full(10, 42.0), "recv")
    send, got = full(1000, rank), torch.zeros(1000, device=device)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % size),
           dist.P2POp(dist.irecv, got, (rank - 1) % size)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    equal(got, full(1000, (rank - 1) % size), "ring")


@check("coalesced all_reduce and all_gather_into_tensor (torch's coalescing manager)")
def _():
    from torch.distributed.distributed_c10d import _coalescing_manager
    xs = [full(n, rank + 1) for n in (3, 300, 30000)]
    with _coalescing_manager(device=device):
        for x in xs:
            dist.all_reduce(x)
    for x in xs:
        equal(x, full(x.numel(), total), "coalesced all_reduce %d" % x.numel())
    outs = [torch.zeros(size * n, device=device) for n in (5, 500)]
    with _coalescing_manager(device=device):
        for out in outs:
            dist.all_gather_into_tensor(out, full(out.numel() // size, rank + 1))
    for out in outs:
        n = out.numel() // size
        equal(out, torch.cat([full(n, r + 1) for r in range(size)]), "coalesced gather %d" % n)


@check("subgroup of every rank, reversed")
def _():
    group = dist.new_group(list(reversed(range(size))))
    x = full(20, rank + 1)
    dist.all_reduce(x, group=group)
    equal(x, full(20, total), "subgroup")
    dist.destroy_process_group(group)


@check("CPU tensors follow the backend string")
def _():
    x = torch.full((4,), float(rank + 1))
    if backend.startswith("cpu:gloo"):
        dist.all_reduce(x)
        assert torch.equal(x, torch.full((4,), float(total))), x
    else:
        try:
            dist.all_reduce(x)
        except Exception as e:
            harness.say("rank %d: a CPU tensor on a cc-only group: %s"
                        % (rank, str(e).splitlines()[0]))
            return
        raise AssertionError("a CPU tensor went through a cc-only group")


@check("errors carry cc's words: a non-contiguous all_gather_into_tensor input")
def _():
    try:
        out = torch.zeros(size * 4, 2, device=device)
        dist.all_gather_into_tensor(out, torch.ones(2, 8, device=device)[:, ::2].t())
    except Exception as e:
        assert "cc backend (rank %d)" % rank in str(e) and "not contiguous" in str(e), str(e)
    else:
        raise AssertionError("a non-contiguous input was accepted")


@check("errors carry cc's words: an all_gather_into_tensor output of the wrong size")
def _():
    try:
        dist.all_gather_into_tensor(torch.zeros(3, device=device), full(8, 1.0))
    except Exception as e:
        assert "cc backend (rank %d)" % rank in str(e) and "needs world size (%d)" % size in str(e), \
            str(e)
    else:
        raise AssertionError("an output of the wrong size was accepted")


@check("errors carry cc's words: an all_gather slot of this rank's unlike its input")
def _():
    # Every rank's own slot is wrong, so every rank refuses before queuing.
    outs = [torch.zeros(9 if r == rank else 8, device=device) for r in range(size)]
    try:
        dist.all_gather(outs, full(8, 1.0))
    except Exception as e:
        assert "cc backend (rank %d)" % rank in str(e), str(e)
        assert "output %d (this rank's) has 9 elements" % rank in str(e), str(e)
    else:
        raise AssertionError("a slot unlike the input was accepted")


@check("errors carry cc's words: a tensor on another GPU than the group's")
def _():
    other = (local + 1) % torch.cuda.device_count()
    if other == local:
        harness.say("rank %d: one GPU only; not tried" % rank)
        return
    try:
        dist.all_reduce(torch.ones(4, device=torch.device("cuda", other)))
    except Exception as e:
        assert "runs on cuda:%d" % local in str(e), str(e)
    else:
        raise AssertionError("a tensor on another device was accepted")


@check("the group still works after those errors")
def _():
    x = full(8, rank + 1)
    dist.all_reduce(x)
    equal(x, full(8, total), "after errors")


@check("barrier, then destroy_process_group")
def _():
    dist.barrier()
    dist.destroy_process_group()


sys.exit(check.summary(" [%s]" % backend))
