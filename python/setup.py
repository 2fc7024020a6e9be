"""Installs `cc` (pure Python) and, when torch is importable here, builds the
extension behind `cc.torch` against that torch. Install with the environment's
own torch visible:

    pip install --no-build-isolation ./python

CC_BUILD_TORCH=0 skips the extension, =1 makes a failure to build it fatal;
by default it is built when torch imports and cc.h is found (else
`import cc.torch` compiles it on first use). cc.h is looked for through
CC_INCLUDE_DIR, beside the libcc that CC_LIBRARY names, or in this tree.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The commands pip runs to build a wheel (its metadata first: dist_info), which
# all need bdist_wheel.
WHEEL_COMMANDS = ("dist_info", "bdist_wheel", "editable_wheel")
NO_WHEEL_WORDS = ("cc: building a wheel needs setuptools 70.1+ or the wheel package; install one "
                  "(pip install -U 'setuptools>=70.1', or pip install wheel) and run pip again")


def can_build_wheels():
    """Whether bdist_wheel is here: in setuptools since 70.1, else from the
    wheel package. pip, with --no-build-isolation, installs neither itself."""
    for module in ("setuptools.command.bdist_wheel", "wheel.bdist_wheel"):
        try:
            __import__(module)
            return True
        except ImportError:
            pass
    return False


# Without it, setuptools' own message would be "invalid command 'bdist_wheel'".
if any(command in sys.argv[1:] for command in WHEEL_COMMANDS) and not can_build_wheels():
    raise SystemExit(NO_WHEEL_WORDS)

from setuptools import setup  # noqa: E402

sys.path.insert(0, HERE)


def torch_extension():
    want = os.environ.get("CC_BUILD_TORCH", "auto")
    if want == "0":
        return [], {}
    try:
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension
    except ImportError as e:
        if want == "1":
            raise SystemExit("CC_BUILD_TORCH=1 but torch does not import here (%s): install "
                             "with --no-build-isolation in the environment that has torch" % e)
        print("cc: torch is not importable here; installing without the torch extension "
              "(import cc.torch will build it on first use)")
        return [], {}
    from cc import _torch_build
    library = os.environ.get("CC_LIBRARY")
    if not library:
        try:
            from cc import _library
            library = _library.api().path
        except Exception:
            library = None
    try:
        include = _torch_build.include_dirs(library)
    except Exception as e:
        if want == "1":
            raise SystemExit("cc: %s" % e)
        print("cc: not building the torch extension now: %s" % e)
        return [], {}
    ext = CUDAExtension("cc.torch._C", _torch_build.sources(relative_to=HERE),
                        include_dirs=include, extra_compile_args={"cxx": ["-O2"]})
    return [ext], {"build_ext": BuildExtension}


ext_modules, cmdclass = torch_extension()

setup(
    packages=["cc", "cc.torch"],
    package_data={"cc.torch": ["csrc/*.cpp", "csrc/*.hpp"]},
    ext_modules=ext_modules,
    cmdclass=cmdclass,
)
