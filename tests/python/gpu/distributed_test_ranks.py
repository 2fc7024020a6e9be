"""torch's own DistributedTest (torch.testing._internal.distributed.distributed_test)
on one backend, as torch's test/distributed/test_distributed_spawn.py drives
it: each test spawns WORLD_SIZE ranks (MultiProcessTestCase), which
re-import this module. distributed_test.py starts this once per backend and
compares the two; see there.

The same patches for both backends, so that the tests see what they see on a
machine with a GPU per rank, while every rank runs on GPU 0:
  - BACKEND=nccl for torch's gating (which tests run, which paths they take);
    for backend "cc", init_process_group and new_group given "nccl" get "cc";
  - torch.cuda.device_count() (and torch.accelerator's) says at least
    WORLD_SIZE, so the tests' "one GPU per rank" skips do not fire; the
    properties, capability and name of a device past the real ones are GPU 0's;
  - init_multigpu_helper gives every rank GPU 0, and inside a rank every CUDA
    device a test names is GPU 0 (one_gpu.onto, as the seed examples use);
  - each rank is its own host to NCCL (NCCL_HOSTID), NCCL over sockets
    (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, set by distributed_test.py).

Environment: CC_DT_BACKEND (nccl or cc), CC_DT_TESTS (test names, comma
separated, run in that order), CC_DT_DISCOVER=1 (then this torch's other
CUDA collective, point-to-point and object tests follow, by name),
CC_DT_RESULTS (a JSON file, rewritten as each test starts and ends),
CC_DT_PER_TEST (seconds a test may take), CC_DT_DEADLINE (a time.time()
after which no test starts), WORLD_SIZE.
"""

import json
import os
import re
import socket
import sys
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

WANT = os.environ.get("CC_DT_BACKEND", "nccl")
WORLD_SIZE = int(os.environ.get("WORLD_SIZE", "2"))
os.environ["BACKEND"] = "nccl"  # what the tests gate on, for both backends
os.environ.setdefault("TEMP_DIR", "/tmp")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False  # as test_distributed_spawn.py

# ---------------------------------------------------------------- one GPU
# Before torch.testing is imported: some of its modules count GPUs at import.
_real_device_count = torch.cuda.device_count
# CUDA's lazy init checks the capability of every device the count names:
# it runs now, on the real count, not later on the one below (device 1 of a
# machine with one GPU is an internal assert in torch).
if _real_device_count() > 0:
    torch.cuda.init()


def _device_count():
    real = _real_device_count()
    return max(real, WORLD_SIZE) if real > 0 else real


torch.cuda.device_count = _device_count
if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "device_count"):
    torch.accelerator.device_count = _device_count


def _on_gpu0(fn):
    """fn(device, ...) with every device past the real count taken as GPU 0:
    what walks the patched count (torch.utils._triton asks every device's
    properties) then reads GPU 0's."""
    def call(device=None, *args, **kwargs):
        try:
            index = torch.cuda._utils._get_device_index(device, optional=True)
        except (RuntimeError, ValueError):
            index = None
        if index is not None and index >= _real_device_count():
            device = 0
        return fn(device, *args, **kwargs)
    call.__wrapped__ = fn
    return call


for _name in ("get_device_properties", "get_device_capability", "get_device_name"):
    setattr(torch.cuda, _name, _on_gpu0(getattr(torch.cuda, _name)))

import one_gpu  # noqa: E402

# ---------------------------------------------------------------- backend
if WANT == "cc":
    import cc.torch  # noqa: E402,F401  (registers the backend "cc")

    def _as_cc(backend):
        if isinstance(backend, str) and backend.lower() == "nccl":
            return "cc"
        return backend

    def _mapped(fn, position):
        def call(*args, **kwargs):
            if len(args) > position:
                args = args[:position] + (_as_cc(args[position]),) + args[position + 1:]
            if "backend" in kwargs:
                kwargs["backend"] = _as_cc(kwargs["backend"])
            return fn(*args, **kwargs)
        call.__wrapped__ = fn
        return call

    dist.init_process_group = _mapped(dist.init_process_group, 0)
    dist.new_group = _mapped(dist.new_group, 2)

# torch's test modules need numpy, and build their TestCase on expecttest,
# whose inline expectations none of the tests run here uses.
try:
    import numpy  # noqa: E402,F401
except ImportError:
    print("distributed test: torch's test modules need numpy; install it (pip install numpy)",
          flush=True)
    sys.exit(3)
try:
    import expecttest  # noqa: E402,F401
except ImportError:
    import types

    class _ExpectTestCase(unittest.TestCase):
        def assertExpectedInline(self, *args, **kwargs):
            raise unittest.SkipTest("expecttest is not installed")

        assertExpectedRaisesInline = assertExpectedInline

    _shim = types.ModuleType("expecttest")
    _shim.TestCase = _ExpectTestCase
    sys.modules["expecttest"] = _shim

