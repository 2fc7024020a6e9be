"""Shared pieces of the python suite: where libcc and the package are, and
array producers made by hand to exercise cc's readers.

The hand-made producers describe memory exactly as CuPy, Numba, JAX or numpy
would (a __cuda_array_interface__ dict, a DLPack capsule with a deleter);
they are used only to test how cc reads arguments, never to stand in for a
collective's result.
"""

import ctypes
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent.parent / "python"


def libcc_path():
    """The libcc this run tests (meson passes it as CC_LIBRARY)."""
    path = os.environ.get("CC_TEST_LIBCC") or os.environ.get("CC_LIBRARY")
    if not path:
        raise RuntimeError("set CC_TEST_LIBCC (meson test does) to the libcc to test")
    return os.path.abspath(path)


def run_python(code, env_overrides, unset=(), cwd=None):
    """Runs code in a fresh interpreter (a fresh library lookup) and returns
    (exit status, stdout, stderr)."""
    env = dict(os.environ)
    for name in ("CC_LIBRARY", "LD_LIBRARY_PATH") + tuple(unset):
        env.pop(name, None)
    env.update(env_overrides)
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


class FakeCudaArray:
    """An object offering only __cuda_array_interface__, as Numba does."""

    def __init__(self, **interface):
        self.__cuda_array_interface__ = interface


# ------------------------------------------------------------------ DLPack

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# Called from the capsule's dealloc: take the raw PyObject*, never a
# py_object (that would touch the refcount of an object being freed).
_raw_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(
    ctypes.cast(ctypes.pythonapi.PyCapsule_GetName, ctypes.c_void_p).value)
_raw_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ctypes.cast(ctypes.pythonapi.PyCapsule_GetPointer, ctypes.c_void_p).value)
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLPackProducer:
    """Exports one described tensor through DLPack the way a producer must:
    a capsule named "dltensor" (or "dltensor_versioned" when asked for 1.x)
    whose destructor calls the deleter unless a consumer renamed it.
    deleted counts deleter calls; stream_args records what consumers passed."""

    def __init__(self, device_type, device_id, data, shape, code, bits, lanes=1, strides=None,
                 byte_offset=0, supports_versioned=True):
        from cc import _arrays as arrays  # the struct layouts under test
        self._arrays = arrays
        self.device = (device_type, device_id)
        self.data, self.shape, self.strides = data, list(shape), strides
        self.dtype = (code, bits, lanes)
        self.byte_offset = byte_offset
        self.supports_versioned = supports_versioned
        self.deleted = 0
        self.stream_args = []
        self._keep = []
        self._deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self._on_delete)
        self._destructor = _DESTRUCTOR(self._on_capsule_freed)

    def _on_delete(self, _managed):
        self.deleted += 1

    def _on_capsule_freed(self, capsule):
        name = _raw_name(capsule)
        if name in (b"dltensor", b"dltensor_versioned"):  # never consumed
            managed = _raw_pointer(capsule, name)
            self._deleter(managed)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None):
        self.stream_args.append(stream)
        a = self._arrays
        shape = (ctypes.c_int64 * max(1, len(self.shape)))(*self.shape)
        strides = None
        if self.strides is not None:
            strides = (ctypes.c_int64 * max(1, len(self.strides)))(*self.strides)
        tensor = a.DLTensor()
        tensor.data = self.data
        tensor.device.device_type, tensor.device.device_id = self.device
        tensor.ndim = len(self.shape)
        tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = self.dtype
        tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        if strides is not None:
            tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        tensor.byte_offset = self.byte_offset
        versioned = self.supports_versioned and max_version is not None and max_version[0] >= 1
        if versioned:
            managed = a.DLManagedTensorVersioned()
            managed.version.major, managed.version.minor = 1, 0
            managed.dl_tensor = tensor
            name = b"dltensor_versioned"
        else:
            if max_version is not None and not self.supports_versioned:
                raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
            managed = a.DLManagedTensor()
            managed.dl_tensor = tensor
            name = b"dltensor"
        ctypes.cast(ctypes.addressof(managed) + type(managed).deleter.offset,
                    ctypes.POINTER(ctypes.c_void_p))[0] = \
            ctypes.cast(self._deleter, ctypes.c_void_p).value
        self._keep.append((shape, strides, managed))
        return _PyCapsule_New(ctypes.addressof(managed), name,
                              ctypes.cast(self._destructor, ctypes.c_void_p).value)
