"""Runs one seed script's example in this process, with the rank and world
size a launcher set (torchrun, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT/
LOCAL_RANK by hand as on two Docker hosts), instead of the script's own
mp.spawn main. The example itself runs unchanged; where ranks share one GPU
(CC_SHARE_GPU=1), every GPU it names by rank is that one (one_gpu.py).

    python seed_entry.py seed_allreduce|seed_broadcast|seed_ddp
"""
import contextlib
import importlib
import os
import sys

EXAMPLES = {"seed_allreduce": "all_reduce_example", "seed_broadcast": "broadcast_example",
            "seed_ddp": "train"}

if __name__ == "__main__":
    name = sys.argv[1]
    placement = contextlib.nullcontext()
    if os.environ.get("CC_SHARE_GPU") == "1":
        import one_gpu

        placement = one_gpu.onto(int(os.environ.get("CC_DEVICE", "0")))
    with placement:
        # Imported inside, so that `from torch.nn.parallel import
        # DistributedDataParallel` takes the one-GPU form.
        module = importlib.import_module(name)
        getattr(module, EXAMPLES[name])(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
