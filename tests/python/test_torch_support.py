"""The parts of cc.torch that need no torch: how a process group's ranks
agree on cc's rendezvous through torch's store, and finding cc.h to build
the extension."""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

import cc
from cc import _torch_build, _torch_rendezvous as rv

import helpers


class DictStore:
    """torch.distributed's Store as the creator uses it: set, and a get that
    waits until the key exists."""

    def __init__(self):
        self._values = {}
        self._cond = threading.Condition()

    def set(self, key, value):
        with self._cond:
            self._values[key] = value if isinstance(value, bytes) else value.encode()
            self._cond.notify_all()

    def get(self, key):
        with self._cond:
            if not self._cond.wait_for(lambda: key in self._values, timeout=10):
                raise TimeoutError(key)
            return self._values[key]


def start_server(bind_addr, port):
    server = cc.Server(bind_addr, port)
    return server, server.port


class Agreement(unittest.TestCase):
    def test_every_rank_learns_rank_zeros_server_and_can_reach_it(self):
        store = DictStore()
        env = {"MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
        results = {}

        def rank(r):
            results[r] = rv.agree(store, r, [], env, start_server)

        threads = [threading.Thread(target=rank, args=(r,)) for r in (2, 1, 0)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        addr, port, server = results[0]
        try:
            self.assertIsInstance(server, cc.Server)
            self.assertEqual(addr, "127.0.0.1")
            self.assertNotEqual(port, 29500)  # torch's store holds MASTER_PORT
            for r in (1, 2):
                self.assertEqual(results[r], (addr, port, None))
            with cc.Store(addr, port, timeout_ms=2000) as client:  # really listening there
                client.set("k", "v")
                self.assertEqual(client.get("k"), b"v")
        finally:
            server.stop()

    def test_cc_master_port_pins_the_default_groups_port(self):
        free = cc.Server("127.0.0.1")
        port = free.port
        free.stop()
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "CC_MASTER_PORT": str(port)}
        _, got, server = rv.agree(DictStore(), 0, [], env, start_server)
        server.stop()
        self.assertEqual(got, port)
        # A subgroup never takes it: the default group's server may hold it.
        _, got, server = rv.agree(DictStore(), 0, [1, 3], env, start_server)
        server.stop()
        self.assertNotEqual(got, port)


class Addresses(unittest.TestCase):
    def test_advertised_address(self):
        adv = rv.advertised_address
        self.assertEqual(adv({"MASTER_ADDR": "localhost"}, True), "127.0.0.1")
        self.assertEqual(adv({"MASTER_ADDR": "127.0.0.7"}, False), "127.0.0.1")
        self.assertEqual(adv({"MASTER_ADDR": "::1"}, True), "::1")
        self.assertEqual(adv({"MASTER_ADDR": "10.10.10.2"}, True), "10.10.10.2")
        self.assertEqual(adv({"MASTER_ADDR": "10.10.10.2", "CC_TORCH_ADDR": "host-b"}, True),
                         "host-b")
        self.assertEqual(rv._route_source("127.0.0.1"), "127.0.0.1")

    def test_bind_address(self):
        self.assertEqual(rv.bind_address("127.0.0.1"), "127.0.0.1")
        self.assertEqual(rv.bind_address("localhost"), "127.0.0.1")
        self.assertEqual(rv.bind_address("::1"), "::1")
        self.assertIsNone(rv.bind_address("10.10.10.2"))
        self.assertEqual(rv.bind_address("fd00::5"), "::")
        self.assertIsNone(rv.bind_address("node-7.cluster"))

    def test_server_port(self):
        self.assertEqual(rv.server_port({}, True), 0)
        self.assertEqual(rv.server_port({"CC_MASTER_PORT": "29500", "MASTER_PORT": "29500"}, True),
                         0)
        self.assertEqual(rv.server_port({"CC_MASTER_PORT": "29501", "MASTER_PORT": "29500"}, True),
                         29501)
        self.assertEqual(rv.server_port({"CC_MASTER_PORT": "29501"}, False), 0)
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            rv.server_port({"CC_MASTER_PORT": "http"}, True)
        self.assertIn("CC_MASTER_PORT='http' is not a port", str(caught.exception))


class ExtensionHeaders(unittest.TestCase):
    def test_headers_beside_the_build_compile_cc_h(self):
        dirs = _torch_build.include_dirs(helpers.libcc_path())
        self.assertTrue(any((pathlib.Path(d) / "cc" / "cc.h").is_file() for d in dirs), dirs)
        compiler = shutil.which("c++") or shutil.which("g++")
        if compiler is None:
            self.skipTest("no C++ compiler to check the folders with")
        with tempfile.TemporaryDirectory() as tmp:
            source = pathlib.Path(tmp) / "probe.cpp"
            source.write_text('#include "cc/cc.h"\n'
                              "int main() { cc_config_t c = CC_CONFIG_INIT; "
                              "return c.version == CC_VERSION_CODE ? 0 : 1; }\n")
            args = [compiler, "-fsyntax-only", str(source)] + ["-I" + d for d in dirs]
            proc = subprocess.run(args, capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_cc_include_dir_comes_first(self):
        with tempfile.TemporaryDirectory() as tmp:
            (pathlib.Path(tmp) / "cc").mkdir()
            (pathlib.Path(tmp) / "cc" / "cc.h").write_text("")
            (pathlib.Path(tmp) / "cc" / "cc_version.h").write_text("")
            os.environ["CC_INCLUDE_DIR"] = tmp
            try:
                self.assertEqual(_torch_build.include_dirs(helpers.libcc_path()), [tmp])
            finally:
                del os.environ["CC_INCLUDE_DIR"]

    def test_missing_version_header_is_explained(self):
        with tempfile.TemporaryDirectory() as tmp:
            lib = pathlib.Path(tmp) / "lib" / "libcc.so.0"
            lib.parent.mkdir()
            lib.write_bytes(b"")
            with self.assertRaises(cc.Error) as caught:
                _torch_build.include_dirs(str(lib))
        words = str(caught.exception)
        self.assertIn("cc_version.h (made by cc's build) was not found", words)
        self.assertIn("CC_INCLUDE_DIR", words)

    def test_sources_are_shipped(self):
        for path in _torch_build.sources():
            self.assertTrue(os.path.isfile(path), path)


# Where the extension's sources include torch; each becomes the stand-in.
TORCH_HEADERS = (
    "ATen/ATen.h", "ATen/core/ivalue.h", "ATen/core/jit_type.h", "ATen/cuda/CUDAEvent.h",
    "c10/cuda/CUDACachingAllocator.h", "c10/cuda/CUDAFunctions.h", "c10/cuda/CUDAGuard.h",
    "c10/cuda/CUDAStream.h", "c10/util/ArrayRef.h", "c10/util/Exception.h",
    "torch/csrc/distributed/c10d/Backend.hpp", "torch/csrc/distributed/c10d/Work.hpp",
)


class ExtensionSources(unittest.TestCase):
    """The backend's C++ sources (all but module.cpp, which is pybind11's)
    compile against torch_api_stub.hpp, which declares torch's Backend and
    Work virtuals as torch 2.11 does: an override whose signature drifted
    from torch's, a typo, or a call with the wrong arguments fails here
    rather than on the GPU machine."""

    def test_backend_sources_compile_against_torchs_declarations(self):
        compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
        if compiler is None:
            self.skipTest("no C++ compiler")
        stub = pathlib.Path(__file__).resolve().parent / "torch_api_stub.hpp"
        dirs = _torch_build.include_dirs(helpers.libcc_path())
        with tempfile.TemporaryDirectory() as tmp:
            for header in TORCH_HEADERS:
                path = pathlib.Path(tmp, header)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text('#include "%s"\n' % stub)
            for source in _torch_build.sources():
                if source.endswith("module.cpp"):
                    continue
                args = [compiler, "-std=c++17", "-fsyntax-only", "-I" + tmp, source]
                args += ["-I" + d for d in dirs]
                if source.endswith("backend.cpp") and "g++" in os.path.basename(
                        os.path.realpath(compiler)) + compiler:
                    args.append("-Wsuggest-override")
                proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
                self.assertEqual(proc.returncode, 0, "%s:\n%s" % (source, proc.stderr))
                if "-Wsuggest-override" in args:
                    self.check_overrides(proc.stderr)

    # Declared without `override` (so the extension builds against torch
    # releases that lack them), these must still override torch's virtuals:
    # gcc's -Wsuggest-override names each one that does.
    UNMARKED = ("supportsCoalescing", "supportsShrinking", "shrink", "shutdown", "abort")

    def check_overrides(self, stderr):
        for name in self.UNMARKED:
            self.assertRegex(stderr, r"CCBackend::%s\(.*can be marked override" % name,
                             "CCBackend::%s does not override torch's virtual" % name)


class WheelBuild(unittest.TestCase):
    """pip install --no-build-isolation ./python where bdist_wheel is missing
    (setuptools before 70.1 without the wheel package): one line saying what
    to install, instead of setuptools' "invalid command 'bdist_wheel'".
    setup.py runs against stand-ins for setuptools and wheel."""

    WORDS = ("cc: building a wheel needs setuptools 70.1+ or the wheel package; install one "
             "(pip install -U 'setuptools>=70.1', or pip install wheel) and run pip again")

    def run_setup(self, command, with_bdist_wheel):
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            (root / "setuptools").mkdir()
            (root / "setuptools" / "__init__.py").write_text(
                "def setup(**kwargs):\n    print('setup() called')\n")
            if with_bdist_wheel:  # as setuptools 70.1+ has it
                (root / "setuptools" / "command").mkdir()
                (root / "setuptools" / "command" / "__init__.py").write_text("")
                (root / "setuptools" / "command" / "bdist_wheel.py").write_text("")
            (root / "wheel").mkdir()  # the wheel package is not installed
            (root / "wheel" / "__init__.py").write_text("raise ImportError('no wheel here')\n")
            env = dict(os.environ, PYTHONPATH=tmp, CC_BUILD_TORCH="0")
            return subprocess.run([sys.executable, "setup.py", command, "--output-dir", tmp],
                                  cwd=str(helpers.PACKAGE_ROOT), env=env, capture_output=True,
                                  text=True, timeout=60)

    def test_without_bdist_wheel_pip_hears_what_to_install(self):
        for command in ("dist_info", "bdist_wheel", "editable_wheel"):
            proc = self.run_setup(command, with_bdist_wheel=False)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertEqual(proc.stderr, self.WORDS + "\n")
            self.assertNotIn("setup() called", proc.stdout)

    def test_with_bdist_wheel_or_without_a_wheel_to_build_setup_runs(self):
        proc = self.run_setup("bdist_wheel", with_bdist_wheel=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("setup() called", proc.stdout)
        proc = self.run_setup("egg_info", with_bdist_wheel=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("setup() called", proc.stdout)


if __name__ == "__main__":
    unittest.main()
