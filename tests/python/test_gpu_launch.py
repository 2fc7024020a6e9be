"""How the python gpu suite (tests/python/gpu/run.sh) launches its steps,
checked without a GPU: with a stand-in for Python and torch (gpu_stub/python,
which says it has STUB_GPUS GPUs) and for cc-run. With one GPU every step of
two or more ranks shares it, each rank its own host, and the step that needs
a GPU per rank is listed as skipped; with two GPUs the two-rank steps take
one GPU each and only the 4 and 8 ranks' steps share."""

import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
RUN = HERE / "gpu" / "run.sh"
STUB = HERE / "gpu_stub"


def run_suite(gpus, tmp):
    build = pathlib.Path(tmp, "build")
    (build / "tools").mkdir(parents=True)
    (build / "lib").mkdir()
    (build / "lib" / "libcc.so.0").touch()
    shutil.copy(STUB / "cc-run", build / "tools" / "cc-run")
    env = dict(os.environ, PYTHON=str(STUB / "python"), STUB_GPUS=str(gpus),
               PYTHON_GPU_QUICK="1", PYTHON_GPU_WORK=str(pathlib.Path(tmp, "work")),
               PYTHON_GPU_STEP_TIMEOUT="60")
    for name in ("CC_SHARE_GPU", "NCCL_HOSTID", "PYTHON_GPU_PACK_ONLY", "PYTHON_GPU_GDB"):
        env.pop(name, None)
    out = pathlib.Path(tmp, "out")
    proc = subprocess.run(["bash", str(RUN), str(build), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    logs = {p.stem: p.read_text() for p in (out / "logs").glob("*.log")}
    return proc, logs


class SuiteRun(unittest.TestCase):
    """The suite run once for the class, with GPUS stand-in GPUs."""
    GPUS = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cc-gpu-launch-")
        cls.proc, cls.logs = run_suite(cls.GPUS, cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def passed_with_skips(self, skipped):
        """The suite exited 0 and its last line counts `skipped` steps skipped; its stdout."""
        out = self.proc.stdout
        self.assertEqual(self.proc.returncode, 0, out + self.proc.stderr)
        self.assertRegex(out.splitlines()[-1],
                         r"^python gpu: \d+ passed, 0 failed, %d skipped$" % skipped)
        return out


class OneGpu(SuiteRun):
    GPUS = 1

    def test_summary_counts_the_skip_apart(self):
        out = self.passed_with_skips(1)
        self.assertIn("skipped comm-two: two_comms.py with cc's small all-reduce kernel: ", out)
        self.assertIn("needs one GPU per rank", out)
        self.assertNotIn("comm-two: passed", out)

    def test_cc_run_steps_share_the_gpu(self):
        for step in ("comm-ops", "comm-two-no-fast-allreduce"):
            self.assertIn("cc-run -n 2 --timeout-ms 60000 --share-gpu --", self.logs[step])

    def test_torchrun_steps_are_one_host_per_rank(self):
        for step, ranks in (("torch-ops-cc", 2), ("torch-ops-cpu-gloo-cuda-cc", 2),
                            ("torch-ops-cc-4ranks", 4), ("torch-ops-cc-8ranks", 8),
                            ("seed-ddp-nccl", 2), ("seed-allreduce-torchrun", 2)):
            log = self.logs[step]
            nodes = re.findall(r"^torchrun node (\d+) of (\d+), 1 per node: CC_SHARE_GPU=1 "
                               r"NCCL_HOSTID=(\S+) NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1$", log, re.M)
            self.assertEqual(sorted(int(n) for n, _, _ in nodes), list(range(ranks)), log)
            self.assertEqual({int(of) for _, of, _ in nodes}, {ranks}, log)
            self.assertEqual(len({host for _, _, host in nodes}), ranks, log)
            for r in range(ranks):
                self.assertIn("rank %d runs " % r, log)
                self.assertRegex(log, r"rank %d runs .*: CC_SHARE_GPU=1 LOCAL_RANK=0" % r)

    def test_seed_examples_see_the_one_gpu(self):
        for how in ("torchrun", "byhand"):
            log = self.logs["seed-broadcast-" + how]
            self.assertIn("Rank 1 after broadcast: tensor([1., 2., 3.], device='cuda:0')", log)
            self.assertIn("seed-broadcast-%s: passed" % how, log)
        self.assertRegex(self.logs["seed-allreduce-byhand"],
                         r"rank 1 runs .*seed_entry.py seed_allreduce: CC_SHARE_GPU=1 LOCAL_RANK=0")

    def test_killed_rank_steps_share_the_gpu(self):
        for step, ranks, victim in (("peer-failure-victim-1", 2, 1),
                                    ("peer-failure-4ranks-victim-2", 4, 2),
                                    ("peer-failure-8ranks-victim-5", 8, 5)):
            self.assertRegex(self.logs[step], r"peer_failure.py --ranks %d --victim %d: "
                             r"CC_SHARE_GPU=1" % (ranks, victim))


class TwoGpus(SuiteRun):
    GPUS = 2

    def test_two_ranks_take_a_gpu_each(self):
        out = self.passed_with_skips(0)
        self.assertIn("comm-two: passed", out)
        self.assertNotIn("--share-gpu", self.logs["comm-ops"])
        self.assertIn("torchrun node 0 of 1, 2 per node: CC_SHARE_GPU= ", self.logs["torch-ops-cc"])
        self.assertIn("Rank 1 after broadcast: tensor([1., 2., 3.], device='cuda:1')",
                      self.logs["seed-broadcast-torchrun"])
        self.assertRegex(self.logs["peer-failure-victim-1"], r"--victim 1: CC_SHARE_GPU= ")

    def test_more_ranks_than_gpus_share(self):
        self.assertIn("torchrun node 7 of 8, 1 per node: CC_SHARE_GPU=1 ",
                      self.logs["torch-ops-cc-8ranks"])
        self.assertRegex(self.logs["peer-failure-4ranks-victim-2"], r"--victim 2: CC_SHARE_GPU=1 ")


if __name__ == "__main__":
    unittest.main()
