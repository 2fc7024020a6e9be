"""The few CUDA driver calls the array readers need, through ctypes.

Used only for arrays that do not say enough about themselves: which device a
`__cuda_array_interface__` pointer lives on, whether a stream is being
captured into a CUDA graph, and ordering a launch stream after a producer's
stream. None of these synchronises the host or allocates device memory, and
all are legal while a stream is being captured. libcuda is opened on first
need; a machine without the driver has no CUDA arrays to ask about, so every
question answers "unknown" (None) there instead of raising.
"""

import ctypes
import threading

_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
_CU_MEMORYTYPE_HOST = 1
_CU_EVENT_DISABLE_TIMING = 2
_CU_STREAM_CAPTURE_STATUS_NONE = 0

_driver = None
_driver_tried = False
_driver_lock = threading.Lock()
_local = threading.local()  # per thread: device -> event used to order streams


def _load():
    global _driver, _driver_tried
    with _driver_lock:
        if _driver_tried:
            return _driver
        _driver_tried = True
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            return None
        v, u, i = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
        P = ctypes.POINTER
        for name, args in (
            ("cuInit", [u]),
            ("cuPointerGetAttribute", [v, i, ctypes.c_uint64]),
            ("cuStreamIsCapturing", [v, P(i)]),
            ("cuEventCreate", [P(v), u]),
            ("cuEventRecord", [v, v]),
            ("cuStreamWaitEvent", [v, v, u]),
            ("cuDevicePrimaryCtxRetain", [P(v), i]),
            ("cuCtxPushCurrent_v2", [v]),
            ("cuCtxPopCurrent_v2", [P(v)]),
        ):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = i, args
        if lib.cuInit(0) != 0:
            return None
        _driver = lib
        return _driver


def driver():
    """libcuda, or None where there is no driver."""
    return _driver if _driver_tried else _load()


def pointer_device(ptr):
    """The device ordinal of device memory at ptr; -1 for host memory; None
    when unknown (no driver, or memory CUDA does not know)."""
    lib = driver()
    if lib is None or not ptr:
        return None
    kind = ctypes.c_uint(0)
    if lib.cuPointerGetAttribute(ctypes.byref(kind), _CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) != 0:
        return None
    if kind.value == _CU_MEMORYTYPE_HOST:
        return -1
    ordinal = ctypes.c_int(-1)
    if lib.cuPointerGetAttribute(ctypes.byref(ordinal), _CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 ptr) != 0:
        return None
    return ordinal.value


def is_capturing(stream):
    """Whether stream (a handle, 0 = legacy default) is being captured; None
    when unknown."""
    lib = driver()
    if lib is None:
        return None
    status = ctypes.c_int(0)
    if lib.cuStreamIsCapturing(stream or None, ctypes.byref(status)) != 0:
        return None
    return status.value != _CU_STREAM_CAPTURE_STATUS_NONE


def _event(lib, device):
    events = getattr(_local, "events", None)
    if events is None:
        events = _local.events = {}
    event = events.get(device)
    if event is None:
        ctx = ctypes.c_void_p()
        if lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device) != 0:
            return None
        if lib.cuCtxPushCurrent_v2(ctx) != 0:
            return None
        try:
            handle = ctypes.c_void_p()
            if lib.cuEventCreate(ctypes.byref(handle), _CU_EVENT_DISABLE_TIMING) != 0:
                return None
        finally:
            lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        event = events[device] = handle
    return event


def order_after(consumer, producer, device):
    """Makes stream `consumer` wait for the work queued so far on `producer`
    (an event recorded on producer, waited on by consumer: no host wait).
    Returns False when it could not (no driver, or a CUDA error)."""
    lib = driver()
    if lib is None:
        return False
    event = _event(lib, device)
    if event is None:
        return False
    if lib.cuEventRecord(event, producer or None) != 0:
        return False
    return lib.cuStreamWaitEvent(consumer or None, event, 0) == 0
