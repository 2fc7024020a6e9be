"""Runs one seed script's example in this process, with the rank and world
size a launcher set (torchrun, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT/
LOCAL_RANK by hand as on two Docker hosts), instead of the script's own
mp.spawn main. The example itself runs unchanged.

    python seed_entry.py seed_allreduce|seed_broadcast|seed_ddp
"""
import importlib
import os
import sys

EXAMPLES = {"seed_allreduce": "all_reduce_example", "seed_broadcast": "broadcast_example",
            "seed_ddp": "train"}

if __name__ == "__main__":
    name = sys.argv[1]
    module = importlib.import_module(name)
    getattr(module, EXAMPLES[name])(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
