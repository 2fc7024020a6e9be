"""What cc reads from an array: device pointer, element count, dtype, device.

Three producers are understood, tried in this order:
  - torch.Tensor, read directly (data_ptr, dtype, strides): the cheapest, and
    the only one that accepts a tensor that requires grad;
  - `__cuda_array_interface__` (version 2 and 3; CuPy, Numba, JAX): a dict;
  - DLPack (`__dlpack__` / `__dlpack_device__`; JAX, CuPy, anything modern).
Anything else, and any array in host memory (numpy, a CPU tensor), is refused
with a message that says what to pass instead.

Streams. A collective runs on the stream given as `stream=` (a torch or CuPy
stream, or an int handle); without one, on the array's own current stream
(torch's current stream for a tensor, the producer's stream for an interface
that names one), else CUDA's legacy default stream. When an array's producer
names another stream than the one cc launches on, cc orders its stream after
the producer's (an event, no host wait), as both interfaces ask of a
consumer, except while the launch stream is being captured into a CUDA graph:
then the caller's capture already orders the work and an event from outside
the capture would break it.

DLPack capsules are read without being consumed: the capsule keeps its name,
so its own destructor calls the producer's deleter once cc lets go of it
(consuming would move that duty to cc). The pointer stays valid while the
caller holds the array; the caller keeps it alive until the collective has
run on its stream, as with NCCL.
"""

import ctypes
import sys

from . import _cuda
from ._errors import invalid_argument

# cc_datatype_t
INT8, UINT8, INT32, UINT32, INT64, UINT64 = 0, 1, 2, 3, 4, 5
FLOAT16, FLOAT32, FLOAT64, BFLOAT16, FLOAT8_E4M3, FLOAT8_E5M2 = 6, 7, 8, 9, 10, 11

DTYPE_NAMES = {
    INT8: "int8", UINT8: "uint8", INT32: "int32", UINT32: "uint32", INT64: "int64",
    UINT64: "uint64", FLOAT16: "float16", FLOAT32: "float32", FLOAT64: "float64",
    BFLOAT16: "bfloat16", FLOAT8_E4M3: "float8_e4m3fn", FLOAT8_E5M2: "float8_e5m2",
}
ITEMSIZE = {INT8: 1, UINT8: 1, INT32: 4, UINT32: 4, INT64: 8, UINT64: 8, FLOAT16: 2,
            FLOAT32: 4, FLOAT64: 8, BFLOAT16: 2, FLOAT8_E4M3: 1, FLOAT8_E5M2: 1}
SUPPORTED = ", ".join(DTYPE_NAMES[k] for k in sorted(DTYPE_NAMES))

# __cuda_array_interface__ typestr (kind + bytes, after the byte-order mark).
_TYPESTR = {"i1": INT8, "u1": UINT8, "i4": INT32, "u4": UINT32, "i8": INT64, "u8": UINT64,
            "f2": FLOAT16, "f4": FLOAT32, "f8": FLOAT64}

# DLPack (dlpack.h): device types and dtype codes.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan",
                    8: "Metal", 10: "ROCm", 11: "ROCm host", 13: "CUDA managed", 14: "oneAPI"}
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT = 0, 1, 2, 4
_DL_FLOAT8_E4M3FN, _DL_FLOAT8_E5M2 = 10, 12
_DLPACK_DTYPES = {
    (_DL_INT, 8): INT8, (_DL_UINT, 8): UINT8, (_DL_INT, 32): INT32, (_DL_UINT, 32): UINT32,
    (_DL_INT, 64): INT64, (_DL_UINT, 64): UINT64, (_DL_FLOAT, 16): FLOAT16,
    (_DL_FLOAT, 32): FLOAT32, (_DL_FLOAT, 64): FLOAT64, (_DL_BFLOAT, 16): BFLOAT16,
    (_DL_FLOAT8_E4M3FN, 8): FLOAT8_E4M3, (_DL_FLOAT8_E5M2, 8): FLOAT8_E5M2,
}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                        ctypes.c_char_p]


