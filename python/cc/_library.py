"""Finding, loading and calling libcc.

libcc is looked for, first found wins, in
  1. CC_LIBRARY: the path of the library file (no fallback when it is set but
     cannot be loaded: an explicit choice is never silently replaced);
  2. the install prefix: the prefix this package is installed under (and
     sys.prefix), in lib/<multiarch>, lib64 and lib;
  3. the system loader's path (LD_LIBRARY_PATH, ld.so.cache, /usr/lib ...).
It is loaded on first use, once per process. Functions are looked up lazily:
a libcc that lacks one (an older build) fails only when that function is
called, with a MissingFunctionError naming it.
"""

import ctypes
import os
import pathlib
import sys
import sysconfig
import threading

from . import _errors

SONAME = "libcc.so.0"

c_int = ctypes.c_int
c_int64 = ctypes.c_int64
c_size_t = ctypes.c_size_t
c_void_p = ctypes.c_void_p
c_char_p = ctypes.c_char_p
P = ctypes.POINTER

# Every C function this binding calls: name -> (restype, argtypes).
# Pointers to buffers are c_void_p (Python ints); handles are c_void_p.
_PROTOTYPES = {
    "cc_comm_init": (c_int, [P(c_void_p), c_int, c_int, c_char_p, c_int, c_void_p]),
    "cc_comm_init_from_env": (c_int, [P(c_void_p), c_void_p]),
    "cc_comm_split": (c_int, [c_void_p, c_int, c_int, P(c_void_p), c_void_p]),
    "cc_comm_destroy": (c_int, [c_void_p]),
    "cc_comm_abort": (c_int, [c_void_p]),
    "cc_comm_rank": (c_int, [c_void_p, P(c_int)]),
    "cc_comm_size": (c_int, [c_void_p, P(c_int)]),
    "cc_comm_device": (c_int, [c_void_p, P(c_int)]),
    "cc_comm_timeout": (c_int, [c_void_p, P(c_int)]),
    "cc_comm_shrink": (c_int, [c_void_p, c_int, P(c_void_p)]),
    "cc_comm_regrow": (c_int, [c_void_p, c_int, c_int, P(c_void_p)]),
    "cc_comm_generation": (c_int, [c_void_p, P(c_int)]),
    "cc_comm_failed_ranks": (c_int, [c_void_p, P(c_int), c_int, P(c_int)]),
    "cc_comm_check": (c_int, [c_void_p]),
    "cc_comm_dump_trace": (c_int, [c_void_p, c_char_p]),
    "cc_allreduce": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]),
    "cc_broadcast": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]),
    "cc_reduce": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_int, c_void_p, c_void_p]),
    "cc_allgather": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_void_p, c_void_p]),
    "cc_reducescatter": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]),
    "cc_alltoall": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_void_p, c_void_p]),
    "cc_send": (c_int, [c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]),
    "cc_recv": (c_int, [c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]),
    "cc_barrier": (c_int, [c_void_p, c_void_p]),
    "cc_group_start": (c_int, []),
    "cc_group_end": (c_int, []),
    "cc_store_connect": (c_int, [P(c_void_p), c_char_p, c_int, c_char_p, c_void_p]),
    "cc_store_set": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t]),
    "cc_store_get": (c_int, [c_void_p, c_char_p, c_void_p, c_size_t, P(c_size_t), c_int]),
    "cc_store_add": (c_int, [c_void_p, c_char_p, c_int64, P(c_int64)]),
    "cc_store_wait": (c_int, [c_void_p, P(c_char_p), c_int, c_int]),
    "cc_store_delete": (c_int, [c_void_p, c_char_p]),
    "cc_store_compare_set": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t, c_char_p, c_size_t,
                                     P(c_int)]),
    "cc_store_close": (c_int, [c_void_p]),
    "cc_server_start": (c_int, [P(c_void_p), c_char_p, c_int, c_void_p]),
    "cc_server_port": (c_int, [c_void_p, P(c_int)]),
    "cc_server_stop": (c_int, [c_void_p]),
    "cc_result_string": (c_char_p, [c_int]),
    "cc_last_error": (c_char_p, []),
    "cc_version": (c_int, []),
}