# torch's test module reads BACKEND and WORLD_SIZE when imported.
from torch.testing._internal import common_distributed  # noqa: E402
from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)

PER_TEST = float(os.environ.get("CC_DT_PER_TEST", "45"))


def _timeout(_test_id=None):
    return PER_TEST


# The parent's wait for a test's ranks (MultiProcessTestCase._join_processes).
for _module in (common_distributed, distributed_test):
    if hasattr(_module, "get_timeout"):
        _module.get_timeout = _timeout


def _one_gpu_helper(world_size, backend=None):
    return {rank: [0] for rank in range(int(world_size))}


distributed_test.init_multigpu_helper = _one_gpu_helper
common_distributed.init_multigpu_helper = _one_gpu_helper


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    """test_distributed_spawn.py's class, with each rank placed on GPU 0."""

    def setUp(self):
        super().setUp()
        self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

    @classmethod
    def _run(cls, rank, test_name, file_name, pipe, *args, **kwargs):
        os.environ["NCCL_HOSTID"] = "%s-%s-rank%d" % (socket.gethostname(), WANT, rank)
        torch.cuda.set_device(0)
        with one_gpu.onto(0):
            super()._run(rank, test_name, file_name, pipe, *args, **kwargs)


# ---------------------------------------------------------------- driver
# This torch's tests of CUDA collectives, point to point and object
# collectives, beyond the named ones (names differ between torch releases).
_OPERATION = re.compile(r"^test_(.*_)?(all_?gather|gather|scatter|all_to_all|broadcast|"
                        r"all_?reduce|reduce|barrier|send_recv|isend_irecv|coalescing)")
_DEVICE = re.compile(r"cuda|nccl|object")
_LEFT_OUT = re.compile(r"ddp|profil|sparse|timeout|monitored|debug")


def discovered(available):
    return sorted(n for n in available
                  if _OPERATION.match(n) and _DEVICE.search(n) and not _LEFT_OUT.search(n))


def _last_lines(text, count=25):
    lines = text.rstrip().splitlines()
    return "\n".join(lines[-count:])


def run_one(name):
    """(status, seconds, why) of one test: PASS, FAIL or SKIP."""
    result = unittest.TestResult()
    start = time.time()
    try:
        unittest.TestSuite([TestDistBackendWithSpawn(name)]).run(result)
    except Exception:  # the harness itself failed
        return "FAIL", time.time() - start, _last_lines(traceback.format_exc())
    seconds = time.time() - start
    problems = result.errors + result.failures
    if problems:
        return "FAIL", seconds, _last_lines(problems[0][1])
    if result.skipped:
        return "SKIP", seconds, str(result.skipped[0][1]).strip().splitlines()[0][:200]
    if result.unexpectedSuccesses:
        return "FAIL", seconds, "unexpected success"
    if result.testsRun == 1:
        return "PASS", seconds, ""
    return "FAIL", seconds, "the test did not run"


def main():
    names = [n for n in os.environ.get("CC_DT_TESTS", "").split(",") if n]
    results_path = os.environ["CC_DT_RESULTS"]
    deadline = float(os.environ.get("CC_DT_DEADLINE", "0") or 0)
    available = {n for n in dir(TestDistBackendWithSpawn) if n.startswith("test_")}
    if os.environ.get("CC_DT_DISCOVER") == "1":
        names += [n for n in discovered(available) if n not in names]
    results = {}

    def save():
        tmp = results_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"backend": WANT, "world_size": WORLD_SIZE, "torch": torch.__version__,
                       "tests": names, "results": results}, f, indent=1)
        os.replace(tmp, results_path)

    save()
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-"
    print("[%s] torch %s, NCCL %s (torch's), %d ranks on GPU 0, %d tests"
          % (WANT, torch.__version__, nccl, WORLD_SIZE, len(names)), flush=True)
    for name in names:
        if name not in available:
            results[name] = {"status": "ABSENT", "seconds": 0.0,
                             "why": "not a test of this torch's DistributedTest"}
        elif deadline and time.time() + min(PER_TEST, 20.0) > deadline:
            results[name] = {"status": "NOT RUN", "seconds": 0.0, "why": "out of time"}
        else:
            # Left as it is when this process is stopped while the test runs.
            results[name] = {"status": "RUNNING", "seconds": 0.0, "why": ""}
            save()
            status, seconds, why = run_one(name)
            results[name] = {"status": status, "seconds": round(seconds, 1), "why": why}
            print("[%s] %s %s (%.1f s)%s" % (WANT, status, name, seconds,
                                             ": " + why.splitlines()[-1] if why else ""),
                  flush=True)
            if status == "FAIL":
                print("[%s] %s:\n%s" % (WANT, name, why), flush=True)
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
