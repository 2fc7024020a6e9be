"""TLS through Python's keywords: cc.Store(tls_ca=...) to a cc-rendezvous
daemon with --tls-*, and a cc.Server(tls_cert=..., tls_key=...) started
in this process; no CC_TLS_* variable is set. A Store without tls_ca fails
with an error naming TLS and the fix; a wrong CA with the CA's file.

Run by meson (suite python) with CC_RENDEZVOUS_BIN, CC_LIBRARY and
PYTHONPATH (the python folder) set. Skipped (77) without the openssl
program."""

import os
import pathlib
import re
import subprocess
import unittest

from ops_helpers import wait_for
from tls_certs import CertsTestCase

import cc


class TlsKeywords(CertsTestCase):
    dir_prefix = "cc-tls-py-"

    @classmethod
    def setUpClass(cls):
        for k in list(os.environ):
            if k.startswith("CC_TLS_"):
                del os.environ[k]
        super().setUpClass()

    def daemon(self, *args):
        """cc-rendezvous with TLS on 127.0.0.1: its port."""
        log_path = self.path("daemon-%s.log" % self.id().rsplit(".", 1)[-1])
        log = open(log_path, "w")
        self.addCleanup(log.close)
        p = subprocess.Popen([os.environ["CC_RENDEZVOUS_BIN"], "--bind", "127.0.0.1", "--port",
                              "0", "--log-level", "info", "--tls-cert", self.path("server.pem"),
                              "--tls-key", self.path("server.key")] + list(args),
                             stdout=log, stderr=subprocess.STDOUT)

        def stop():
            p.kill()
            p.wait(timeout=10)
        self.addCleanup(stop)
        m = wait_for("the daemon to be ready",
                     lambda: re.search(r"ready on port (\d+)", open(log_path).read()) or
                     (p.poll() is not None and self.fail("the daemon exited")))
        return int(m.group(1))

    def test_a_store_with_tls_ca_reads_back_a_value(self):
        port = self.daemon()
        with cc.Store("127.0.0.1", port, "py-tls", tls_ca=self.path("ca.pem"),
                      timeout_ms=10000) as store:
            store.set("path", "ckpt/7")
            self.assertEqual(store.get("path"), b"ckpt/7")
        # a pathlib path and the server's name work as well
        with cc.Store("127.0.0.1", port, "py-tls", tls_ca=pathlib.Path(self.path("ca.pem")),
                      tls_server_name="localhost", timeout_ms=10000) as store:
            self.assertEqual(store.get("path"), b"ckpt/7")

    def test_without_tls_ca_the_error_names_tls_and_the_fix(self):
        port = self.daemon()
        with self.assertRaises(cc.RendezvousError) as caught:
            cc.Store("127.0.0.1", port, "py-tls", timeout_ms=10000)
        message = str(caught.exception)
        self.assertIn("speaks TLS", message)
        self.assertIn("tls_ca", message)
        self.assertIn("127.0.0.1:%d" % port, message)

        with self.assertRaises(cc.Error) as caught:
            cc.Store("127.0.0.1", port, "py-tls", tls_ca=self.path("other-ca.pem"),
                     timeout_ms=10000)
        message = str(caught.exception)
        self.assertIn("does not vouch for", message)
        self.assertIn(self.path("other-ca.pem"), message)

    def test_a_server_started_with_tls_keywords_and_mtls(self):
        with cc.Server("127.0.0.1", 0, tls_cert=self.path("server.pem"),
                       tls_key=self.path("server.key")) as server:
            with cc.Store("127.0.0.1", server.port, "py-tls", tls_ca=self.path("ca.pem"),
                          timeout_ms=10000) as store:
                self.assertEqual(store.add("n", 5), 5)
            with self.assertRaises(cc.Error) as caught:
                cc.Store("127.0.0.1", server.port, "py-tls", timeout_ms=10000)
            self.assertIn("speaks TLS", str(caught.exception))

        with cc.Server("127.0.0.1", 0, tls_cert=self.path("server.pem"),
                       tls_key=self.path("server.key"),
                       tls_client_ca=self.path("ca.pem")) as server:
            with cc.Store("127.0.0.1", server.port, "py-mtls", tls_ca=self.path("ca.pem"),
                          tls_cert=self.path("client.pem"), tls_key=self.path("client.key"),
                          timeout_ms=10000) as store:
                self.assertEqual(store.add("n", 2), 2)
            with self.assertRaises(cc.Error) as caught:
                cc.Store("127.0.0.1", server.port, "py-mtls", tls_ca=self.path("ca.pem"),
                         timeout_ms=10000)
            self.assertIn("client certificate", str(caught.exception))

    def test_a_client_ca_without_a_certificate_is_refused(self):
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            cc.Server("127.0.0.1", 0, tls_client_ca=self.path("ca.pem"))
        self.assertIn("tls_cert", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