class View:
    """One array as cc sees it."""

    __slots__ = ("ptr", "count", "dtype", "device", "stream", "source")

    def __init__(self, ptr, count, dtype, device, stream, source):
        self.ptr = ptr          # int device address (0 allowed when count is 0)
        self.count = count      # elements
        self.dtype = dtype      # cc_datatype_t
        self.device = device    # CUDA ordinal, None when the producer does not say
        self.stream = stream    # the producer's stream handle, None when it names none
        self.source = source    # "torch", "cuda_array_interface" or "dlpack"

    def __repr__(self):
        return ("ArrayInfo(ptr=0x%x, count=%d, dtype=%s, device=%s, stream=%s, source=%s)"
                % (self.ptr, self.count, DTYPE_NAMES[self.dtype], self.device, self.stream,
                   self.source))


def _type_name(x):
    tp = type(x)
    return tp.__name__ if tp.__module__ == "builtins" else tp.__module__ + "." + tp.__qualname__


def _is_c_contiguous(shape, strides, itemsize):
    """strides in bytes; dimensions of extent 1 may have any stride."""
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _product(shape):
    n = 1
    for extent in shape:
        n *= extent
    return n


# ------------------------------------------------------------------ torch

_torch_dtypes = None
_torch_stream = None


def _torch_tables(torch):
    global _torch_dtypes, _torch_stream
    table = {}
    for name, code in (("int8", INT8), ("uint8", UINT8), ("int32", INT32), ("uint32", UINT32),
                       ("int64", INT64), ("uint64", UINT64), ("float16", FLOAT16),
                       ("float32", FLOAT32), ("float64", FLOAT64), ("bfloat16", BFLOAT16),
                       ("float8_e4m3fn", FLOAT8_E4M3), ("float8_e5m2", FLOAT8_E5M2)):
        dt = getattr(torch, name, None)
        if dt is not None:
            table[dt] = code
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _torch_stream = raw if raw is not None else (
        lambda device: torch.cuda.current_stream(device).cuda_stream)
    _torch_dtypes = table


def _from_torch(t, name):
    if not t.is_cuda:
        raise invalid_argument(
            "%s is a torch.Tensor on %s; cc needs CUDA memory: move it with %s.cuda() "
            "(or .to('cuda:N'))" % (name, t.device, name))
    if _torch_dtypes is None:
        _torch_tables(sys.modules["torch"])
    dtype = _torch_dtypes.get(t.dtype)
    if dtype is None:
        raise invalid_argument(
            "%s has dtype %s, which cc cannot carry; cc takes %s%s"
            % (name, t.dtype, SUPPORTED, _hint_for(str(t.dtype))))
    if not t.is_contiguous():
        raise invalid_argument(
            "%s is not contiguous (shape %s, strides %s): pass %s.contiguous()"
            % (name, tuple(t.shape), tuple(t.stride()), name))
    return View(t.data_ptr(), t.numel(), dtype, t.get_device(), None, "torch")


def _hint_for(dtype_text):
    if "bool" in dtype_text:
        return " (view a bool array as uint8)"
    if "complex" in dtype_text:
        return " (for a sum, view a complex array as its real dtype: torch.view_as_real)"
    return ""


# --------------------------------------------------- __cuda_array_interface__

