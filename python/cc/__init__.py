"""cc: collective communication for NVIDIA GPUs, from Python.

ctypes over libcc's C API (include/cc/cc.h); nothing to compile. The module
holds no communicator: create as many cc.Comm objects as needed, in any
threads. libcc is found on first use (CC_LIBRARY, then this package's install
prefix, then the loader path); cc.library_path() says which file was loaded.

    import cc, torch
    with cc.Comm.from_env() as comm:
        x = torch.ones(1024, device=f"cuda:{comm.device}")
        comm.allreduce(x)                      # in place, on torch's current stream

`import cc.torch` registers the torch.distributed backend "cc".
"""

from ._errors import (AbortedError, AuthError, BufferTooSmallError, CudaError, Error,
                      InternalError, InvalidArgumentError, InvalidUsageError,
                      LibraryNotFoundError, MismatchError, MissingFunctionError, NcclError,
                      NoDeviceError, PeerFailedError, RendezvousError, SystemCallError,
                      TimeoutError)
from ._comm import AVG, MAX, MIN, PROD, SUM, Comm, group
from ._store import Server, Store
from . import _arrays, _library

__version__ = "0.1.0"

__all__ = [
    "Comm", "Store", "Server", "group", "library_path", "version", "array_info",
    "SUM", "PROD", "MAX", "MIN", "AVG",
    "Error", "InvalidArgumentError", "InvalidUsageError", "NoDeviceError", "CudaError",
    "NcclError", "SystemCallError", "RendezvousError", "AuthError", "MismatchError",
    "TimeoutError", "PeerFailedError", "AbortedError", "InternalError", "BufferTooSmallError",
    "MissingFunctionError", "LibraryNotFoundError",
]


def library_path():
    """The path of the libcc file this process loaded (loading it if needed)."""
    return _library.api().path


def version():
    """The version of the libcc loaded, as "major.minor.patch"."""
    api = _library.api()
    return _library.version_string(api.cc_version())


def result_string(code):
    """libcc's static text for a result code ("CC_ERR_TIMEOUT: a deadline passed")."""
    text = _library.api().cc_result_string(code)
    return text.decode("utf-8", "replace") if text else ""


def array_info(x):
    """What cc reads from x (pointer, element count, dtype, device, the
    producer's stream, which interface), or an InvalidArgumentError saying
    why cc cannot use it. For checking an array before a collective."""
    return _arrays.view(x, "x")
