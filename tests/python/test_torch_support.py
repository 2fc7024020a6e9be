"""The parts of cc.torch that need no torch: how a process group's ranks
agree on cc's rendezvous through torch's store, finding cc.h to build the
extension, and the backend's shutdown when cc refuses the destroy."""

import os
import pathlib
import re
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


# A libcc whose cc_comm_destroy refuses while the test says graphs live, as
# the real one does (CC_ERR_INVALID_USAGE, the communicator untouched).
FAKE_LIBCC = r"""
#include "cc/cc.h"
static int graphs, destroys;
static const char* last = "";
void fake_set_graphs(int n) { graphs = n; }
int fake_destroys(void) { return destroys; }
cc_result_t cc_comm_destroy(cc_comm_t comm) {
  (void)comm;
  ++destroys;
  last = graphs > 0 ? "cc_comm_destroy on rank 0 (host h): 1 CUDA graph(s) that captured this "
                      "communicator's calls are still alive" : "";
  return graphs > 0 ? CC_ERR_INVALID_USAGE : CC_SUCCESS;
}
cc_result_t cc_comm_timeout(cc_comm_t comm, int* timeout_ms) {
  (void)comm;
  *timeout_ms = 1000;
  return CC_SUCCESS;
}
const char* cc_last_error(void) { return last; }
const char* cc_result_string(cc_result_t r) { (void)r; return "fake"; }
"""
FAKE_DEFINES = {"cc_comm_destroy", "cc_comm_timeout", "cc_last_error", "cc_result_string"}

# The backend's communicator state (comm_state.cpp) against the fake libcc:
# a shutdown refused raises and keeps the handle; the destructor warns.
SHUTDOWN_DRIVER = r"""
#include <dlfcn.h>
#include <cstdio>
#include <stdexcept>
#include "comm_state.hpp"
int main(int, char** argv) {
  cc_torch::load(argv[1]);
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);  // the same handle
  auto set_graphs = reinterpret_cast<void (*)(int)>(dlsym(lib, "fake_set_graphs"));
  auto destroys = reinterpret_cast<int (*)()>(dlsym(lib, "fake_destroys"));
  cc_comm_t comm = reinterpret_cast<cc_comm_t>(0x1000);
  {
    cc_torch::CommState state(0, 2, cc_torch::Rendezvous{}, comm, 0);
    set_graphs(1);
    try {
      state.shutdown();
      std::printf("shutdown did not raise\n");
    } catch (const std::runtime_error& e) {
      std::printf("raised: %s\n", e.what());
    }
    std::printf("kept: %d\n", state.handle() == comm ? 1 : 0);
    set_graphs(0);
    state.shutdown();
    std::printf("after the graphs: handle %s, destroys %d\n",
                state.handle() == nullptr ? "null" : "kept", destroys());
  }
  std::printf("destroys after the destructor: %d\n", destroys());
  set_graphs(1);
  { cc_torch::CommState state(1, 2, cc_torch::Rendezvous{}, comm, 0); }
  std::printf("destructor returned, destroys %d\n", destroys());
  return 0;
}
"""


class ShutdownRefused(unittest.TestCase):
    """cc_comm_destroy refuses while CUDA graphs that captured the
    communicator's calls live: the backend's shutdown raises cc's message
    (DistBackendError, a RuntimeError) and keeps the communicator for a
    later shutdown; its destructor warns instead. comm_state.cpp runs
    against torch_api_stub.hpp and a fake libcc, no torch, no GPU."""

    def test_refused_shutdown_raises_and_keeps_the_communicator(self):
        cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
        cc_compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cxx is None or cc_compiler is None:
            self.skipTest("no C and C++ compiler")
        stub = pathlib.Path(__file__).resolve().parent / "torch_api_stub.hpp"
        dirs = ["-I" + d for d in _torch_build.include_dirs(helpers.libcc_path())]
        csrc = [s for s in _torch_build.sources()
                if os.path.basename(s) in ("comm_state.cpp", "cc_api.cpp")]
        self.assertEqual(len(csrc), 2, _torch_build.sources())
        # Every function the backend requires of libcc, so that load() takes the fake.
        api = pathlib.Path(csrc[0]).with_name("cc_api.cpp").read_text()
        required = re.findall(r'resolve\(handle, path, "(\w+)", &a\.\w+, true\)', api)
        self.assertIn("cc_comm_destroy", required)
        with tempfile.TemporaryDirectory() as tmp:
            for header in TORCH_HEADERS:
                path = pathlib.Path(tmp, header)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text('#include "%s"\n' % stub)
            fake = pathlib.Path(tmp, "fake.c")
            fake.write_text(FAKE_LIBCC)
            rest = pathlib.Path(tmp, "rest.c")  # never called: any signature will do
            rest.write_text("".join("int %s(void) { return 1; }\n" % name for name in required
                                    if name not in FAKE_DEFINES))
            lib = pathlib.Path(tmp, "libfakecc.so")
            self.compile([cc_compiler, "-shared", "-fPIC", "-o", str(lib), str(fake), str(rest)]
                         + dirs)
            driver = pathlib.Path(tmp, "driver.cpp")
            driver.write_text(SHUTDOWN_DRIVER)
            exe = pathlib.Path(tmp, "driver")
            self.compile([cxx, "-std=c++17", "-I" + tmp, "-I" + os.path.dirname(csrc[0]),
                          "-o", str(exe), str(driver)] + csrc + dirs + ["-ldl", "-pthread"])
            proc = subprocess.run([str(exe), str(lib)], capture_output=True, text=True,
                                  timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(proc.stdout.splitlines(), [
            "raised: cc_comm_destroy: cc_comm_destroy on rank 0 (host h): 1 CUDA graph(s) that "
            "captured this communicator's calls are still alive",
            "kept: 1",
            "after the graphs: handle null, destroys 2",
            "destroys after the destructor: 2",
            "destructor returned, destroys 3",
        ])
        self.assertRegex(proc.stderr, r"cc backend \(rank 1\): warning: the process group went "
                         r"away without its communicator, .* 1 CUDA graph\(s\) that captured")

    def compile(self, args):
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, " ".join(args) + ":\n" + proc.stderr)


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
