"""Building cc.torch's C++ extension against the installed torch.

`pip install ./python` builds it when torch is importable at install time
(setup.py calls here); otherwise `import cc.torch` compiles it on first use
with torch.utils.cpp_extension.load into CC_TORCH_BUILD_DIR (default: torch's
extension cache). Either way it needs cc.h: found through CC_INCLUDE_DIR, or
beside the libcc in use (an install prefix's include/, or a meson build
folder's include/ plus its source tree's), or this package's source tree.
Nothing here imports torch at module level.
"""

import json
import os
import pathlib

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


def jit_load(library_path, verbose=False):
    """Compiles (or reuses a cached build of) the extension and imports it."""
    from torch.utils import cpp_extension
    build_dir = os.environ.get("CC_TORCH_BUILD_DIR")
    if build_dir:
        os.makedirs(build_dir, exist_ok=True)
    return cpp_extension.load(
        name=JIT_NAME,
        sources=sources(),
        extra_include_paths=include_dirs(library_path),
        extra_cflags=["-O2"],
        with_cuda=True,
        build_directory=build_dir or None,
        verbose=verbose or os.environ.get("CC_TORCH_BUILD_VERBOSE") == "1",
    )
