"""torch.distributed all-reduce and a small DDP step through one backend,
under torchrun, between init_process_group and destroy_process_group, which
are timed too; rank 0 prints one JSON object per line, and every rank one
for its destroy_process_group.

    python -m torch.distributed.run --nproc-per-node 2 bench_torch.py cc|nccl
    BENCH_TORCH_LIFECYCLE_ONLY=1 ...    # only init, a first all_reduce, destroy

init: init_process_group's wall time, then a first all_reduce of one element
until the GPU is done (where both backends create their communicator), the
largest over ranks; destroy: destroy_process_group's wall time on each rank.

all_reduce: float32, 8 B to 512 MiB, in place, async_op=False as scripts
call it; the mean wall time per call over a timed loop (the host's cost and
the GPU's, as a training script sees them), the largest over ranks; busbw
as nccl-tests (2(n-1)/n x size / time). DDP: a 4-layer 1024-wide MLP,
batch 64, SGD; the mean wall time per step.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

import harness

backend = sys.argv[1]
if backend == "cc":
    import cc.torch  # noqa: F401
lifecycle_only = os.environ.get("BENCH_TORCH_LIFECYCLE_ONLY") == "1"
rank, size, local, device = harness.torchrun_rank()
start = time.perf_counter()
dist.init_process_group(backend)
init_s = time.perf_counter() - start
start = time.perf_counter()
first = torch.ones(1, device=device)
dist.all_reduce(first)
torch.cuda.synchronize()
first_s = time.perf_counter() - start


def slowest(seconds):
    t = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def timed(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return slowest((time.perf_counter() - start) / iters)


def emit(record):
    if rank == 0:
        print(json.dumps(record), flush=True)


def destroy_timed():  # every rank prints its own: no collective can follow it
    dist.barrier()
    start = time.perf_counter()
    dist.destroy_process_group()
    print(json.dumps({"kind": "destroy", "backend": backend, "rank": rank,
                      "destroy_process_group_s": time.perf_counter() - start}), flush=True)


emit({"kind": "init", "backend": backend, "ranks": size, "init_process_group_s": slowest(init_s),
      "first_all_reduce_s": slowest(first_s)})

for shift in range(3, 30) if not lifecycle_only else ():  # 8 B .. 512 MiB
    nbytes = 1 << shift
    x = torch.ones(nbytes // 4, device=device)
    iters = 1000 if nbytes <= (64 << 10) else max(20, min(500, (1 << 31) // nbytes))
    seconds = timed(lambda x=x: dist.all_reduce(x), iters, max(10, iters // 10))
    emit({"kind": "allreduce", "backend": backend, "bytes": nbytes, "us": seconds * 1e6,
          "busbw_gbs": 2 * (size - 1) / size * nbytes / seconds / 1e9, "iters": iters})
    del x

if lifecycle_only:
    destroy_timed()
    sys.exit(0)

torch.manual_seed(0)
layers = []
for _ in range(4):
    layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers).to(device),
                                                  device_ids=[local])
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
inputs = torch.randn(64, 1024, device=device)
targets = torch.randn(64, 1024, device=device)


def step():
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()


seconds = timed(step, 200, 20)
params = sum(p.numel() for p in model.parameters())
emit({"kind": "ddp_step", "backend": backend, "us": seconds * 1e6, "params": params,
      "batch": 64})
destroy_timed()
