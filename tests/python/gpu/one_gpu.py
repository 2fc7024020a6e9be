"""The seed guide's examples name each rank's GPU by its rank
(`tensor.to(rank)`, `torch.zeros(3, device=rank)`, `torch.cuda.set_device(rank)`,
`DDP(model, device_ids=[rank])`). Where ranks share one GPU (CC_SHARE_GPU=1,
each rank its own host to NCCL), that GPU is the only one there, and rank 1's
GPU does not exist. seed_entry.py then runs an example inside `onto(device)`:
every CUDA device the example names becomes that one GPU. The example's code
and everything it does through torch.distributed stay as they are.
"""

import contextlib

import torch
from torch.overrides import TorchFunctionMode

# Functions whose positional argument at this index may be a device (the
# others take devices only as device=).
_DEVICE_AT = {"to": 1, "cuda": 1, "_parse_to": 0}


def _mapped(device, target):
    if isinstance(device, bool):
        return device
    if isinstance(device, int):
        return target
    if isinstance(device, str) and device.split(":")[0] == "cuda":
        return "cuda:%d" % target
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("cuda", target)
    return device


class _OntoOneGpu(TorchFunctionMode):
    def __init__(self, target):
        super().__init__()
        self.target = target

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _mapped(kwargs["device"], self.target)
        at = _DEVICE_AT.get(getattr(func, "__name__", ""))
        if at is not None and len(args) > at:
            args = tuple(args[:at]) + (_mapped(args[at], self.target),) + tuple(args[at + 1:])
        return func(*args, **kwargs)


@contextlib.contextmanager
def onto(target):
    """Inside it, each CUDA device named by torch calls, torch.cuda.set_device
    and DistributedDataParallel's device_ids and output_device is device
    `target`."""
    parallel = torch.nn.parallel
    ddp, set_device = parallel.DistributedDataParallel, torch.cuda.set_device

    class OneGpuDDP(ddp):
        def __init__(self, module, device_ids=None, output_device=None, *args, **kwargs):
            if device_ids is not None:
                device_ids = [_mapped(d, target) for d in device_ids]
            if output_device is not None:
                output_device = _mapped(output_device, target)
            super().__init__(module, device_ids, output_device, *args, **kwargs)

    parallel.DistributedDataParallel = OneGpuDDP
    torch.cuda.set_device = lambda device: set_device(_mapped(device, target))
    try:
        with _OntoOneGpu(target):
            yield
    finally:
        parallel.DistributedDataParallel, torch.cuda.set_device = ddp, set_device
