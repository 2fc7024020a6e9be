"""cc.torch's build on first use, without torch: the message it prints before a
build, and the lock that lets many ranks of one node import it together and
build once. The build step is a stub that records when it runs."""

import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

from cc import _torch_build

import helpers

RANKS = 8

# One rank: loads through load_locked with a stub that fails if another load
# runs at the same time (its marker file exists), and counts as a build only
# when no earlier one finished (the stub plays torch's cache).
RANK = textwrap.dedent("""
    import os, sys, time
    from cc import _torch_build
    build_dir, key = sys.argv[1], sys.argv[2]
    def load():
        busy = os.path.join(build_dir, "busy")
        fd = os.open(busy, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # fails on overlap
        print("LOADING", file=sys.stderr, flush=True)
        try:
            built = os.path.join(build_dir, "built")
            if not os.path.exists(built):
                time.sleep(0.3)  # long enough for the others to reach the lock
                with open(os.path.join(build_dir, "builds"), "a") as f:
                    f.write("%d\\n" % os.getpid())
                open(built, "w").close()
            return "module"
        finally:
            os.close(fd)
            os.unlink(busy)
    print(_torch_build.load_locked(build_dir, key, load, "BUILDING-WORDS"))
""")


def run_ranks(build_dir, key, count):
    procs = [subprocess.Popen([sys.executable, "-c", RANK, build_dir, key],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=str(helpers.PACKAGE_ROOT))
             for _ in range(count)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)  # a generous bound on "no hang"
        results.append((p.returncode, out, err))
    return results


class BuildWords(unittest.TestCase):
    def test_words_name_torch_and_the_install_command(self):
        words = _torch_build.building_words("2.5.1+cu124")
        self.assertEqual(
            words, "cc.torch: building the extension against torch 2.5, about a minute; "
                   "pip install --no-build-isolation ./python builds it once")

    def test_key_follows_torch_and_headers(self):
        with tempfile.TemporaryDirectory() as tmp:
            (pathlib.Path(tmp) / "cc").mkdir()
            header = pathlib.Path(tmp) / "cc" / "cc.h"
            header.write_text("/* one */\n")
            first = _torch_build.build_key("2.5.1", [tmp])
            self.assertEqual(first, _torch_build.build_key("2.5.1", [tmp]))
            self.assertNotEqual(first, _torch_build.build_key("2.6.0", [tmp]))
            header.write_text("/* two */\n")
            self.assertNotEqual(first, _torch_build.build_key("2.5.1", [tmp]))


class OneBuildPerNode(unittest.TestCase):
    def test_eight_ranks_build_once_and_one_says_so(self):
        with tempfile.TemporaryDirectory() as build_dir:
            results = run_ranks(build_dir, "key-1", RANKS)
            for rc, out, err in results:
                self.assertEqual(rc, 0, err)
                self.assertEqual(out.strip(), "module")
            builds = pathlib.Path(build_dir, "builds").read_text().split()
            self.assertEqual(len(builds), 1, builds)
            said = [err for _, _, err in results if "BUILDING-WORDS" in err]
            self.assertEqual(len(said), 1, [err for _, _, err in results])
            # The message comes before the build, on the rank that built.
            stamp = pathlib.Path(build_dir, _torch_build.STAMP_NAME).read_text().strip()
            self.assertEqual(stamp, "key-1")

    def test_a_built_folder_loads_silently_and_a_new_key_builds_again(self):
        with tempfile.TemporaryDirectory() as build_dir:
            run_ranks(build_dir, "key-1", 1)
            (rc, out, err), = run_ranks(build_dir, "key-1", 1)
            self.assertEqual(rc, 0, err)
            self.assertNotIn("BUILDING-WORDS", err)
            self.assertNotIn("waiting", err)
            (rc, out, err), = run_ranks(build_dir, "key-2", 1)
            self.assertEqual(rc, 0, err)
            self.assertIn("BUILDING-WORDS", err)

    def test_a_waiting_rank_says_what_it_waits_for(self):
        with tempfile.TemporaryDirectory() as build_dir:
            import fcntl
            lock_path = os.path.join(build_dir, _torch_build.LOCK_NAME)
            with open(lock_path, "a+") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                proc = subprocess.Popen([sys.executable, "-c", RANK, build_dir, "key-1"],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        cwd=str(helpers.PACKAGE_ROOT))
                line = proc.stderr.readline()  # printed before it blocks
                self.assertIn("another process is building the extension; waiting for it", line)
                self.assertIn(lock_path, line)
                fcntl.flock(lock, fcntl.LOCK_UN)
            out, err = proc.communicate(timeout=120)
            self.assertEqual(proc.returncode, 0, err)
            self.assertEqual(out.strip(), "module")

    def test_a_killed_builder_leaves_no_lock_behind(self):
        with tempfile.TemporaryDirectory() as build_dir:
            hang = RANK.replace("time.sleep(0.3)", "time.sleep(600)")
            proc = subprocess.Popen([sys.executable, "-c", hang, build_dir, "key-1"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    cwd=str(helpers.PACKAGE_ROOT))
            self.assertIn("BUILDING-WORDS", proc.stderr.readline())
            self.assertEqual(proc.stderr.readline().strip(), "LOADING")  # in load(), lock held
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
            os.unlink(os.path.join(build_dir, "busy"))  # the stub's own marker, left by the kill
            (rc, out, err), = run_ranks(build_dir, "key-1", 1)
            self.assertEqual(rc, 0, err)
            self.assertIn("BUILDING-WORDS", err)  # no stamp was written: it builds
            self.assertEqual(out.strip(), "module")


if __name__ == "__main__":
    unittest.main()
