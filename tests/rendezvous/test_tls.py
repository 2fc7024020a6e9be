"""TLS on cc's own rendezvous, with real processes on loopback: certificates
made here with the openssl program; cc-rendezvous with --tls-*; store_client
(the C API) and init_member (cc_comm_init's join, its NCCL id 128 bytes of
0x5a) as clients, through a recording TCP proxy. In clear the proxy sees the
store's secret value and the NCCL id; with TLS it sees neither. Each
mismatch fails at once with a message naming the address and the fix; mTLS
refuses a client without a certificate; SIGHUP serves a new certificate to
new connections while an old connection keeps working.

cc-run's node agent reaches the server over TLS too (the proxy sees no id on
its uplink), while its ranks' Unix socket stays clear: mode 0600 in a 0700
folder, and a peer of another user is refused (SO_PEERCRED).

Run by meson (suite rendezvous) with CC_RENDEZVOUS_BIN, STORE_CLIENT,
INIT_MEMBER and CC_RUN_BIN set. Skipped (77) without the openssl program."""

import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import unittest

from ops_helpers import wait_for
from tls_certs import SERVER_NAMES, CertsTestCase

DAEMON = os.environ["CC_RENDEZVOUS_BIN"]
STORE = os.environ["STORE_CLIENT"]
INIT = os.environ["INIT_MEMBER"]
CC_RUN = os.environ["CC_RUN_BIN"]
ETCD = os.environ.get("CC_ETCD_BIN") or shutil.which("etcd")
SECRET = b"s3cret-checkpoint-path-7f1e"
NCCL_ID = b"\x5a" * 64  # init_member's stand-in id is 128 such bytes


class Proxy:
    """A TCP relay on 127.0.0.1 that records every byte both ways."""

    def __init__(self, port, tamper=False):
        self.target = port
        self.tamper = tamper  # flip a byte of the client's first encrypted record
        self.recorded = bytearray()
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            for a, b, up in ((client, server, True), (server, client, False)):
                threading.Thread(target=self.pump, args=(a, b, up), daemon=True).start()

    def pump(self, src, dst, up):
        tampered = False
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.tamper and up and not tampered and data[0] in (0x14, 0x17):
                    data = data[:-1] + bytes([data[-1] ^ 1])
                    tampered = True
                with self.lock:
                    self.recorded += data
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def seen(self):
        with self.lock:
            return bytes(self.recorded)

    def close(self):
        self.closed = True
        self.listener.close()


