"""torch.distributed's own clients on a backend named on the command line,
under torchrun (2 ranks in the suite), printing each step's loss to compare
"cc" with "nccl":

    python -m torch.distributed.run --nproc-per-node 2 real_clients.py cc fsdp2
    python real_clients.py --compare nccl.log cc.log     # the losses must match

Cases (fixed seeds; the same on both backends):
  fsdp2     a 3-layer MLP under FSDP2 (fully_shard per layer and at the root)
            over a 1-D DeviceMesh of every rank, Adam, 5 steps; each rank its
            own inputs (all-gathers of parameters, reduce-scatters of
            gradients with AVG);
  tp        a tensor-parallel MLP (parallelize_module: ColwiseParallel then
            RowwiseParallel) over the same mesh, SGD, 5 steps, the same input
            on every rank (DTensor's all-reduces, through functional
            collectives);
  compiled  torch._functional_collectives.all_reduce inside a function
            compiled by torch.compile (inductor), 5 steps of a small
            regression whose gradient is all-reduced in the compiled code.

Each prints "rank R [BACKEND] CASE step S loss L" (L as repr, every digit).
With 2 ranks the losses are expected bitwise equal: every reduction is a
sum (or average) of two values, which is the same whichever order or
algorithm adds them, and both backends run the same kernels otherwise.
--compare allows 1e-6 relative all the same and says whether they were
bitwise equal.
"""

import re
import sys

STEPS = 5


def line(rank, backend, case, step, loss):
    print("rank %d [%s] %s step %d loss %r" % (rank, backend, case, step, loss), flush=True)


def train_step(torch, model, opt, gen, device, x_shape, target_shape):
    """One optimizer step on a random batch drawn from gen; its loss."""
    x = torch.randn(*x_shape, device=device, generator=gen)
    target = torch.randn(*target_shape, device=device, generator=gen)
    loss = torch.nn.functional.mse_loss(model(x), target)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def fsdp2(torch, dist, rank, size, device, backend):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cuda", (size,))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 16)).to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator(device=device).manual_seed(100 + rank)
    for step in range(STEPS):
        loss = train_step(torch, model, opt, gen, device, (32, 64), (32, 16))
        # The mean over ranks: every rank's loss enters the comparison.
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        line(rank, backend, "fsdp2", step, mean.item())


def tp(torch, dist, rank, size, device, backend):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    mesh = init_device_mesh("cuda", (size,))

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(32, 128)
            self.down = torch.nn.Linear(128, 32)

        def forward(self, x):
            return self.down(torch.relu(self.up(x)))

    torch.manual_seed(0)
    model = MLP().to(device)
    model = parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator(device=device).manual_seed(7)  # the same input on every rank
    for step in range(STEPS):
        loss = train_step(torch, model, opt, gen, device, (16, 32), (16, 32))
        line(rank, backend, "tp", step, loss.item())


def compiled(torch, dist, rank, size, device, backend):
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD

    def gradient(w, x, y):
        # Least squares on this rank's batch; the gradient averaged over ranks
        # by a functional all_reduce inside the compiled code.
        err = x @ w - y
        g = x.t() @ err / x.shape[0]
        g = funcol.all_reduce(g, "sum", group) / size
        loss = funcol.all_reduce((err * err).mean(), "sum", group) / size
        return g, loss

    step_fn = torch.compile(gradient, fullgraph=True)
    torch.manual_seed(0)
    w = torch.zeros(16, 1, device=device)
    truth = torch.randn(16, 1, device=device)
    gen = torch.Generator(device=device).manual_seed(200 + rank)
    for step in range(STEPS):
        x = torch.randn(64, 16, device=device, generator=gen)
        y = x @ truth
        g, loss = step_fn(w, x, y)
        w = w - 0.1 * g
        line(rank, backend, "compiled", step, loss.item())


CASES = {"fsdp2": fsdp2, "tp": tp, "compiled": compiled}


def run(backend, case):
    import time

    import torch
    import torch.distributed as dist

    import cc.torch  # noqa: F401 (registers the backend)
    import harness

    rank, size, _, device = harness.torchrun_rank()
    dist.init_process_group(backend)
    start = time.time()
    CASES[case](torch, dist, rank, size, device, backend)
    print("rank %d [%s] %s took %.1f s" % (rank, backend, case, time.time() - start), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def losses(path):
    pattern = re.compile(r"^rank (\d+) \[[^\]]+\] (\w+) step (\d+) loss (\S+)$", re.M)
    return {(int(r), c, int(s)): float(v) for r, c, s, v in pattern.findall(open(path).read())}


def compare(reference, candidate):
    ref, got = losses(reference), losses(candidate)
    if not ref or set(ref) != set(got):
        print("FAIL: the logs hold different steps: %s has %d, %s has %d"
              % (reference, len(ref), candidate, len(got)))
        return 1
    bad = [(k, ref[k], got[k]) for k in sorted(ref)
           if abs(got[k] - ref[k]) > 1e-6 * max(1.0, abs(ref[k]))]
    same = all(ref[k] == got[k] for k in ref)
    for k in sorted(ref):
        print("rank %d %s step %d: %r (reference) %r%s" % (k + (ref[k], got[k], "" if ref[k] == got[k] else " differs")))
    if bad:
        print("FAIL: %d losses differ by more than 1e-6 relative" % len(bad))
        return 1
    print("losses equal: %s" % ("bitwise" if same else "within 1e-6 relative, not bitwise"))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"] and len(sys.argv) == 4:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        sys.exit("usage: real_clients.py BACKEND {%s} | --compare REFERENCE_LOG LOG"
                 % ",".join(CASES))
    sys.exit(run(sys.argv[1], sys.argv[2]))
