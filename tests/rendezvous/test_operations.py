"""Operating cc-rendezvous as a user would: /metrics scraped with urllib while
jobs join, fail and leave; the metrics port refusing everything but GET
/metrics and surviving 1000 garbage requests; `cc-rendezvous status` naming a
stopped rank as behind and a killed one as failed (host and pid), against the
daemon and against cc-run's server; a token rotated by SIGHUP.

Run by meson (suite rendezvous) as `python3 -m unittest test_operations.CLASS`
with CC_RENDEZVOUS_BIN, FAILURE_MEMBER, CC_RUN_BIN and STORE_CLIENT set."""

import json
import os
import random
import signal
import socket
import subprocess
import time
import unittest

from ops_helpers import HOST, CC_RUN, Processes, http, member_bin, wait_for

TOKEN = "operations-test-token"


class Metrics(unittest.TestCase):
    def setUp(self):
        self.p = Processes()
        self.addCleanup(self.p.end)

    def test_counters_follow_jobs_that_join_fail_and_leave(self):
        d = self.p.daemon("--metrics", "127.0.0.1:0", "--max-jobs", "1", token=TOKEN)
        self.assertTrue(d.metrics_at.startswith("127.0.0.1:"))
        m = d.scrape()
        self.assertEqual(m['cc_rendezvous_build_info{version="0.1.0",protocol="1",nccl="none"}'], 1)
        self.assertEqual(m["cc_rendezvous_connections_open"], 0)
        self.assertEqual(m["cc_rendezvous_jobs"], 0)

        # Three ranks join; two keep no watch, so only the one killed fails.
        ranks = [self.p.member(d.port, "train", r, 3, "--no-watch", token=TOKEN) for r in range(3)]
        for r in ranks:
            r.expect("READY")
        m = d.scrape()
        self.assertEqual(m["cc_rendezvous_joins_total"], 3)
        self.assertEqual(m['cc_rendezvous_generations_total{result="completed"}'], 1)
        self.assertEqual(m['cc_rendezvous_job_members{job="train",state="member"}'], 3)
        self.assertEqual(m["cc_rendezvous_connections_open"], 3)
        self.assertEqual(m["cc_rendezvous_jobs"], 1)
        self.assertGreater(m["cc_rendezvous_received_bytes_total"], 0)
        sent = m["cc_rendezvous_sent_bytes_total"]
        self.assertGreater(sent, 0)

        # A wrong token, a stranger's bytes, a second job over --max-jobs 1.
        wrong = self.p.member(d.port, "train", 5, 6, token="not-the-token")
        self.assertIn("refused our token", wrong.expect("ERROR"))
        with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            s.recv(4096)
        other = self.p.member(d.port, "other", 0, 1, token=TOKEN)
        self.assertIn("limit of 1 jobs", other.expect("ERROR"))
        m = d.scrape()
        self.assertEqual(m["cc_rendezvous_auth_refusals_total"], 1)
        self.assertEqual(m['cc_rendezvous_frame_errors_total{kind="bad_magic"}'], 1)
        self.assertEqual(m['cc_rendezvous_limits_hit_total{limit="max_jobs"}'], 1)
        self.assertEqual(m['cc_rendezvous_failures_announced_total{cause="disconnect"}'], 0)

        # Rank 2 is killed, rank 1 aborts, rank 0 leaves cleanly.
        ranks[2].kill()
        wait_for("the killed rank to be announced", lambda: d.scrape()[
            'cc_rendezvous_failures_announced_total{cause="disconnect"}'] == 1)
        ranks[1].say("abort out of memory")
        ranks[1].expect("ABORTED")
        ranks[0].say("leave")
        ranks[0].expect("LEFT")
        m = wait_for("rank 0's leave", lambda: (lambda s: s if s[
            "cc_rendezvous_leaves_total"] == 1 else None)(d.scrape()))
        self.assertEqual(m['cc_rendezvous_failures_announced_total{cause="abort"}'], 1)
        self.assertEqual(m['cc_rendezvous_failures_announced_total{cause="heartbeat"}'], 0)
        self.assertEqual(m['cc_rendezvous_job_members{job="train",state="member"}'], 1)
        self.assertGreater(m["cc_rendezvous_sent_bytes_total"], sent)

        # The last one goes: the job is forgotten, no connection is left.
        ranks[1].kill()
        m = wait_for("the job to be forgotten", lambda: (lambda s: s if s[
            "cc_rendezvous_jobs"] == 0 else None)(d.scrape()))
        self.assertEqual(m["cc_rendezvous_connections_open"], 0)
        self.assertNotIn('cc_rendezvous_job_members{job="train",state="member"}', m)
        self.assertEqual(m['cc_rendezvous_failures_announced_total{cause="abort"}'], 1)
        self.assertGreaterEqual(m['cc_rendezvous_metrics_requests_total{result="served"}'], 6)

    def test_the_store_gauges_its_limit_and_a_job_that_expires(self):
        d = self.p.daemon("--metrics", "127.0.0.1:0", "--job-ttl", "3s", "--max-total-bytes", "1K")

        def store(job, *args):
            return subprocess.run([os.environ["STORE_CLIENT"], str(d.port), job] + list(args),
                                  capture_output=True, text=True, timeout=60)

        # 11 bytes, and the 128 every key counts for what it costs the server
        self.assertEqual(store("kept", "set", "k", "0123456789").returncode, 0)
        m = d.scrape()
        self.assertEqual(m["cc_rendezvous_store_keys"], 1)
        self.assertEqual(m["cc_rendezvous_store_bytes"], 139)
        self.assertEqual(m["cc_rendezvous_store_bytes_limit"], 1024)
        self.assertEqual(m["cc_rendezvous_jobs"], 1)
        rc, out, err = d.status()
        self.assertEqual(rc, 0, err)
        self.assertIn("; store 139 B of 1.0 KiB", out)
        self.assertRegex(out, r"job 'kept': no connection; 1 key \(139 B\) kept [0-3] s more "
                              r"\(job TTL\)")
        self.assertEqual(m["cc_rendezvous_jobs_without_connection"], 1)

        big = store("big", "set", "k", "x" * 2000)
        self.assertEqual(big.returncode, 1)
        self.assertIn("--max-total-bytes", big.stderr)
        m = wait_for("the kept job to expire", lambda: (lambda s: s if s[
            "cc_rendezvous_jobs_expired_total"] == 1 else None)(d.scrape()), timeout=20)
        self.assertEqual(m["cc_rendezvous_keys_expired_total"], 1)
        self.assertEqual(m["cc_rendezvous_store_bytes"], 0)
        self.assertEqual(m["cc_rendezvous_jobs"], 0)
        self.assertEqual(m['cc_rendezvous_limits_hit_total{limit="max_total_bytes"}'], 1)

    def test_only_get_metrics_is_answered(self):
        d = self.p.daemon("--metrics", "0")
        self.assertTrue(d.metrics_at.startswith("127.0.0.1:"), d.metrics_at)  # loopback by default
        at = d.metrics_at
        self.assertEqual(http(at, "GET", "/metrics")[0], 200)
        for method, path, code in [("POST", "/metrics", 405), ("PUT", "/metrics", 405),
                                   ("DELETE", "/metrics", 405), ("HEAD", "/metrics", 405),
                                   ("GET", "/", 404), ("GET", "/metrics/", 404),
                                   ("GET", "/metrics?x=1", 404), ("GET", "/../etc/passwd", 404)]:
            status, body = http(at, method, path)
            self.assertEqual(status, code, "%s %s" % (method, path))
            if method != "HEAD":
                self.assertIn("only GET /metrics is served", body)
        status, _ = http(at, "POST", "/metrics", body=b"x" * 100)
        self.assertIn(status, (400, 405))
        m = d.scrape()
        self.assertEqual(m['cc_rendezvous_metrics_requests_total{result="refused"}'], 9)

    def test_garbage_leaves_the_daemon_serving(self):
        d = self.p.daemon("--metrics", "127.0.0.1:0")
        host, port = d.metrics_at.rsplit(":", 1)
        rng = random.Random(16)
        kinds = [
            lambda: bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))),
            lambda: b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n",  # header over 8 KiB
            lambda: b"GET /metrics HTTP/9.9\r\n\r\n",
            lambda: b"\r\n\r\n",
            lambda: b"BREW /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
            lambda: b"GET /metrics HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
            lambda: b"POST /metrics HTTP/1.1\r\nContent-Length: 1000000\r\n\r\nabc",
            lambda: b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ]
        start = time.monotonic()
        for i in range(1000):
            with socket.create_connection((host, int(port)), timeout=5) as s:
                s.settimeout(5)
                try:
                    s.sendall(kinds[i % len(kinds)]())
                    s.shutdown(socket.SHUT_WR)
                    while s.recv(65536):
                        pass
                except OSError:  # reset, closed first or timed out: refused all the same
                    pass
            self.assertLess(time.monotonic() - start, 120, "1000 garbage requests took too long")
        self.assertTrue(d.alive())
        m = d.scrape()
        self.assertGreaterEqual(m['cc_rendezvous_metrics_requests_total{result="refused"}'], 1000)
        rc, out, err = d.status()
        self.assertEqual(rc, 0, err)  # the rendezvous port still serves too

    def test_half_requests_held_open_do_not_hold_a_scrape(self):
        d = self.p.daemon("--metrics", "127.0.0.1:0")
        host, port = d.metrics_at.rsplit(":", 1)
        held = []
        try:
            for _ in range(16):
                s = socket.create_connection((host, int(port)), timeout=5)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHo")
                held.append(s)
            m = d.scrape()
            self.assertEqual(m["cc_rendezvous_connections_open"], 0)
            # Answered while they were all still open, not after their deadline.
            for s in held:
                s.setblocking(False)
                with self.assertRaises(BlockingIOError):
                    s.recv(4096)
            # Each of them is closed at its 5 s deadline and counted as refused.
            for s in held:
                s.setblocking(True)
                s.settimeout(15)
                self.assertEqual(s.recv(4096), b"")
        finally:
            for s in held:
                s.close()
        self.assertEqual(d.scrape()['cc_rendezvous_metrics_requests_total{result="refused"}'], 16)

    def test_a_taken_or_bad_metrics_address_is_one_line(self):
        d = self.p.daemon("--metrics", "127.0.0.1:0")
        r = subprocess.run([os.environ["CC_RENDEZVOUS_BIN"], "--port", "0", "--metrics",
                            d.metrics_at], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot serve metrics on %s: address already in use" % d.metrics_at,
                      r.stderr.lower())
        r = subprocess.run([os.environ["CC_RENDEZVOUS_BIN"], "--metrics", "::1:9"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("[ADDR]:PORT", r.stderr)


class Status(unittest.TestCase):
    def setUp(self):
        self.p = Processes()
        self.addCleanup(self.p.end)

    def member_json(self, d, rank):
        rc, out, err = d.status("--json", "--job", "train")
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        members = doc["jobs"][0]["communicators"][0]["members"]
        return {m["rank"]: m for m in members}[rank]

    def test_a_stopped_rank_is_behind_and_a_killed_one_failed(self):
        d = self.p.daemon(token=TOKEN)
        ranks = [self.p.member(d.port, "train", r, 3, "--interval", "100", "--misses", "100",
                               "--completed", "5", token=TOKEN) for r in range(3)]
        for r in ranks:
            r.expect("READY")
        rc, out, err = d.status()
        self.assertEqual(rc, 0, err)
        self.assertIn("job 'train'", out)
        self.assertIn("communicator 1: complete, 3 of 3 ranks joined", out)
        self.assertNotIn("behind:", out)
        m1 = wait_for("rank 1's first heartbeat with its progress",
                      lambda: (lambda m: m if m["last_completed"] == 5 else None)(
                          self.member_json(d, 1)), step=0.1)
        self.assertEqual(m1["state"], "member")
        self.assertEqual(m1["host"], HOST)
        self.assertEqual(m1["pid"], ranks[1].pid)
        self.assertTrue(m1["address"].startswith("127.0.0.1:"))
        self.assertEqual(m1["heartbeat_window_ms"], 10000)

        ranks[1].kill(signal.SIGSTOP)
        behind = wait_for("the stopped rank to show as behind",
                          lambda: self.member_json(d, 1)["behind"], timeout=30, step=0.2)
        self.assertTrue(behind.startswith("silent for "), behind)
        rc, out, err = d.status()
        self.assertIn("behind: rank 1 (host %s, pid %d): silent for" % (HOST, ranks[1].pid), out)
        self.assertNotIn("behind: rank 0", out)

        ranks[2].kill()
        wait_for("the killed rank to show as failed",
                 lambda: self.member_json(d, 2)["state"] == "failed", step=0.2)
        rc, out, err = d.status()
        self.assertEqual(rc, 0, err)
        self.assertIn("failed: rank 2 (host %s, pid %d) at 127.0.0.1:" % (HOST, ranks[2].pid), out)
        m2 = self.member_json(d, 2)
        self.assertEqual(m2["pid"], ranks[2].pid)
        self.assertEqual(m2["host"], HOST)
        # A member's connection that ends without a leave, in the message every
        # backend says (rendezvous/rules/event_rules.hpp).
        self.assertEqual(m2["reason"], "it closed its connection to the rendezvous without "
                         "leaving (the process exited or dropped the communicator without "
                         "destroying it)")

    def test_missing_ranks_and_a_wrong_token(self):
        d = self.p.daemon(token=TOKEN)
        first = self.p.member(d.port, "train", 0, 4, token=TOKEN)
        rc, out, err = wait_for("rank 0's join", lambda: (lambda r: r if "joining" in r[1] else None)(
            d.status()))
        self.assertIn("missing: ranks 1-3 (3 of 4) not joined yet", out)
        self.assertIsNotNone(first)
        r = subprocess.run([os.environ["CC_RENDEZVOUS_BIN"], "status", "--port", str(d.port)],
                           capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, CC_RENDEZVOUS_TOKEN="wrong"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("refused our token", r.stderr)

    @unittest.skipUnless(CC_RUN, "cc-run not given")
    def test_against_the_server_of_a_running_job(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        script = ('exec "%s" "$MASTER_ADDR" "$MASTER_PORT" "$CC_JOB_ID" "$RANK" "$WORLD_SIZE" '
                  '--external --token "$CC_RENDEZVOUS_TOKEN" </dev/null' % member_bin())
        env = dict(os.environ, CC_RENDEZVOUS_TOKEN=TOKEN, CC_LOG_LEVEL="error")
        run = subprocess.Popen([CC_RUN, "-n", "2", "--master-addr", "127.0.0.1", "--master-port",
                                str(port), "--job-id", "embedded-job", "--", "sh", "-c", script],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                               start_new_session=True)
        self.addCleanup(lambda: (os.killpg(run.pid, signal.SIGKILL), run.wait()))
        argv = [os.environ["CC_RENDEZVOUS_BIN"], "status", "--json"]

        def report():
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                               env=dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
            if r.returncode != 0:
                return None
            jobs = json.loads(r.stdout)["jobs"]
            if jobs and jobs[0]["communicators"] and jobs[0]["communicators"][0]["state"] == "complete":
                return jobs[0]
            return None

        job = wait_for("cc-run's ranks in its server's report", report, timeout=60, step=0.2)
        self.assertEqual(job["id"], "embedded-job")
        members = job["communicators"][0]["members"]
        self.assertEqual([m["rank"] for m in members], [0, 1])
        self.assertTrue(all(m["state"] == "member" and m["host"] == HOST for m in members))


class TokenRotation(unittest.TestCase):
    def setUp(self):
        self.p = Processes()
        self.addCleanup(self.p.end)

    def test_sighup_rotates_the_token_and_running_jobs_keep_going(self):
        d = self.p.daemon("--metrics", "0", token="first-token")
        old = [self.p.member(d.port, "old", r, 2, "--interval", "100", "--misses", "50",
                             token="first-token") for r in range(2)]
        for r in old:
            r.expect("READY")

        d.write_token("second-token")
        d.signal(signal.SIGHUP)
        wait_for("the daemon to reload its token", lambda: "token reloaded from" in d.text())

        # The old job keeps going: its requests are answered, nobody failed.
        old[0].say("behind 0")
        self.assertTrue(old[0].expect("BEHIND").startswith("BEHIND"))
        time.sleep(1.0)  # ten heartbeat intervals
        old[1].say("leave")
        self.assertEqual(old[1].line(), "LEFT")
        old[0].say("leave")
        self.assertEqual(old[0].line(), "LEFT")  # no FAILED line came before it

        refused = self.p.member(d.port, "new", 0, 1, token="first-token")
        self.assertIn("refused our token", refused.expect("ERROR"))
        accepted = self.p.member(d.port, "new", 0, 1, token="second-token")
        accepted.expect("READY")
        rc, out, err = d.status()  # the status tool reads the new token file too
        self.assertEqual(rc, 0, err)
        self.assertIn("job 'new'", out)

        m = d.scrape()
        self.assertEqual(m["cc_rendezvous_token_reloads_total"], 1)
        self.assertEqual(m["cc_rendezvous_auth_refusals_total"], 1)
        self.assertEqual(m["cc_rendezvous_failures_announced_total{cause=\"disconnect\"}"], 0)

        # A token file that cannot be read keeps the token in force.
        os.remove(d.token_file)
        d.signal(signal.SIGHUP)
        wait_for("the failed reload to be logged", lambda: "the old token stays in force" in d.text())
        self.assertTrue(d.alive())
        again = self.p.member(d.port, "new2", 0, 1, token="second-token")
        again.expect("READY")
        self.assertEqual(d.scrape()["cc_rendezvous_token_reload_failures_total"], 1)

    def test_one_token_file_gives_the_daemon_and_libcc_one_token(self):
        # Trailing spaces, tabs, CR and LF are no part of the token, for the
        # daemon (at start and on SIGHUP) and for a rank reading the same
        # file through CC_RENDEZVOUS_TOKEN_FILE alike.
        d = self.p.daemon(token="third-token ")
        env = dict(os.environ, CC_RENDEZVOUS_TOKEN_FILE=d.token_file)
        env.pop("CC_RENDEZVOUS_TOKEN", None)

        def store(*args):
            return subprocess.run([os.environ["STORE_CLIENT"], str(d.port), "tokens"] + list(args),
                                  env=env, capture_output=True, text=True, timeout=60)

        r = store("set", "k", "v")
        self.assertEqual(r.returncode, 0, r.stderr)
        d.write_token("fourth-token\t\r")
        d.signal(signal.SIGHUP)
        wait_for("the daemon to reload its token", lambda: "token reloaded from" in d.text())
        r = store("get", "k")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "v")

    def test_a_token_table_keeps_jobs_apart(self):
        # --token-file with a line per job prefix: each team's token opens
        # its jobs alone, status shows it those alone, the admin sees all.
        d = self.p.daemon(token="# per team\njob team-a- ta\njob team-b- tb\nadmin adm")

        def store(job, token, *args):
            env = dict(os.environ, CC_RENDEZVOUS_TOKEN=token)
            env.pop("CC_RENDEZVOUS_TOKEN_FILE", None)
            return subprocess.run([os.environ["STORE_CLIENT"], str(d.port), job] + list(args),
                                  env=env, capture_output=True, text=True, timeout=60)

        for job, token in (("team-a-1", "ta"), ("team-b-1", "tb"), ("team-b-2", "adm")):
            r = store(job, token, "set", "secret", job)
            self.assertEqual(r.returncode, 0, r.stderr)
        refused = store("team-b-1", "ta", "get", "secret")
        self.assertNotEqual(refused.returncode, 0)
        self.assertNotIn("team-b-1\n", refused.stdout)
        self.assertIn("refused by the server for job 'team-b-1'", refused.stderr)
        self.assertNotEqual(store("other", "ta", "set", "k", "v").returncode, 0)

        env = dict(os.environ, CC_RENDEZVOUS_TOKEN="tb")
        env.pop("CC_RENDEZVOUS_TOKEN_FILE", None)
        r = subprocess.run([os.environ["CC_RENDEZVOUS_BIN"], "status", "--addr", "127.0.0.1",
                            "--port", str(d.port)], env=env, capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("job 'team-b-1'", r.stdout)
        self.assertIn("job 'team-b-2'", r.stdout)
        self.assertNotIn("team-a-1", r.stdout)
        rc, out, err = d.status()  # the daemon's own file: its admin line
        self.assertEqual(rc, 0, err)
        for job in ("team-a-1", "team-b-1", "team-b-2"):
            self.assertIn("job '%s'" % job, out)


if __name__ == "__main__":
    unittest.main()
