"""cc.Comm on a machine without a GPU: argument checks with Python's message,
environment errors naming the variable, CC_ERR_NO_DEVICE with libcc's message,
cc.group() keeping the thread's group nesting balanced."""

import contextlib
import os
import unittest

import cc
from cc import _config, _cuda

LAUNCH_VARIABLES = ("CC_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
                    "CC_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                    "SLURM_NTASKS", "CC_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                    "MPI_LOCALRANKID", "SLURM_LOCALID", "CC_MASTER_ADDR", "MASTER_ADDR",
                    "CC_MASTER_PORT", "MASTER_PORT", "CC_DEVICE", "CC_TIMEOUT_MS")


@contextlib.contextmanager
def launch_env(**values):
    saved = {k: os.environ.get(k) for k in LAUNCH_VARIABLES}
    for k in LAUNCH_VARIABLES:
        os.environ.pop(k, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def machine_has_gpu():
    return _cuda.driver() is not None


class FromEnv(unittest.TestCase):
    def failure(self, **env):
        with launch_env(**env):
            with self.assertRaises(cc.Error) as caught:
                cc.Comm.from_env(timeout_ms=2000)
        return caught.exception

    def test_missing_rank_names_the_variables(self):
        e = self.failure(WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
        self.assertIsInstance(e, cc.InvalidArgumentError)
        self.assertIn("cc_comm_init_from_env", str(e))
        self.assertIn("RANK", str(e))

    def test_malformed_rank_names_it(self):
        e = self.failure(RANK="one", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
        self.assertIsInstance(e, cc.InvalidArgumentError)
        self.assertIn("RANK", str(e))
        self.assertIn("one", str(e))

    def test_missing_world_size_names_it(self):
        e = self.failure(RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
        self.assertIsInstance(e, cc.InvalidArgumentError)
        self.assertIn("WORLD_SIZE", str(e))

    def test_missing_master_addr_names_it(self):
        e = self.failure(RANK="0", WORLD_SIZE="2", MASTER_PORT="29500")
        self.assertIsInstance(e, cc.InvalidArgumentError)
        self.assertIn("MASTER_ADDR", str(e))

    def test_malformed_master_port_names_it(self):
        e = self.failure(RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="port")
        self.assertIsInstance(e, cc.InvalidArgumentError)
        self.assertIn("MASTER_PORT", str(e))

    def test_complete_environment_without_gpu_is_no_device(self):
        if machine_has_gpu():
            self.skipTest("this machine has a CUDA driver: the gpu suite covers a real init")
        e = self.failure(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
        self.assertIsInstance(e, cc.NoDeviceError)
        self.assertEqual(e.code_name, "CC_ERR_NO_DEVICE")
        self.assertIn("no CUDA device is visible", str(e))


class Construction(unittest.TestCase):
    def test_no_device_is_libcc_words_at_once(self):
        if machine_has_gpu():
            self.skipTest("this machine has a CUDA driver: the gpu suite covers a real init")
        with launch_env():
            with self.assertRaises(cc.NoDeviceError) as caught:
                cc.Comm(0, 2, "127.0.0.1", 29500, timeout_ms=60000)
        words = str(caught.exception)
        self.assertRegex(words, r"rank 0\b.*host")  # who: the rank and its host
        self.assertIn("no CUDA device is visible", words)
        self.assertIn("CUDA_VISIBLE_DEVICES", words)

    def test_rank_out_of_range_is_libcc_words(self):
        with launch_env():
            with self.assertRaises(cc.InvalidArgumentError) as caught:
                cc.Comm(5, 2, "127.0.0.1", 29500)
        self.assertIn("5", str(caught.exception))

    def test_python_arguments_are_checked_in_words(self):
        cases = (
            (lambda: cc.Comm("0", 2, "127.0.0.1", 1), "rank must be an int, not '0'"),
            (lambda: cc.Comm(0, 2.0, "127.0.0.1", 1), "world_size must be an int"),
            (lambda: cc.Comm(0, 2, 127, 1), "master_addr must be a str"),
            (lambda: cc.Comm(0, 2, "h", "1"), "master_port must be an int"),
            (lambda: cc.Comm(0, 2, "h", 1, device=-2), "device=-2 is out of range"),
            (lambda: cc.Comm(0, 2, "h", 1, timeout_ms="5"), "timeout_ms must be an int"),
            (lambda: cc.Comm(0, 2, "h", 1, job_id=""), "job_id must be a non-empty str"),
            (lambda: cc.Comm(0, 2, "h", 1, rendezvous="sideways"),
             "rendezvous='sideways' is not one of 'embedded', 'external'"),
            (lambda: cc.Comm(0, 2, "h", 1, fast_allreduce="maybe"), "fast_allreduce='maybe'"),
        )
        for make, phrase in cases:
            with self.assertRaises(cc.InvalidArgumentError) as caught:
                make()
            self.assertIn(phrase, str(caught.exception))

    def test_config_struct_matches_cc_h(self):
        config = _config.make(device=1, timeout_ms=5, job_id="j", token="t",
                              rendezvous="external", heartbeat_ms=7, heartbeat_misses=3,
                              fast_allreduce="require", fast_allreduce_plan="ll:1M",
                              job_ttl_ms=0, tls_ca="ca.pem", tls_server_name="rdzv",
                              tls_cert="me.pem", tls_key="me.key", tls_client_ca="")
        # Four ints after job_id and token, the plan's pointer, one int and padding to the
        # pointers' 8-byte alignment, then the five TLS paths.
        self.assertEqual(config.size, 8 + 4 + 4 + 4 + 4 + 8 + 8 + 4 * 4 + 8 + 4 + 4 + 5 * 8)
        self.assertEqual(config.magic, 0xCC0C0F19)
        self.assertEqual((config.device, config.timeout_ms, config.job_id, config.token,
                          config.rendezvous, config.heartbeat_ms, config.heartbeat_misses,
                          config.fast_allreduce, config.fast_allreduce_plan, config.job_ttl_ms),
                         (1, 5, b"j", b"t", 2, 7, 3, 2, b"ll:1M", 0))
        # "" is kept (none, whatever CC_TLS_* say); None stays NULL (the variable decides)
        self.assertEqual((config.tls_ca, config.tls_server_name, config.tls_cert,
                          config.tls_key, config.tls_client_ca),
                         (b"ca.pem", b"rdzv", b"me.pem", b"me.key", b""))
        undefined = _config.make()
        self.assertEqual(undefined.device, -(2 ** 31))
        self.assertIsNone(undefined.job_id)
        self.assertIsNone(undefined.tls_ca)
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            _config.make(tls_ca=5)
        self.assertIn("tls_ca must be a str or a path", str(caught.exception))


class Groups(unittest.TestCase):
    def test_group_end_without_start_is_usage_words(self):
        api = cc._library.api()
        with self.assertRaises(cc.InvalidUsageError) as caught:
            api.check(api.cc_group_end())
        self.assertIn("no group is open on this thread", str(caught.exception))

    def test_groups_nest_and_end_even_when_the_body_raises(self):
        with cc.group():
            with cc.group():
                pass
        with self.assertRaises(KeyError):
            with cc.group():
                raise KeyError("body")
        api = cc._library.api()
        with self.assertRaises(cc.InvalidUsageError):  # balanced: nothing left open
            api.check(api.cc_group_end())


class RecoveryCalls(unittest.TestCase):
    """The recovery calls and cc_comm_timeout (which the torch backend's
    host wait reads), bound lazily: present in libcc or named when missing. Without a GPU
    there is no communicator, so a NULL one checks the binding's argument
    types reach libcc's own checks."""

    def call(self, name, *args):
        api = cc._library.api()
        if not api.has(name):
            with self.assertRaises(cc.MissingFunctionError) as caught:
                getattr(api, name)
            self.assertIn(name + " is not in the libcc loaded from", str(caught.exception))
            self.skipTest("the libcc under test has no %s yet (its absence is named, as "
                          "checked)" % name)
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            api.check(getattr(api, name)(None, *args))
        self.assertIn(name, str(caught.exception))

    def test_shrink(self):
        import ctypes
        self.call("cc_comm_shrink", 1000, ctypes.byref(ctypes.c_void_p()))

    def test_regrow(self):
        import ctypes
        self.call("cc_comm_regrow", 2, 1000, ctypes.byref(ctypes.c_void_p()))

    def test_generation(self):
        import ctypes
        self.call("cc_comm_generation", ctypes.byref(ctypes.c_int()))

    def test_failed_ranks(self):
        import ctypes
        ranks = (ctypes.c_int * 4)()
        self.call("cc_comm_failed_ranks", ranks, 4, ctypes.byref(ctypes.c_int()))

    def test_check(self):
        self.call("cc_comm_check")

    def test_timeout(self):
        import ctypes
        self.call("cc_comm_timeout", ctypes.byref(ctypes.c_int()))

    def test_dump_trace(self):
        self.call("cc_comm_dump_trace", b"/nonexistent")


class Reductions(unittest.TestCase):
    def test_op_names(self):
        from cc._comm import _op_code
        self.assertEqual([_op_code(o) for o in ("sum", "PROD", "product", "max", "min", "avg",
                                                 cc.SUM, cc.AVG)], [0, 1, 1, 2, 3, 4, 0, 4])
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            _op_code("xor")
        self.assertIn("op='xor' is not a reduction cc has", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
