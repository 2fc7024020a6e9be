"""What the TLS tests share: certificates made with the openssl program in a
temporary folder, and a TestCase base that makes a class's certificates once
and removes them when the class ends."""

import os
import shutil
import subprocess
import tempfile
import unittest

OPENSSL = shutil.which("openssl")

# The names a server certificate is for: the loopback address and localhost.
SERVER_NAMES = "IP:127.0.0.1,DNS:localhost"


def openssl(*args, cwd):
    subprocess.run([OPENSSL] + list(args), cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=" + name,
            cwd=d)
    os.chmod(os.path.join(d, name + ".key"), 0o600)


def make_cert(d, name, ca, san):
    """A certificate `name` signed by `ca`, valid for the names in `san`."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name, cwd=d)
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\n" % san)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext",
            cwd=d)
    os.chmod(os.path.join(d, name + ".key"), 0o600)


@unittest.skipIf(OPENSSL is None, "no openssl program to make certificates with")
class CertsTestCase(unittest.TestCase):
    """Makes the CAs "ca" and "other-ca", a "server" certificate for 127.0.0.1
    and a "client" one signed by "ca", then the class's `more_certs`
    ((name, CA, subjectAltName) each) in a folder of its own, `dir`."""

    dir_prefix = "cc-tls-"
    more_certs = ()

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix=cls.dir_prefix)
        make_ca(cls.dir, "ca")
        make_ca(cls.dir, "other-ca")
        make_cert(cls.dir, "server", "ca", SERVER_NAMES)
        make_cert(cls.dir, "client", "ca", "DNS:client")
        for name, ca, san in cls.more_certs:
            make_cert(cls.dir, name, ca, san)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        """A file in the class's folder."""
        return os.path.join(self.dir, name)
