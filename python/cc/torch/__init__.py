"""`import cc.torch` registers torch.distributed's backend "cc" for CUDA.

    import cc.torch
    dist.init_process_group("cc")                   # CUDA tensors through cc
    dist.init_process_group("cpu:gloo,cuda:cc")     # CPU tensors through gloo

The backend is a C++ extension (c10d::Backend) built against the installed
torch: at `pip install` when torch was importable then, else here on first
import (torch.utils.cpp_extension, cached). It calls the libcc that
`import cc` loaded.

Rendezvous: torch's store holds MASTER_PORT, so rank 0 of each process group
hosts cc's rendezvous on a free port and publishes it through torch's store
(CC_MASTER_PORT, when set apart from MASTER_PORT, pins the default group's
port; see cc/_torch_rendezvous.py). A group's communicator is created by its
first operation, on that operation's device, so `torch.cuda.set_device` may come
after `init_process_group`, as in most scripts; that first operation must be
one every rank of the group makes (a collective, not a lone send).

The group's timeout (init_process_group(timeout=...)) becomes cc's
deadline unless CC_TIMEOUT_MS is set. A rank that dies is detected by cc
within its heartbeat window (CC_HEARTBEAT_MS x CC_HEARTBEAT_MISSES); the next
operation, or a blocking wait, raises torch.distributed.DistBackendError
with cc's message.

CC_TORCH_TIMING=1 prints, on stderr, how long each group's rendezvous
agreement took at init_process_group/new_group, and at the group's first
operation how long after that it came and how long cc_comm_init took.
"""

import os
import sys
import time

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    raise ImportError("cc.torch needs PyTorch with torch.distributed (%s); install torch, or "
                      "use cc.Comm without it" % e) from e

from .. import _library, _torch_build, _torch_rendezvous
from .._store import Server

_api = _library.api()

try:
    from . import _C  # built by pip install
except ImportError:
    _C = _torch_build.jit_load(_api.path)

_C.load_library(_api.path)

BACKEND_NAME = "cc"


def _timeout_ms(timeout):
    if os.environ.get("CC_TIMEOUT_MS"):
        return -1  # cc reads it itself
    if timeout is None:
        return -1
    ms = int(timeout.total_seconds() * 1000)
    return max(1, min(ms, 2 ** 31 - 1))


def _start_server(bind_addr, port):
    server = Server(bind_addr, port)
    return server, server.port


def _create_backend(options, _backend_options=None):
    """torch.distributed's creator (extended API): one Backend per group."""
    rank, size = options.group_rank, options.group_size
    global_ranks = list(options.global_ranks_in_group or [])
    started = time.monotonic()
    addr, port, server = _torch_rendezvous.agree(options.store, rank, global_ranks, os.environ,
                                           _start_server)
    if os.environ.get("CC_TORCH_TIMING") == "1":
        sys.stderr.write("cc.torch timing: rank %d of %d (group %s): cc's rendezvous at %s:%d "
                         "agreed through torch's store in %.1f ms%s\n"
                         % (rank, size, options.group_id or "default", addr, port,
                            (time.monotonic() - started) * 1000.0,
                            " (its server started here)" if server is not None else ""))
    handle = server.detach() if server is not None else 0
    job_id = "torch-%s" % (options.group_id or "default")
    try:
        return _C.create_backend(rank, size, addr, port, job_id, _timeout_ms(options.timeout),
                                 handle)
    except BaseException:
        if handle:
            _api.cc_server_stop(handle)
        raise


def comm_handle(group=None):
    """The cc_comm_t (an int) behind a process group that uses cc for CUDA,
    0 before its first operation: for mixing torch.distributed with cc.Comm
    calls through C code."""
    pg = group if group is not None else dist.group.WORLD
    return _C.comm_handle(pg._get_backend(torch.device("cuda")))


if BACKEND_NAME not in dist.Backend.backend_list:
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True,
                                  devices=["cuda"])