def _from_cai(x, cai, name, writable):
    try:
        shape = tuple(int(e) for e in cai["shape"])
        typestr = cai["typestr"]
        data = cai["data"]
    except (KeyError, TypeError) as e:
        raise invalid_argument("%s's __cuda_array_interface__ lacks %s: it is not a valid "
                               "interface (shape, typestr and data are required)"
                               % (name, e)) from None
    version = cai.get("version", 0)
    if cai.get("mask") is not None:
        raise invalid_argument("%s is a masked array (__cuda_array_interface__ has a mask); "
                               "cc takes plain arrays" % name)
    if not isinstance(typestr, str) or len(typestr) < 3 or typestr[0] not in "<|=>":
        raise invalid_argument("%s's __cuda_array_interface__ typestr %r is not a numpy "
                               "type string" % (name, typestr))
    if typestr[0] == ">" and typestr[1:] not in ("i1", "u1"):
        raise invalid_argument("%s is big-endian (%s); cc takes little-endian data"
                               % (name, typestr))
    dtype = _TYPESTR.get(typestr[1:])
    if dtype is None:
        hint = " (bfloat16 and float8 have no type string: pass such arrays through DLPack)" \
            if typestr[1] == "V" else _hint_for({"b": "bool", "c": "complex"}.get(typestr[1], ""))
        raise invalid_argument("%s has type string %r, which cc cannot carry; cc takes %s%s"
                               % (name, typestr, SUPPORTED, hint))
    itemsize = ITEMSIZE[dtype]
    count = _product(shape)
    strides = cai.get("strides")
    if strides is not None and count > 0:
        strides = tuple(int(s) for s in strides)
        if len(strides) != len(shape) or not _is_c_contiguous(shape, strides, itemsize):
            raise invalid_argument(
                "%s is not C-contiguous (shape %s, strides %s bytes): pass a contiguous copy"
                % (name, shape, strides))
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise invalid_argument("%s's __cuda_array_interface__ data %r is not (pointer, "
                               "read_only)" % (name, data))
    ptr = int(data[0] or 0)
    if data[1] and writable:
        raise invalid_argument("%s is read-only (its __cuda_array_interface__ says so); cc "
                               "writes into it" % name)
    stream = cai.get("stream") if version >= 3 else None
    if stream is not None:
        stream = int(stream)
        if stream == 0:
            raise invalid_argument("%s's __cuda_array_interface__ names stream 0, which the "
                                   "interface forbids (1 = legacy default, 2 = per-thread)"
                                   % name)
    device = _cai_device(x, ptr, name)
    return View(ptr, count, dtype, device, stream, "cuda_array_interface")


def _cai_device(x, ptr, name):
    dev = getattr(x, "device", None)
    ordinal = getattr(dev, "id", None)  # CuPy
    if isinstance(ordinal, int):
        return ordinal
    ordinal = _cuda.pointer_device(ptr)
    if ordinal == -1:
        raise invalid_argument("%s points into host memory (CUDA says so of 0x%x); cc needs "
                               "device memory" % (name, ptr))
    return ordinal


# ------------------------------------------------------------------ DLPack

def _from_dlpack(x, name, launch_stream):
    try:
        device_type, device_id = x.__dlpack_device__()
    except Exception as e:  # a producer's own refusal, with its message
        raise invalid_argument("%s (%s) could not say where it lives: __dlpack_device__ "
                               "raised %s: %s" % (name, _type_name(x), type(e).__name__, e)) \
            from None
    device_type = int(device_type)
    if device_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
        where = _DL_DEVICE_NAMES.get(device_type, "device type %d" % device_type)
        raise invalid_argument(
            "%s (%s) lives in %s memory (DLPack device %s); cc needs CUDA device memory: "
            "move it to the GPU first (e.g. torch.as_tensor(%s, device='cuda') or "
            "cupy.asarray(%s))" % (name, _type_name(x), where, where, name, name))
    capsule = _dlpack_capsule(x, name, launch_stream)
    capsule_name = _capsule_name(capsule)
    if capsule_name == b"dltensor_versioned":
        managed = DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, capsule_name))
        if managed.version.major != 1:
            raise invalid_argument("%s came as DLPack %d.%d, which cc cannot read (it reads "
                                   "1.x and the unversioned form)"
                                   % (name, managed.version.major, managed.version.minor))
        tensor = managed.dl_tensor
    elif capsule_name == b"dltensor":
        tensor = DLManagedTensor.from_address(_capsule_pointer(capsule, capsule_name)).dl_tensor
    else:
        raise invalid_argument("%s's __dlpack__ gave a capsule named %r (already consumed?)"
                               % (name, capsule_name))
    view = _dl_tensor_view(tensor, name, device_id)
    del capsule  # not consumed: the capsule's destructor calls the deleter
    return view


def _dlpack_capsule(x, name, launch_stream):
    # The stream argument asks the producer to order our stream after its
    # work: -1 = do not (inside a capture), 1 = the legacy default stream.
    if launch_stream and _cuda.is_capturing(launch_stream):
        stream_arg = -1
    elif not launch_stream:
        stream_arg = 1 if not _cuda.is_capturing(0) else -1
    else:
        stream_arg = launch_stream
    try:
        try:
            return x.__dlpack__(stream=stream_arg, max_version=(1, 0))
        except TypeError:  # a producer older than DLPack 1.0's keyword
            return x.__dlpack__(stream=stream_arg)
    except Exception as e:
        raise invalid_argument("%s (%s) refused to export through DLPack: %s: %s"
                               % (name, _type_name(x), type(e).__name__, e)) from None


