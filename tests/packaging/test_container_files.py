"""packaging/docker and packaging/compose, checked without a Docker engine:
the Dockerfile builds through the tested scripts and copies what `meson
install` installs; the compose file parses (python3-yaml) and describes the
README's two-host story, host network and bridge, with names cc reads and
the NAT message cc prints.

Usage: test_container_files.py SOURCE_ROOT BUILD_ROOT (exit 77 without yaml)."""

import json
import os
import re
import subprocess
import sys
import unittest

SOURCE, BUILD = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed; the compose file is not checked")
    sys.exit(77)


def read(*parts):
    with open(os.path.join(SOURCE, *parts)) as f:
        return f.read()


def instructions(text):
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    out, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            word, _, rest = current.strip().partition(" ")
            out.append((word.upper(), rest))
            current = ""
    return out


def installed():
    """Paths `meson install` installs, relative to the prefix."""
    r = subprocess.run(["meson", "introspect", BUILD, "--installed", "--buildoptions"],
                       capture_output=True, text=True, check=True)
    docs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    if len(docs) == 1:  # one JSON object holding both answers
        docs = [docs[0]["installed"], docs[0]["buildoptions"]]
    files, options = docs
    prefix = next(o["value"] for o in options if o["name"] == "prefix")
    return {os.path.relpath(p, prefix) for p in files.values()}


class Dockerfile(unittest.TestCase):
    def setUp(self):
        self.steps = instructions(read("packaging", "docker", "Dockerfile"))
        self.stages = [i for i, (w, _) in enumerate(self.steps) if w == "FROM"]

    def stage(self, n):
        end = self.stages[n + 1] if n + 1 < len(self.stages) else len(self.steps)
        return self.steps[self.stages[n]:end]

    def test_two_stages_on_cuda_images(self):
        self.assertEqual(len(self.stages), 2)
        build_from = self.stage(0)[0][1]
        run_from = self.stage(1)[0][1]
        self.assertRegex(build_from, r"^nvidia/cuda:\S*-devel-\S* AS build$")
        self.assertRegex(run_from, r"^nvidia/cuda:\S*-runtime-\S*")

    def test_the_build_runs_the_tested_scripts_in_order(self):
        runs = [rest for w, rest in self.stage(0) if w == "RUN"]
        called = [m for r in runs for m in re.findall(r"scripts/[\w.-]+", r)]
        self.assertEqual(called, ["scripts/install-deps.sh", "scripts/build.sh"])
        for script in called:
            path = os.path.join(SOURCE, script)
            self.assertTrue(os.access(path, os.X_OK), script + " is missing or not executable")
        self.assertTrue(any("libnccl-dev" in r for r in runs), "no NCCL from apt in the build")
        self.assertTrue(any("meson install -C /src/build --destdir /stage" in r for r in runs))
        self.assertTrue(any("--prefix=/usr/local" in r for r in runs))
        copies = [rest for w, rest in self.stage(0) if w == "COPY"]
        self.assertEqual(copies, [". /src"])

    def test_the_runtime_gets_the_installed_tree_and_the_examples_on_path(self):
        steps = self.stage(1)
        copies = [rest for w, rest in steps if w == "COPY"]
        self.assertEqual(copies, ["--from=build /stage/usr/local/ /usr/local/"])
        runs = " ".join(rest for w, rest in steps if w == "RUN")
        self.assertIn("libnccl2", runs)
        self.assertIn("ldconfig", runs)
        env = " ".join(rest for w, rest in steps if w == "ENV")
        files = installed()
        for tool in ("cc-run", "cc-doctor", "cc-bench", "cc-rendezvous"):
            self.assertIn("bin/" + tool, files)
        allreduce = next(f for f in files if f.endswith("/allreduce"))
        self.assertIn("PATH=/usr/local/%s:" % os.path.dirname(allreduce), env)
        cmd = json.loads(next(rest for w, rest in steps if w == "CMD"))
        self.assertIn("bin/" + cmd[0], files)
        self.assertTrue(any(f.endswith("lib/x86_64-linux-gnu/libcc.so") or f.endswith("/libcc.so")
                            for f in files), "libcc.so is not installed")

    def test_the_context_leaves_out_build_trees(self):
        ignored = read(".dockerignore").split()
        self.assertIn("build", ignored)
        self.assertIn(".git", ignored)


class Compose(unittest.TestCase):
    def setUp(self):
        self.doc = yaml.safe_load(read("packaging", "compose", "compose.yaml"))
        self.services = self.doc["services"]

    def test_two_hosts_two_variants(self):
        self.assertEqual(sorted(self.services), ["rank0", "rank0-bridge", "rank1", "rank1-bridge"])
        for name, svc in self.services.items():
            bridge = name.endswith("-bridge")
            self.assertEqual(svc["profiles"], ["bridge" if bridge else "host"], name)
            if bridge:
                self.assertNotIn("network_mode", svc, name)
            else:
                self.assertEqual(svc["network_mode"], "host", name)
            gpus = svc["deploy"]["resources"]["reservations"]["devices"]
            self.assertEqual(gpus, [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}])

    def test_the_ranks_environment(self):
        for name, svc in self.services.items():
            env = svc["environment"]
            self.assertEqual(env["RANK"], name[4], name)
            self.assertEqual(env["WORLD_SIZE"], "2")
            self.assertEqual(env["LOCAL_RANK"], "0")
            self.assertEqual(env["MASTER_ADDR"], "${MASTER_ADDR:-10.10.10.2}")
            self.assertEqual(env["MASTER_PORT"], "12345")
            secret = svc["secrets"][0]
            self.assertEqual(env["CC_RENDEZVOUS_TOKEN_FILE"], "/run/secrets/" + secret)
            self.assertIn(secret, self.doc["secrets"])
            self.assertEqual(svc["command"], ["train_ddp"])
        # Rank 0 hosts the rendezvous: on the bridge its port is published.
        self.assertEqual(self.services["rank0-bridge"]["ports"], ["12345:12345"])
        self.assertNotIn("ports", self.services["rank1-bridge"])

    def test_every_variable_is_one_cc_reads(self):
        readme = read("README.md")
        for svc in self.services.values():
            for var in svc["environment"]:
                self.assertIn("`%s`" % var, readme, var + " is not in the README's Environment table")

    def test_the_bridge_story_quotes_words_cc_prints(self):
        words = read("rendezvous", "server_core", "words.cpp")
        comments = " ".join(line.strip().lstrip("#").strip()
                            for line in read("packaging", "compose", "compose.yaml").splitlines()
                            if line.strip().startswith("#"))
        for quoted in ("a NAT or a Docker bridge sits between them",
                       "Run the containers with --network host, or set NCCL_SOCKET_IFNAME"):
            self.assertIn(quoted, comments)
            self.assertIn(quoted, words)


if __name__ == "__main__":
    unittest.main(verbosity=2)
