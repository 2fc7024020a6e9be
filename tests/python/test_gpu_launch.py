"""How the python gpu suite (tests/python/gpu/run.sh) launches its steps,
checked without a GPU: with a stand-in for Python and torch (gpu_stub/python,
which says it has STUB_GPUS GPUs) and for cc-run. With one GPU every step of
two or more ranks shares it, each rank its own host, and the step that needs
a GPU per rank is listed as skipped; with two GPUs the two-rank steps take
one GPU each and only the 4 and 8 ranks' steps share."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
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
                            ("seed-ddp-nccl", 2), ("seed-allreduce-torchrun", 2),
                            ("cuda-graph-nccl", 2), ("cuda-graph-cc", 2),
                            ("real-clients-fsdp2-nccl", 2), ("real-clients-fsdp2-cc", 2),
                            ("real-clients-tp-cc", 2), ("real-clients-compiled-cc", 2)):
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

    def test_torchs_distributed_test_runs_at_two_ranks(self):
        log = self.logs["distributed-test-2ranks"]
        self.assertRegex(log, r"distributed_test.py --ranks 2 --budget 300 --logs \S+/logs")
        self.assertIn("distributed-test-2ranks: passed", log)
        self.assertNotIn("distributed-test-4ranks", self.logs)  # not in the quick run

    def test_killed_rank_steps_share_the_gpu(self):
        for step, ranks, victim in (("peer-failure-victim-1", 2, 1),
                                    ("peer-failure-4ranks-victim-2", 4, 2),
                                    ("peer-failure-8ranks-victim-5", 8, 5)):
            self.assertRegex(self.logs[step], r"peer_failure.py --ranks %d --victim %d: "
                             r"CC_SHARE_GPU=1" % (ranks, victim))


    def test_shrink_group_steps_share_the_gpu(self):
        for step, flag in (("shrink-group-4ranks-victim-2", ""),
                           ("shrink-group-4ranks-victim-2-abort", " --abort")):
            self.assertRegex(self.logs[step], r"shrink_group.py --ranks 4 --victim 2%s: "
                             r"CC_SHARE_GPU=1" % flag)
            self.assertIn("%s: passed" % step, self.logs[step])

    def test_real_clients_compare_each_case(self):
        for case in ("fsdp2", "tp", "compiled"):
            self.assertRegex(self.logs["real-clients-" + case],
                             r"real_clients.py --compare \S+/real-clients-%s-nccl.log "
                             r"\S+/real-clients-%s-cc.log" % (case, case))


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


# A stand-in for distributed_test_ranks.py: writes the results STUB_RESULTS
# gives its backend ({"backend": {"test": "PASS", ...}}), each with the
# variables that place its ranks as its "why", and with CC_DT_DISCOVER=1 a
# test of its own after the named ones; with STUB_HANG=backend, that backend
# hangs in its second test (its pid in STUB_PIDS).
RANKS_STUB = textwrap.dedent("""
    import json, os, sys, time
    backend = os.environ["CC_DT_BACKEND"]
    spec = json.loads(os.environ["STUB_RESULTS"])[backend]
    names = os.environ["CC_DT_TESTS"].split(",")
    if os.environ.get("CC_DT_DISCOVER") == "1":
        names.append("test_discovered")
    placed = " ".join("%s=%s" % (k, os.environ.get(k, "-")) for k in (
        "BACKEND", "WORLD_SIZE", "CC_SHARE_GPU", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE",
        "NCCL_HOSTID"))
    results = {}
    def save():
        with open(os.environ["CC_DT_RESULTS"], "w") as f:
            json.dump({"backend": backend, "tests": names, "results": results}, f)
    for i, name in enumerate(names):
        if i == 1 and os.environ.get("STUB_HANG") == backend:
            results[name] = {"status": "RUNNING", "seconds": 0.0, "why": ""}
            save()
            with open(os.environ["STUB_PIDS"], "a") as f:
                f.write("%d\\n" % os.getpid())
            time.sleep(600)
        results[name] = {"status": spec.get(name, "SKIP"), "seconds": 1.0, "why": placed}
        save()
