"""torch.distributed all-reduce and a small DDP step through one backend,
under torchrun; rank 0 prints one JSON object per line.

    python -m torch.distributed.run --nproc-per-node 2 bench_torch.py cc|nccl

all_reduce: float32, 8 B to 512 MiB, in place, async_op=False as scripts
call it; the mean wall time per call over a timed loop (the host's cost and
the GPU's, as a training script sees them), the largest over ranks; busbw
as nccl-tests (2(n-1)/n x size / time). DDP: a 4-layer 1024-wide MLP,
batch 64, SGD; the mean wall time per step.
"""

import json
import sys
import time

import torch
import torch.distributed as dist

import harness

backend = sys.argv[1]
if backend == "cc":
    import cc.torch  # noqa: F401
rank, size, local, device = harness.torchrun_rank()
dist.init_process_group(backend)


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


for shift in range(3, 30):  # 8 B .. 512 MiB
    nbytes = 1 << shift
    x = torch.ones(nbytes // 4, device=device)
    iters = 1000 if nbytes <= (64 << 10) else max(20, min(500, (1 << 31) // nbytes))
    seconds = timed(lambda x=x: dist.all_reduce(x), iters, max(10, iters // 10))
    emit({"kind": "allreduce", "backend": backend, "bytes": nbytes, "us": seconds * 1e6,
          "busbw_gbs": 2 * (size - 1) / size * nbytes / seconds / 1e9, "iters": iters})
    del x

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
dist.destroy_process_group()
