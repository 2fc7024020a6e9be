"""What the gpu suite's Python scripts share: checks that print PASS or FAIL
the moment each one ends (flushed, so that when a process dies the last line
says how far it got), a crash handler that prints every thread's Python
stack, exact tensor comparison, and a rank's set-up (under cc-run or
torchrun).

The scripts import it by name: it sits beside them, and Python puts a
script's own folder first on sys.path.
"""

import faulthandler
import os
import traceback

import torch

# A fatal signal (SIGSEGV, SIGABRT, ...) prints each thread's Python stack to
# stderr before the process dies: which check, which call.
faulthandler.enable(all_threads=True)


def say(text):
    print(text, flush=True)


class Checks:
    """@checks("name") runs the function below it at once and prints
    "<prefix> PASS name" or "<prefix> FAIL name" and the traceback.
    summary() prints the count and returns the exit status (1 if any
    failed)."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.passed = 0
        self.failed = 0

    def __call__(self, name):
        def run(fn):
            try:
                fn()
            except Exception:
                self.failed += 1
                say("%s FAIL %s\n%s" % (self.prefix, name, traceback.format_exc()))
            else:
                self.passed += 1
                say("%s PASS %s" % (self.prefix, name))
            return fn
        return run

    def summary(self, label=""):
        say("%s%s: %d passed, %d failed" % (self.prefix, label, self.passed, self.failed))
        return 1 if self.failed else 0


def full(n, value, dtype=torch.float32, device=None):
    """n copies of value as dtype (made in float32 first, as every dtype can be cast from it)."""
    return torch.full((n,), value, dtype=torch.float32, device=device).to(dtype)


def equal(actual, expected, what):
    """Raises AssertionError unless the two tensors hold the same values, once
    the GPU is done (dtypes torch cannot compare on the CPU, as float8, are
    compared as float32)."""
    torch.cuda.synchronize()
    a, b = actual.cpu(), expected.cpu()
    try:
        same = torch.equal(a, b) if a.dtype == b.dtype else torch.equal(a.float(), b.float())
    except (RuntimeError, NotImplementedError):
        same = torch.equal(a.float(), b.float())
    if not same:
        raise AssertionError("%s: got %s, want %s" % (what, actual.flatten()[:8].tolist(),
                                                      expected.flatten()[:8].tolist()))


def cc_rank():
    """(communicator from the launcher's environment, rank, world size, device
    ordinal, torch device), with the device made current."""
    import cc

    comm = cc.Comm.from_env()
    torch.cuda.set_device(comm.device)
    return comm, comm.rank, comm.size, comm.device, torch.device("cuda", comm.device)


def torchrun_rank():
    """(rank, world size, local rank, device) from torchrun's variables, with
    the device made current."""
    rank = int(os.environ["RANK"])
    size = int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    return rank, size, local, torch.device("cuda", local)
