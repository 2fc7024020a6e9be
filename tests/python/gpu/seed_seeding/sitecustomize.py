"""Fixes torch's random seed in every Python process of a run when
CC_SEED_TORCH is set, so the seed DDP script (which seeds nothing) draws the
same model and data under "cc" and under "nccl". On PYTHONPATH only for
those runs."""
import os

_seed = os.environ.get("CC_SEED_TORCH")
if _seed:
    import torch

    torch.manual_seed(int(_seed))
