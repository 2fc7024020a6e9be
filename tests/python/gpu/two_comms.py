"""Two communicators with rendezvous of their own in each process, on one GPU
(what a torch subgroup is under the "cc" backend), run under cc-run -n 2:
the second is made through a server rank 0 hosts, used, destroyed, and its
server stopped, while the first goes on; then the first still gives the right
sums and is destroyed. Prints PASS/FAIL as each check ends; exit status 1
when any failed.
"""

import functools
import sys

import torch

import cc
import harness
from harness import equal

first, rank, size, dev, device = harness.cc_rank()
total = size * (size + 1) // 2  # sum over ranks of (rank + 1)
check = harness.Checks("rank %d" % rank)
full = functools.partial(harness.full, device=device)
state = {}


def sums(comm, what):
    for n in (8, 1 << 20):  # cc's small all-reduce kernel, then NCCL's
        x = full(n, rank + 1)
        comm.allreduce(x)
        equal(x, full(n, total), "%s, %d elements" % (what, n))


@check("rank 0 hosts a second rendezvous server; every rank learns its port")
def _():
    server = cc.Server("127.0.0.1", 0) if rank == 0 else None
    port = torch.tensor([server.port if server else 0], dtype=torch.int32, device=device)
    first.allreduce(port)
    torch.cuda.synchronize()
    state["server"], state["port"] = server, int(port.item())


@check("a second communicator through it, on the same GPU")
def _():
    state["second"] = cc.Comm(rank, size, "127.0.0.1", state["port"], rendezvous="external",
                              job_id="second", device=dev)
    sums(state["second"], "second")


@check("the second destroyed, then its server stopped")
def _():
    state.pop("second").destroy()
    server = state.pop("server")
    if server is not None:
        server.stop()


@check("the first still works")
def _():
    sums(first, "first")
    first.barrier()
    torch.cuda.synchronize()


@check("the first destroyed")
def _():
    first.destroy()


sys.exit(check.summary())