class Api:
    """libcc's functions as attributes, each looked up on first use."""

    def __init__(self, cdll, path, how):
        self._cdll = cdll
        self.path = path
        self.how = how

    def __getattr__(self, name):
        if name not in _PROTOTYPES:
            raise AttributeError(name)
        try:
            fn = getattr(self._cdll, name)
        except AttributeError:
            raise _errors.MissingFunctionError(
                _errors.ERR_INVALID_USAGE,
                "%s is not in the libcc loaded from %s (version %s): that build predates it; "
                "build and load a newer libcc (set CC_LIBRARY to its path)"
                % (name, self.path, version_string(self._cdll.cc_version())),
            ) from None
        fn.restype, fn.argtypes = _PROTOTYPES[name]
        setattr(self, name, fn)  # later calls skip __getattr__
        return fn

    def has(self, name):
        """Whether the loaded libcc exports `name`."""
        try:
            getattr(self, name)
            return True
        except _errors.MissingFunctionError:
            return False

    def last_error(self):
        message = self.cc_last_error()
        return message.decode("utf-8", "replace") if message else ""

    def check(self, result):
        """Raises the cc.Error for a failed call; reads this thread's message."""
        if result != 0:
            raise _errors.error_for(result, self.last_error())


def version_string(code):
    return "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100)


def _prefix_candidates():
    """Library files under the prefix this package is installed in."""
    package = pathlib.Path(__file__).resolve().parent
    # <prefix>/lib/pythonX.Y/site-packages/cc/_library.py: four levels up.
    prefixes = []
    if len(package.parents) > 3:
        prefixes.append(package.parents[3])
    for p in (sys.prefix, sys.base_prefix):
        prefixes.append(pathlib.Path(p))
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    seen, out = set(), []
    for prefix in prefixes:
        for libdir in (["lib/" + multiarch] if multiarch else []) + ["lib64", "lib"]:
            candidate = prefix / libdir / SONAME
            if candidate not in seen:
                seen.add(candidate)
                out.append(candidate)
    return out


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", c_char_p), ("dli_fbase", c_void_p),
                ("dli_sname", c_char_p), ("dli_saddr", c_void_p)]


def _loaded_path(cdll, fallback):
    """The file the dynamic loader actually opened (dladdr on a symbol)."""
    try:
        try:
            dladdr = ctypes.CDLL(None).dladdr
        except AttributeError:
            dladdr = ctypes.CDLL("libdl.so.2").dladdr
        dladdr.argtypes = [c_void_p, P(_DlInfo)]
        dladdr.restype = c_int
        info = _DlInfo()
        address = ctypes.cast(cdll.cc_version, c_void_p)
        if dladdr(address, ctypes.byref(info)) and info.dli_fname:
            return os.path.abspath(os.fsdecode(info.dli_fname))
    except (OSError, AttributeError):
        pass
    return os.path.abspath(fallback) if os.sep in fallback else fallback


def _open(path):
    return ctypes.CDLL(path)


def _load():
    explicit = os.environ.get("CC_LIBRARY")
    if explicit:
        try:
            cdll = _open(explicit)
        except OSError as e:
            raise _errors.LibraryNotFoundError(
                _errors.ERR_INVALID_ARGUMENT,
                "CC_LIBRARY=%s could not be loaded: %s. Point CC_LIBRARY at libcc's file "
                "(e.g. build/lib/libcc.so.0) or unset it to search the install prefix and "
                "the loader path" % (explicit, e)) from None
        return Api(cdll, _loaded_path(cdll, explicit), "CC_LIBRARY")
    tried = ["CC_LIBRARY (not set)"]
    for candidate in _prefix_candidates():
        if candidate.exists():
            try:
                cdll = _open(str(candidate))
            except OSError as e:
                tried.append("%s (%s)" % (candidate, e))
                continue
            return Api(cdll, _loaded_path(cdll, str(candidate)), "install prefix")
        tried.append(str(candidate))
    try:
        cdll = _open(SONAME)
    except OSError as e:
        tried.append("the loader path (%s)" % e)
        raise _errors.LibraryNotFoundError(
            _errors.ERR_INVALID_USAGE,
            "libcc was not found; looked in: " + "; ".join(tried) +
            ". Build cc (meson setup build && ninja -C build) and set CC_LIBRARY to "
            "build/lib/libcc.so.0, or install it (meson install) into this Python's "
            "prefix or a directory on LD_LIBRARY_PATH") from None
    return Api(cdll, _loaded_path(cdll, SONAME), "loader path")


_api = None
_lock = threading.Lock()


def api():
    """The loaded libcc (loaded on the first call)."""
    global _api
    if _api is None:
        with _lock:
            if _api is None:
                _api = _load()
    return _api