class Tls(CertsTestCase):
    more_certs = (("server-2", "ca", SERVER_NAMES),
                  ("elsewhere", "ca", "DNS:elsewhere.example"),
                  ("stranger", "other-ca", "DNS:stranger"))

    def setUp(self):
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
        for p in getattr(self, "logs", []):
            p.close()

    def daemon(self, *args):
        """cc-rendezvous on 127.0.0.1; returns (process, port, log path)."""
        log_path = os.path.join(self.dir, "daemon-%d.log" % len(self.procs))
        log = open(log_path, "w")
        self.logs = getattr(self, "logs", []) + [log]
        p = subprocess.Popen([DAEMON, "--bind", "127.0.0.1", "--port", "0", "--log-level", "info"] +
                             list(args), stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        text = lambda: open(log_path).read()
        m = wait_for("the daemon to be ready", lambda: re.search(r"ready on port (\d+)", text()) or
                     (p.poll() is not None and self.fail("the daemon exited: " + text())))
        return p, int(m.group(1)), log_path

    def tls_daemon(self, *args):
        return self.daemon("--tls-cert", self.path("server.pem"), "--tls-key",
                           self.path("server.key"), *args)

    def env(self, ca="ca.pem", cert=None, extra=None):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("CC_TLS_"):
                del env[k]
        if ca:
            env["CC_TLS_CA"] = self.path(ca)
        if cert:
            env["CC_TLS_CERT"] = self.path(cert + ".pem")
            env["CC_TLS_KEY"] = self.path(cert + ".key")
        env["CC_LOG_LEVEL"] = "error"
        env.update(extra or {})
        return env

    def store(self, port, *args, env, timeout=30, job="tls"):
        """store_client PORT JOB ARGS: (exit status, stdout, stderr)."""
        started = time.monotonic()
        r = subprocess.run([STORE, str(port), job] + list(args), env=env, capture_output=True,
                           text=True, timeout=timeout)
        return r.returncode, r.stdout.strip(), r.stderr, time.monotonic() - started

    def fails_at_once(self, port, env, *args):
        """store_client ARGS (a set by default) that must fail within 10 s: its stderr."""
        rc, _, err, took = self.store(port, *(args or ("set", "k", "v")), env=env)
        self.assertEqual(rc, 1, err)
        self.assertLess(took, 10)
        return err

    def join(self, port, env, world=2):
        """A communicator's join of `world` init_member ranks; each prints READY."""
        ranks = []
        for rank in range(world):
            e = dict(env, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port), CC_JOB_ID="tls-join", CC_RENDEZVOUS="external",
                     CC_PREFLIGHT="0", CC_TIMEOUT_MS="30000", LOCAL_RANK=str(rank))
            ranks.append(subprocess.Popen([INIT, "ok", "100"], env=e, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        self.procs += ranks
        outs = [r.communicate(timeout=60)[0] for r in ranks]
        for rank, out in enumerate(outs):
            self.assertIn("READY", out, "rank %d: %s" % (rank, out))

    def recorded_run(self, port, env):
        """A join and a store set and get through a recording proxy: its bytes."""
        proxy = Proxy(port)
        self.addCleanup(proxy.close)
        self.join(proxy.port, env)
        rc, _, err, _ = self.store(proxy.port, "set", "secret", SECRET.decode(), env=env)
        self.assertEqual(rc, 0, err)
        rc, out, err, _ = self.store(proxy.port, "get", "secret", env=env)
        self.assertEqual((rc, out), (0, SECRET.decode()), err)
        return proxy.seen()

    def test_a_recording_proxy_sees_the_secret_and_the_id_in_clear_only(self):
        _, clear_port, _ = self.daemon()
        seen = self.recorded_run(clear_port, self.env(ca=None))
        self.assertIn(SECRET, seen, "the test cannot fail: the secret is not on the clear wire")
        self.assertIn(NCCL_ID, seen, "the test cannot fail: the NCCL id is not on the clear wire")

        _, tls_port, _ = self.tls_daemon()
        seen = self.recorded_run(tls_port, self.env())
        self.assertGreater(len(seen), 2000)
        self.assertNotIn(SECRET, seen)
        self.assertNotIn(NCCL_ID, seen)
        self.assertEqual(seen[0], 0x16, "the stream does not start with a TLS handshake record")

    def test_mismatches_fail_at_once_with_words_and_the_server_serves_on(self):
        _, port, log = self.tls_daemon()
        where = "127.0.0.1:%d" % port

        err = self.fails_at_once(port, self.env(ca="other-ca.pem"))
        self.assertIn(where, err)
        self.assertIn("does not vouch for", err)
        self.assertIn("set CC_TLS_CA (or the config's tls_ca) to the CA that signed", err)

        err = self.fails_at_once(port, self.env(ca=None))
        self.assertIn("speaks TLS", err)
        self.assertIn("set CC_TLS_CA", err)
        self.assertIn(where, err)

        rc, _, err, _ = self.store(port, "set", "k", "v",
                                   env=self.env(extra={"CC_TLS_SERVER_NAME": "elsewhere.example"}))
        self.assertEqual(rc, 1)
        self.assertIn("does not name 'elsewhere.example'", err)

        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n" * 10)
            s.recv(4096)

        rc, _, err, _ = self.store(port, "set", "k", "v", env=self.env())
        self.assertEqual(rc, 0, err)
        rc, out, err, _ = self.store(port, "get", "k", env=self.env())
        self.assertEqual((rc, out), (0, "v"), err)
        self.assertIn("spoke cc's protocol in clear", open(log).read())

        _, clear_port, _ = self.daemon()
        err = self.fails_at_once(clear_port, self.env())
        self.assertIn("127.0.0.1:%d" % clear_port, err)
        self.assertRegex(err, "does not speak TLS|closed the connection during the TLS handshake")
        self.assertIn("unset CC_TLS_CA", err)

    def test_stalled_handshakes_meet_the_deadline_and_cost_little(self):
        daemon, port, _ = self.tls_daemon("--handshake-timeout-ms", "1000")

        def rss_kb():
            with open("/proc/%d/status" % daemon.pid) as f:
                return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

        before = rss_kb()
        # 100 clients start a TLS handshake (a real ClientHello) and stall.
        context = ssl.create_default_context(cafile=self.path("ca.pem"))
        stalled = []
        for _ in range(100):
            raw = socket.create_connection(("127.0.0.1", port), timeout=5)
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            obj = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
            raw.sendall(outgoing.read())
            stalled.append(raw)
        time.sleep(0.3)
        grown_mb = (rss_kb() - before) / 1024.0
        print("100 half-finished handshakes: the server grew by %.1f MB" % grown_mb, file=sys.stderr)
        self.assertLess(grown_mb, 64, "100 half-finished handshakes took %.1f MB" % grown_mb)
        started = time.monotonic()
        for raw in stalled:
            raw.settimeout(10)
            try:
                while raw.recv(65536):
                    pass
            except OSError:
                pass
            raw.close()
        self.assertLess(time.monotonic() - started, 5, "the stalled handshakes were not closed")
        rc, _, err, _ = self.store(port, "set", "k", "v", env=self.env())
        self.assertEqual(rc, 0, err)

    def test_a_byte_altered_by_a_proxy_ends_the_connection(self):
        _, port, log = self.tls_daemon()
        proxy = Proxy(port, tamper=True)
        self.addCleanup(proxy.close)
        err = self.fails_at_once(proxy.port, self.env())
        self.assertIn("127.0.0.1:%d" % proxy.port, err)
        self.assertRegex(open(log).read(), "bad record mac|decryption failed")
        rc, _, err, _ = self.store(port, "set", "k", "v", env=self.env())
        self.assertEqual(rc, 0, err)

    def test_mtls_refuses_a_client_without_a_certificate_of_its_ca(self):
        _, port, _ = self.tls_daemon("--tls-client-ca", self.path("ca.pem"))
        # TLS 1.3 finishes a client's handshake before the server checks its
        # certificate: the refusal comes as an alert, or (when a reset
        # overtakes it) as a close from a server that asked for certificates.
        err = self.fails_at_once(port, self.env())
        self.assertRegex(err, "127.0.0.1:%d (requires a client certificate|closed the connection; "
                              "it requires client certificates)" % port)
        self.assertIn("CC_TLS_CERT and CC_TLS_KEY", err)
        err = self.fails_at_once(port, self.env(cert="stranger"))
        self.assertRegex(err, "127.0.0.1:%d (refused this client's certificate|closed the "
                              "connection; it requires client certificates)" % port)
        self.assertIn("--tls-client-ca", err)
        rc, _, err, _ = self.store(port, "set", "k", "v", env=self.env(cert="client"))
        self.assertEqual(rc, 0, err)
        rc, out, err, _ = self.store(port, "get", "k", env=self.env(cert="client"))
        self.assertEqual((rc, out), (0, "v"), err)

    def test_a_key_others_can_read_is_refused(self):
        loose = self.path("loose.key")
        shutil.copy(self.path("server.key"), loose)
        os.chmod(loose, 0o644)
        r = subprocess.run([DAEMON, "--port", "0", "--tls-cert", self.path("server.pem"),
                            "--tls-key", loose], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("can be read by every user", r.stderr)
        self.assertIn("chmod 600", r.stderr)

    def test_the_daemon_reads_tls_from_its_config_file(self):
        config = self.path("daemon.toml")
        with open(config, "w") as f:
            f.write('tls-cert = "%s"\ntls-key = "%s"\n' % (self.path("server.pem"),
                                                          self.path("server.key")))
        _, port, _ = self.daemon("--config", config)
        rc, _, err, _ = self.store(port, "set", "k", "v", env=self.env())
        self.assertEqual(rc, 0, err)
        rc, _, err, _ = self.store(port, "set", "k", "v", env=self.env(ca=None))
        self.assertIn("speaks TLS", err)

    def served_name(self, port):
        context = ssl.create_default_context(cafile=self.path("ca.pem"))
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]

    def test_sighup_serves_the_new_certificate_and_keeps_old_connections(self):
        live = os.path.join(self.dir, "live")
        os.makedirs(live, exist_ok=True)
        for ext in ("pem", "key"):
            shutil.copy(self.path("server." + ext), os.path.join(live, "cert." + ext))
        daemon, port, log = self.daemon("--tls-cert", os.path.join(live, "cert.pem"),
                                        "--tls-key", os.path.join(live, "cert.key"))
        self.assertEqual(self.served_name(port), "server")
        # An old connection: it adds 1 to ready/1, then waits for go/1.
        old = subprocess.Popen([STORE, str(port), "tls", "race", "1", "prize", "-", "old"],
                               env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        self.procs.append(old)
        wait_for("the old connection's add",
                 lambda: self.store(port, "add", "ready/1", "0", env=self.env())[1] == "1")

        for ext in ("pem", "key"):
            shutil.copy(self.path("server-2." + ext), os.path.join(live, "cert." + ext))
        daemon.send_signal(signal.SIGHUP)
        wait_for("the reload", lambda: "TLS certificate reloaded" in open(log).read())
        self.assertEqual(self.served_name(port), "server-2")

        rc, _, err, _ = self.store(port, "set", "go/1", "1", env=self.env())
        self.assertEqual(rc, 0, err)
        out, err = old.communicate(timeout=30)
        self.assertEqual((old.returncode, out.strip()), (0, "1"), err)

    def agent_run(self, port, env):
        """Rank 0 straight to the server, rank 1 through cc-run's node agent
        (node 1 of 2), both through a recording proxy: its bytes."""
        proxy = Proxy(port)
        self.addCleanup(proxy.close)
        e = dict(env, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(proxy.port),
                 CC_JOB_ID="tls-agent", CC_RENDEZVOUS="external", CC_PREFLIGHT="0",
                 CC_TIMEOUT_MS="30000", LOCAL_RANK="0")
        direct = subprocess.Popen([INIT, "ok", "100"], env=e, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        e = dict(env, CC_PREFLIGHT="0")
        run = subprocess.Popen([CC_RUN, "-n", "1", "--nnodes", "2", "--node-rank", "1",
                                "--master-addr", "127.0.0.1", "--master-port", str(proxy.port),
                                "--job-id", "tls-agent", "--timeout-ms", "30000", "--",
                                INIT, "ok", "100"], env=e, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        self.procs += [direct, run]
        for name, p in (("rank 0", direct), ("cc-run's rank 1", run)):
            out = p.communicate(timeout=60)[0]
            self.assertIn("READY", out, "%s: %s" % (name, out))
        return proxy.seen()

    def test_the_node_agent_uplink_speaks_tls(self):
        _, clear_port, _ = self.daemon()
        seen = self.agent_run(clear_port, self.env(ca=None))
        self.assertIn(NCCL_ID, seen, "the test cannot fail: the NCCL id is not on the clear wire")
        _, tls_port, _ = self.tls_daemon()
        seen = self.agent_run(tls_port, self.env())
        self.assertNotIn(NCCL_ID, seen)
        self.assertGreater(len(seen), 1000)

    def test_the_agent_socket_is_private_and_refuses_other_users(self):
        # The rank, a Python program under cc-run, looks at its agent's socket
        # and (as root) opens the folder for a moment so that user nobody can
        # reach the socket: the agent must close that connection at once.
        probe = r"""
import os, socket, stat, sys, time
path = os.environ["CC_AGENT_SOCKET"]
folder = os.path.dirname(path)
print("MODES %o %o" % (stat.S_IMODE(os.stat(folder).st_mode), stat.S_IMODE(os.stat(path).st_mode)))
if os.geteuid() != 0:
    print("STRANGER skipped"); sys.exit(0)
os.chmod(folder, 0o711); os.chmod(path, 0o777)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setgid(65534); os.setuid(65534)
    s = socket.socket(socket.AF_UNIX); s.settimeout(2)
    s.connect(path)
    try:
        data = s.recv(100)
        os.write(w, b"closed" if not data else b"answered")
    except socket.timeout:
        os.write(w, b"kept open")
    except OSError:
        os.write(w, b"closed")
    os._exit(0)
os.waitpid(pid, 0)
os.chmod(folder, 0o700); os.chmod(path, 0o600)
print("STRANGER " + os.read(r, 100).decode())
"""
        r = subprocess.run([CC_RUN, "-n", "1", "--", sys.executable, "-c", probe],
                           env=self.env(ca=None, extra={"CC_LOG_LEVEL": "warn"}),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("[rank 0] MODES 700 600", r.stdout)
        if "STRANGER skipped" in r.stdout:
            self.skipTest("not root: cannot connect as another user")
        self.assertIn("STRANGER closed", r.stdout)
        self.assertIn("refused a connection", r.stderr)
        self.assertIn("from uid 65534", r.stderr)

    def etcd(self):
        """One etcd member on loopback; its client URL."""
        ports = []
        for _ in range(2):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                ports.append(s.getsockname()[1])
        client, peer = ("http://127.0.0.1:%d" % p for p in ports)
        p = subprocess.Popen([ETCD, "--name", "tls", "--data-dir", os.path.join(self.dir, "etcd"),
                              "--listen-client-urls", client, "--advertise-client-urls", client,
                              "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                              "--initial-cluster", "tls=" + peer],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)

        def healthy():
            import urllib.request
            try:
                with urllib.request.urlopen(client + "/health", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        wait_for("etcd to be healthy", healthy, timeout=30)
        return "etcd://127.0.0.1:%d" % ports[0]

    @unittest.skipIf(ETCD is None, "no etcd program")
    def test_the_elected_server_speaks_tls(self):
        # The first client of the job wins etcd's election and hosts the job's
        # server (rendezvous/factory/elected.cpp) with its CC_TLS_CERT; it
        # stays, waiting for go/1, while the others find it through etcd.
        address = self.etcd()
        tls = self.env(cert="server", extra={"STORE_ADDR": address})
        host = subprocess.Popen([STORE, "0", "elected", "race", "1", "prize", "-", "host"], env=tls,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(host)
        wait_for("the host's add",
                 lambda: subprocess.run([STORE, "0", "elected", "add", "ready/1", "0"], env=tls,
                                        capture_output=True, text=True,
                                        timeout=60).stdout.strip() == "1", timeout=60)
        clear = subprocess.run([STORE, "0", "elected", "add", "ready/1", "0"],
                               env=self.env(ca=None, extra={"STORE_ADDR": address}),
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(clear.returncode, 1, clear.stdout)
        self.assertIn("speaks TLS", clear.stderr)
        rc, _, err, _ = self.store(0, "set", "go/1", "1", env=tls, job="elected")
        self.assertEqual(rc, 0, err)
        out, err = host.communicate(timeout=60)
        self.assertEqual((host.returncode, out.strip()), (0, "1"), err)

    def fields(self, ca="ca.pem", cert=None, prefix="STORE_TLS_"):
        """An environment with no CC_TLS_*: the TLS files go through the
        config's fields (store_client's STORE_TLS_*, init_member's INIT_TLS_*)."""
        env = self.env(ca=None)
        if ca is not None:
            env[prefix + "CA"] = self.path(ca) if ca else ""
        if cert:
            env[prefix + "CERT"] = self.path(cert + ".pem")
            env[prefix + "KEY"] = self.path(cert + ".key")
        return env

    def test_the_config_fields_alone_turn_tls_on(self):
        _, port, _ = self.tls_daemon()
        proxy = Proxy(port)
        self.addCleanup(proxy.close)
        rc, _, err, _ = self.store(proxy.port, "set", "secret", SECRET.decode(), env=self.fields())
        self.assertEqual(rc, 0, err)
        rc, out, err, _ = self.store(proxy.port, "get", "secret", env=self.fields())
        self.assertEqual((rc, out), (0, SECRET.decode()), err)
        seen = proxy.seen()
        self.assertNotIn(SECRET, seen)
        self.assertEqual(seen[0], 0x16, "the stream does not start with a TLS handshake record")

        # a wrong CA in the field: the message for that case, at once
        err = self.fails_at_once(port, self.fields(ca="other-ca.pem"), "get", "secret")
        self.assertIn("127.0.0.1:%d" % port, err)
        self.assertIn("does not vouch for", err)
        self.assertIn(self.path("other-ca.pem"), err)
        self.assertIn("set CC_TLS_CA (or the config's tls_ca) to the CA that signed", err)

        # a set field wins over CC_TLS_CA: "" is no TLS, a wrong CA is wrong
        env = self.fields(ca="")
        env["CC_TLS_CA"] = self.path("ca.pem")
        err = self.fails_at_once(port, env, "get", "secret")
        self.assertIn("speaks TLS", err)
        self.assertIn("tls_ca", err)
        env = self.fields(ca="other-ca.pem")
        env["CC_TLS_CA"] = self.path("ca.pem")
        err = self.fails_at_once(port, env, "get", "secret")
        self.assertIn("does not vouch for", err)
        # an unset field keeps CC_TLS_CA
        rc, out, err, _ = self.store(port, "get", "secret", env=self.env())
        self.assertEqual((rc, out), (0, SECRET.decode()), err)

    def embedded_join(self, envs, timeout_ms=30000):
        """init_member ranks 0..n-1, rank 0 hosting the embedded server: their output."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ranks = []
        for rank, env in enumerate(envs):
            e = dict(env, RANK=str(rank), WORLD_SIZE=str(len(envs)), MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port), CC_JOB_ID="tls-fields", CC_RENDEZVOUS="embedded",
                     CC_PREFLIGHT="0", CC_TIMEOUT_MS=str(timeout_ms), LOCAL_RANK=str(rank))
            ranks.append(subprocess.Popen([INIT, "ok", "100"], env=e, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
            if rank == 0:
                time.sleep(0.3)  # rank 0's server first, so a refusal is TLS's, not a retry's
        self.procs += ranks
        return [r.communicate(timeout=60)[0] for r in ranks]

    def test_a_communicator_and_its_embedded_server_configured_by_fields(self):
        host = self.fields(cert="server", prefix="INIT_TLS_")
        outs = self.embedded_join([host, self.fields(prefix="INIT_TLS_")])
        for rank, out in enumerate(outs):
            self.assertIn("READY", out, "rank %d: %s" % (rank, out))

        # rank 0's server speaks TLS because of its fields: a rank without a
        # CA is refused with the fix, one with the wrong CA too
        outs = self.embedded_join([host, self.fields(ca=None, prefix="INIT_TLS_"),
                                   self.fields(ca="other-ca.pem", prefix="INIT_TLS_")],
                                  timeout_ms=8000)
        self.assertIn("ERROR", outs[1])
        self.assertIn("speaks TLS", outs[1])
        self.assertIn("set CC_TLS_CA (or the config's tls_ca)", outs[1])
        self.assertIn("ERROR", outs[2])
        self.assertIn("does not vouch for", outs[2])


if __name__ == "__main__":
    unittest.main()