def _dl_tensor_view(tensor, name, device_id):
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    dtype = _DLPACK_DTYPES.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise invalid_argument(
            "%s has DLPack dtype (code %d, %d bits, %d lanes), which cc cannot carry; cc "
            "takes %s%s" % (name, code, bits, lanes, SUPPORTED,
                            _hint_for({6: "bool", 5: "complex"}.get(code, ""))))
    ndim = tensor.ndim
    shape = tuple(tensor.shape[i] for i in range(ndim))
    count = _product(shape)
    if tensor.strides and count > 0:
        strides = tuple(tensor.strides[i] * ITEMSIZE[dtype] for i in range(ndim))
        if not _is_c_contiguous(shape, strides, ITEMSIZE[dtype]):
            raise invalid_argument(
                "%s is not C-contiguous (shape %s, strides %s elements): pass a contiguous "
                "copy" % (name, shape, tuple(tensor.strides[i] for i in range(ndim))))
    ptr = (tensor.data or 0) + tensor.byte_offset
    return View(ptr, count, dtype, int(device_id), None, "dlpack")


# ------------------------------------------------------------------ entry

def view(x, name="x", launch_stream=None, writable=False):
    """The View of x, or an InvalidArgumentError saying why cc cannot use it.
    launch_stream: the stream cc will launch on, when already known (DLPack
    producers order it after their own work). writable: cc writes into x."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return _from_torch(x, name)
    cai = None
    try:
        cai = x.__cuda_array_interface__
    except AttributeError:
        pass
    except Exception as e:  # a producer that has the interface but refuses this array
        if not hasattr(x, "__dlpack__"):
            raise invalid_argument("%s (%s) refused its __cuda_array_interface__: %s: %s"
                                   % (name, _type_name(x), type(e).__name__, e)) from None
    if cai is not None:
        return _from_cai(x, cai, name, writable)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return _from_dlpack(x, name, launch_stream)
    what = _type_name(x)
    if isinstance(x, (bytes, bytearray, memoryview)) or hasattr(x, "__array_interface__"):
        raise invalid_argument(
            "%s is a %s in host memory; cc needs a CUDA array (a torch CUDA tensor, a CuPy "
            "or JAX array, or anything with __cuda_array_interface__ or DLPack)" % (name, what))
    raise invalid_argument(
        "%s is a %s, which is not an array cc can read: pass a CUDA array (a torch CUDA "
        "tensor, a CuPy or JAX array, or anything with __cuda_array_interface__ or DLPack)"
        % (name, what))


def stream_handle(stream, name="stream"):
    """A stream argument as an int handle (0 = the legacy default stream)."""
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise invalid_argument("%s=%d: a stream handle is never negative" % (name, stream))
        return stream
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    handle = getattr(stream, "handle", None)  # numba: a ctypes c_void_p
    if handle is not None:
        value = getattr(handle, "value", handle)
        if isinstance(value, int) or value is None:
            return value or 0
    raise invalid_argument(
        "%s=%r is not a stream: pass a torch.cuda.Stream, a cupy.cuda.Stream, an int handle "
        "(cudaStream_t), or None for the array's current stream" % (name, stream))


def launch_stream(stream, first):
    """The stream a collective runs on: stream= when given, else the first
    array's own stream, else the legacy default stream (0)."""
    if stream is not None:
        return stream_handle(stream)
    if first.source == "torch":
        return _torch_stream(first.device)
    if first.stream is not None:
        return 0 if first.stream == 1 else first.stream
    return 0


def order(views, launch, device):
    """Orders the launch stream after each producer stream that differs from
    it, except inside a graph capture (see the module's message)."""
    for v in views:
        s = v.stream
        if s is None or v.source == "torch" or s == launch or (s == 1 and launch == 0):
            continue
        if _cuda.is_capturing(launch):
            return
        if not _cuda.order_after(launch, s, v.device if v.device is not None else device):
            raise invalid_argument(
                "cc could not order stream 0x%x after the array's stream 0x%x (CUDA driver "
                "calls failed); pass stream= the array's own stream" % (launch, s))
