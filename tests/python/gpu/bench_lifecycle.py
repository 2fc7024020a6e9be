"""One rank of torch.distributed's life cycle, timed: `import cc.torch` (for
"cc"), then ROUNDS rounds of init_process_group, one all-reduce and
destroy_process_group, each round on a fresh TCP store. Prints one JSON
object per round (seconds, this rank's own clock).

    RANK=r WORLD_SIZE=n LOCAL_RANK=l bench_lifecycle.py cc|nccl BASE_PORT ROUNDS

scripts/torch-lifecycle.sh starts the ranks and sums them up.
"""

import json
import os
import sys
import time

start = time.perf_counter()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

torch_import_s = time.perf_counter() - start
backend, base_port, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cc_import_s = 0.0
if backend == "cc":
    start = time.perf_counter()
    import cc.torch  # noqa: F401,E402
    cc_import_s = time.perf_counter() - start

rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
torch.cuda.set_device(device)
torch.cuda.init()

for r in range(rounds):
    t0 = time.perf_counter()
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % (base_port + r),
                            rank=rank, world_size=size)
    t1 = time.perf_counter()
    x = torch.ones(1024, device=device)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    ok = x[0].item() == size
    t2 = time.perf_counter()
    dist.destroy_process_group()
    t3 = time.perf_counter()
    print(json.dumps({"backend": backend, "rank": rank, "round": r, "ok": ok,
                      "torch_import_s": torch_import_s, "cc_torch_import_s": cc_import_s,
                      "init_s": t1 - t0, "first_allreduce_s": t2 - t1, "destroy_s": t3 - t2}),
          flush=True)
