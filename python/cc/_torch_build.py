"""Building cc.torch's C++ extension against the installed torch.

`pip install ./python` builds it when torch is importable at install time
(setup.py calls here); otherwise `import cc.torch` compiles it on first use
with torch.utils.cpp_extension.load into CC_TORCH_BUILD_DIR (default: torch's
extension cache). Either way it needs cc.h: found through CC_INCLUDE_DIR, or
beside the libcc in use (an install prefix's include/, or a meson build
folder's include/ plus its source tree's), or this package's source tree.

A build on first use says so on stderr before it starts, and runs under an
exclusive lock on a file in the build folder, so that the ranks of one node
that import cc.torch together build it once: the first builds, the others
wait for it and then load what it built. The lock is an flock, which the
system drops when its holder dies, so a killed build never leaves the others
waiting. Nothing here imports torch at module level.
"""

import fcntl
import hashlib
import json
import os
import pathlib
import sys

from ._errors import ERR_INVALID_USAGE, Error

PACKAGE = pathlib.Path(__file__).resolve().parent
CSRC = PACKAGE / "torch" / "csrc"
SOURCES = ("cc_api.cpp", "comm_state.cpp", "work.cpp", "backend.cpp", "module.cpp")
JIT_NAME = "cc_torch_ext"


def sources(relative_to=None):
    """The extension's sources (relative to a folder when asked, as setup.py wants)."""
    files = [CSRC / name for name in SOURCES]
    if relative_to is None:
        return [str(f) for f in files]
    return [os.path.relpath(f, relative_to) for f in files]


def _header_roots(library_path):
    """Folders that may hold cc/cc.h, and folders that may hold cc_version.h,
    in the order they are tried."""
    roots, version_dirs = [], []
    env = os.environ.get("CC_INCLUDE_DIR")
    if env:
        for d in env.split(os.pathsep):
            if d:
                roots.append(pathlib.Path(d))
                version_dirs.append(pathlib.Path(d) / "cc")
                version_dirs.append(pathlib.Path(d))
    if library_path:
        libdir = pathlib.Path(library_path).resolve().parent
        for up in (libdir.parent, libdir.parent.parent):  # <prefix>/lib[/<multiarch>]
            roots.append(up / "include")
            version_dirs.append(up / "include" / "cc")
        # A meson build folder: <build>/lib/libcc.so, <build>/include/cc/cc_version.h,
        # and the source tree named in <build>/meson-info/meson-info.json.
        build = libdir.parent
        version_dirs.append(build / "include" / "cc")
        info = build / "meson-info" / "meson-info.json"
        if info.is_file():
            try:
                source = json.loads(info.read_text())["directories"]["source"]
                roots.append(pathlib.Path(source) / "include")
            except (OSError, ValueError, KeyError, TypeError):
                pass
    roots.append(PACKAGE.parent.parent / "include")  # python/cc -> the repository's include/
    return roots, version_dirs


def include_dirs(library_path=None):
    """The -I folders for `#include "cc/cc.h"` (and cc.h's "cc_version.h")."""
    roots, version_dirs = _header_roots(library_path)
    root = next((r for r in roots if (r / "cc" / "cc.h").is_file()), None)
    if root is None:
        raise Error(ERR_INVALID_USAGE,
                    "cc.torch cannot build its extension: cc/cc.h was not found in %s. Set "
                    "CC_INCLUDE_DIR to the folder holding cc/cc.h (an install prefix's include/)"
                    % ", ".join(str(r) for r in roots))
    if (root / "cc" / "cc_version.h").is_file():
        return [str(root)]
    version = next((d for d in version_dirs if (d / "cc_version.h").is_file()), None)
    if version is None:
        raise Error(ERR_INVALID_USAGE,
                    "cc.torch cannot build its extension: cc_version.h (made by cc's build) was "
                    "not found in %s. Build cc (meson setup build && ninja -C build) and point "
                    "CC_LIBRARY at build/lib/libcc.so.0, or set CC_INCLUDE_DIR to "
                    "'<source>/include%s<build>/include/cc'"
                    % (", ".join(str(d) for d in version_dirs), os.pathsep))
    return [str(root), str(version)]


LOCK_NAME = "cc-build.lock"
STAMP_NAME = "cc-build.stamp"


def building_words(torch_version):
    """What a build on first use prints before it starts."""
    major_minor = ".".join(str(torch_version).split("+")[0].split(".")[:2])
    return ("cc.torch: building the extension against torch %s, about a minute; "
            "pip install --no-build-isolation ./python builds it once" % major_minor)


def build_key(torch_version, include, extra=()):
    """What a build depends on: torch's and Python's versions, the sources and
    cc.h. A build folder whose stamp holds another key is built again."""
    digest = hashlib.sha256()
    for part in (str(torch_version), sys.version) + tuple(str(e) for e in extra):
        digest.update(part.encode() + b"\0")
    for path in sources() + [str(pathlib.Path(d) / "cc" / "cc.h") for d in include]:
        try:
            digest.update(pathlib.Path(path).read_bytes())
        except OSError:
            digest.update(b"missing " + path.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def load_locked(build_dir, key, load, message, stderr=None):
    """Runs load() (which builds when needed, then imports) under an exclusive
    lock on build_dir/cc-build.lock and returns what it returned. `message` goes
    to stderr before load() runs when build_dir's stamp does not hold key
    (a build is coming); a process that finds the lock held says it waits."""
    stderr = stderr if stderr is not None else sys.stderr
    os.makedirs(build_dir, exist_ok=True)
    lock_path = os.path.join(build_dir, LOCK_NAME)
    stamp_path = os.path.join(build_dir, STAMP_NAME)
    with open(lock_path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("cc.torch: another process is building the extension; waiting for it (lock %s)"
                  % lock_path, file=stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            try:
                with open(stamp_path) as f:
                    fresh = f.read().strip() == key
            except OSError:
                fresh = False
            if not fresh:
                print(message, file=stderr, flush=True)
            result = load()
            if not fresh:
                tmp = stamp_path + ".%d" % os.getpid()
                with open(tmp, "w") as f:
                    f.write(key + "\n")
                os.replace(tmp, stamp_path)
            return result
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _default_build_dir(cpp_extension):
    try:
        return cpp_extension._get_build_directory(JIT_NAME, False)
    except Exception:  # a torch without the helper: a cache of cc's own
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        return os.path.join(cache, "cc", "torch-ext")


def jit_load(library_path, verbose=False):
    """Compiles (or reuses a cached build of) the extension and imports it."""
    import torch
    from torch.utils import cpp_extension
    build_dir = os.environ.get("CC_TORCH_BUILD_DIR") or _default_build_dir(cpp_extension)
    include = include_dirs(library_path)
    verbose = verbose or os.environ.get("CC_TORCH_BUILD_VERBOSE") == "1"

    def load():
        return cpp_extension.load(
            name=JIT_NAME,
            sources=sources(),
            extra_include_paths=include,
            extra_cflags=["-O2"],
            with_cuda=True,
            build_directory=build_dir,
            verbose=verbose,
        )

    key = build_key(torch.__version__, include, (getattr(torch.version, "cuda", None),))
    return load_locked(build_dir, key, load, building_words(torch.__version__))