""")

DT = HERE / "gpu" / "distributed_test.py"


class DistributedTestComparison(unittest.TestCase):
    """distributed_test.py's side-by-side run and comparison, with a stand-in
    for the backend runs (torch is not needed)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cc-dt-")
        self.stub = pathlib.Path(self.tmp, "ranks_stub.py")
        self.stub.write_text(RANKS_STUB)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_dt(self, results, tests, *args, hang=None):
        env = dict(os.environ, CC_DT_RANKS_SCRIPT=str(self.stub), STUB_RESULTS=json.dumps(results),
                   STUB_PIDS=str(pathlib.Path(self.tmp, "pids")), NCCL_HOSTID="outer")
        if hang:
            env["STUB_HANG"] = hang
        logs = pathlib.Path(self.tmp, "logs")
        return subprocess.run([sys.executable, str(DT), "--tests", ",".join(tests),
                               "--logs", str(logs)] + list(args),
                              env=env, capture_output=True, text=True, timeout=120)

    def test_a_test_that_passes_on_nccl_only_fails_the_run_unless_a_reason_is_named(self):
        proc = self.run_dt({"nccl": {"test_a": "PASS", "test_b": "PASS", "test_get_backend": "PASS"},
                            "cc": {"test_a": "PASS", "test_b": "FAIL"}},
                           ["test_a", "test_b", "test_get_backend"])
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        lines = proc.stdout.splitlines()
        self.assertEqual(lines[-1], "distributed test: nccl 3 passed, cc 1 passed, "
                                    "only-nccl: [test_b, test_get_backend]")
        self.assertIn("  only-nccl test_b: NO REASON NAMED", lines)
        self.assertIn("  only-nccl test_get_backend: asserts the backend's name: "
                      "dist.get_backend() is \"cc\", not \"nccl\"", lines)
        self.assertRegex(proc.stdout, r"test_b +nccl PASS +cc FAIL")
        self.assertRegex(proc.stdout, r"test_get_backend +nccl PASS +cc SKIP")

    def test_only_named_reasons_left_passes_and_both_backends_run_alike(self):
        proc = self.run_dt({"nccl": {"test_a": "PASS", "test_get_backend": "PASS"},
                            "cc": {"test_a": "PASS"}},
                           ["test_a", "test_get_backend"], "--ranks", "4")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(proc.stdout.splitlines()[-1], "distributed test: nccl 2 passed, cc 1 "
                         "passed, only-nccl: [test_get_backend]")
        placed = {}
        for backend in ("nccl", "cc"):
            data = json.loads(pathlib.Path(self.tmp, "logs", "distributed-test-4ranks-%s.json"
                                           % backend).read_text())
            placed[backend] = data["results"]["test_a"]["why"]
        # The same placement for both: torch's gating sees "nccl", each rank
        # names its own NCCL host (not the caller's), NCCL over sockets.
        self.assertEqual(placed["nccl"], placed["cc"])
        self.assertEqual(placed["cc"], "BACKEND=nccl WORLD_SIZE=4 CC_SHARE_GPU=1 "
                         "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_HOSTID=-")

    def test_by_default_the_named_tests_run_then_the_ones_found(self):
        proc = subprocess.run(
            [sys.executable, str(DT), "--logs", str(pathlib.Path(self.tmp, "logs"))],
            env=dict(os.environ, CC_DT_RANKS_SCRIPT=str(self.stub), STUB_RESULTS=json.dumps(
                {"nccl": {"test_gather_cuda": "PASS", "test_discovered": "PASS"},
                 "cc": {"test_gather_cuda": "PASS", "test_discovered": "PASS"}})),
            capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        rows = re.findall(r"^  (test_\w+) +nccl", proc.stdout, re.M)
        self.assertEqual(rows[0], "test_gather_cuda")  # the operations cc added come first
        self.assertEqual(rows[-1], "test_discovered")
        self.assertEqual(proc.stdout.splitlines()[-1],
                         "distributed test: nccl 2 passed, cc 2 passed, only-nccl: []")

    def test_a_hung_backend_is_stopped_at_the_budget(self):
        # cc hangs in test_b: a failure; it never reaches test_c: not counted.
        proc = self.run_dt({"nccl": {"test_a": "PASS", "test_b": "PASS", "test_c": "PASS"},
                            "cc": {"test_a": "PASS", "test_b": "PASS", "test_c": "PASS"}},
                           ["test_a", "test_b", "test_c"], "--budget", "2", "--per-test", "1",
                           hang="cc")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("distributed test: cc still running after", proc.stdout)
        self.assertRegex(proc.stdout, r"test_b +nccl PASS +cc FAIL")
        self.assertRegex(proc.stdout, r"test_c +nccl PASS +cc NOT RUN")
        self.assertIn("  cc FAIL test_b: still running when the run's budget ended", proc.stdout)
        self.assertIn("  passed on nccl, not reached on cc in the budget: [test_c]", proc.stdout)
        self.assertEqual(proc.stdout.splitlines()[-1],
                         "distributed test: nccl 3 passed, cc 1 passed, only-nccl: [test_b]")
        pid = int(pathlib.Path(self.tmp, "pids").read_text().split()[0])
        with self.assertRaises(ProcessLookupError):  # stopped, not left behind
            os.kill(pid, 0)


if __name__ == "__main__":
    unittest.main()
