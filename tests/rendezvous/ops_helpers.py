"""What the operations tests share: a cc-rendezvous daemon on loopback, members
of a job as failure_member processes, a Prometheus scrape through urllib and
`cc-rendezvous status`. Every wait has a deadline; every process started is
killed by its id when the test ends."""

import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

CC_RUN = os.environ.get("CC_RUN_BIN", "")
HOST = socket.gethostname()


def daemon_bin():
    """cc-rendezvous, as meson names it ($CC_RENDEZVOUS_BIN)."""
    return os.environ["CC_RENDEZVOUS_BIN"]


def member_bin():
    """failure_member, as meson names it ($FAILURE_MEMBER)."""
    return os.environ["FAILURE_MEMBER"]


def wait_for(what, check, timeout=20.0, step=0.05):
    """Polls check() until it returns something true; fails naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(step)


class Daemon:
    """cc-rendezvous on 127.0.0.1, any free port, its log in a file."""

    def __init__(self, *args, token=None):
        self.dir = tempfile.mkdtemp(prefix="cc-ops-")
        self.token_file = os.path.join(self.dir, "token")
        argv = [daemon_bin(), "--bind", "127.0.0.1", "--port", "0", "--log-level", "info"]
        if token is not None:
            self.write_token(token)
            argv += ["--token-file", self.token_file]
        self.log_path = os.path.join(self.dir, "log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv + list(args), stdout=self.log, stderr=subprocess.STDOUT)
        text = wait_for("the daemon to say it is ready",
                        lambda: re.search(r"ready on port (\d+)", self.text()))
        self.port = int(text.group(1))
        m = re.search(r"metrics on http://([^/]+)/metrics", self.text())
        self.metrics_at = m.group(1) if m else None

    def write_token(self, token):
        with open(self.token_file, "w") as f:
            f.write(token + "\n")
        os.chmod(self.token_file, 0o600)

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def signal(self, sig):
        self.proc.send_signal(sig)

    def alive(self):
        return self.proc.poll() is None

    def scrape(self):
        """GET /metrics: {'name{labels}': value} for every sample."""
        with urllib.request.urlopen("http://%s/metrics" % self.metrics_at, timeout=10) as r:
            assert r.status == 200, r.status
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            body = r.read().decode()
        samples = {}
        for line in body.splitlines():
            if not line or line.startswith("#"):
                continue
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
        return samples

    def status(self, *args, env=None):
        """`cc-rendezvous status` against this daemon: (exit status, stdout, stderr)."""
        argv = [daemon_bin(), "status", "--addr", "127.0.0.1", "--port", str(self.port)]
        if os.path.exists(self.token_file):
            argv += ["--token-file", self.token_file]
        r = subprocess.run(argv + list(args), capture_output=True, text=True, timeout=30, env=env)
        return r.returncode, r.stdout, r.stderr

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Member:
    """One rank (failure_member): joins, then takes commands on stdin."""

    def __init__(self, port, job, rank, world, *args, token=None):
        argv = [member_bin(), "127.0.0.1", str(port), job, str(rank), str(world), "--external"]
        if token is not None:
            argv += ["--token", token]
        self.rank = rank
        self.proc = subprocess.Popen(argv + list(args), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.pid = self.proc.pid

    def line(self, timeout=30.0):
        """The member's next line of output, within timeout."""
        import select
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise AssertionError("rank %d said nothing within %.0f s" % (self.rank, timeout))
        return self.proc.stdout.readline().strip()

    def expect(self, prefix, timeout=30.0):
        line = self.line(timeout)
        if not line.startswith(prefix):
            raise AssertionError("rank %d said %r, not %s..." % (self.rank, line, prefix))
        return line

    def say(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            os.kill(self.pid, sig)

    def end(self):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:  # its reader went first
                pass


class Processes:
    """Ends every daemon and member a test started, by its id."""

    def __init__(self):
        self.daemons = []
        self.members = []

    def daemon(self, *args, **kw):
        d = Daemon(*args, **kw)
        self.daemons.append(d)
        return d

    def member(self, *args, **kw):
        m = Member(*args, **kw)
        self.members.append(m)
        return m

    def end(self):
        for m in self.members:
            m.end()
        for d in self.daemons:
            d.stop()


def http(at, method, path, body=None, timeout=10):
    """(status, body) of one HTTP request; refusals come back as their status."""
    req = urllib.request.Request("http://%s%s" % (at, path), method=method, data=body)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
