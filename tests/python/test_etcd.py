"""cc.Store and cc.Comm with an etcd address, against a real one-member etcd
that the test starts on 127.0.0.1 (skipped where there is no etcd program:
install etcd-server, or set CC_ETCD_BIN). libcc reaches etcd through
libcc-etcd.so beside it."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import cc


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """One etcd member on free loopback ports, its data in a temporary folder."""

    def __init__(self, program):
        self.dir = tempfile.mkdtemp(prefix="cc-py-etcd-")
        client, peer = free_port(), free_port()
        self.address = "etcd://127.0.0.1:%d" % client
        self.log = open(os.path.join(self.dir, "etcd.log"), "w")
        self.proc = subprocess.Popen(
            [program, "--name", "m1", "--data-dir", os.path.join(self.dir, "m1"),
             "--listen-client-urls", "http://127.0.0.1:%d" % client,
             "--advertise-client-urls", "http://127.0.0.1:%d" % client,
             "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-cluster", "m1=http://127.0.0.1:%d" % peer],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", client), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("etcd did not start within 20 s")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def setUpModule():
    global ETCD
    program = os.environ.get("CC_ETCD_BIN") or shutil.which("etcd")
    if not program:
        raise unittest.SkipTest("no etcd program (install etcd-server, or set CC_ETCD_BIN)")
    ETCD = Etcd(program)


def tearDownModule():
    ETCD.stop()


class StoreOnEtcd(unittest.TestCase):
    def test_the_store_works_on_an_etcd_address_without_a_port(self):
        with cc.Store(ETCD.address, job_id="py-etcd", timeout_ms=10000) as store:
            store.set("greeting", "grüße")
            self.assertEqual(store.get("greeting"), "grüße".encode("utf-8"))
            self.assertEqual(store.add("counter", 5), 5)
            self.assertTrue(store.compare_set("leader", None, b"me"))
            self.assertFalse(store.compare_set("leader", None, b"you"))
            store.delete("greeting")
            with self.assertRaises(cc.TimeoutError) as caught:
                store.get("greeting", timeout_ms=200)
            self.assertIn("'greeting'", str(caught.exception))
            self.assertIn(ETCD.address, str(caught.exception))
        # the keys outlive the connection
        with cc.Store(ETCD.address, job_id="py-etcd", timeout_ms=10000) as again:
            self.assertEqual(again.add("counter", 0), 5)
            self.assertEqual(again.get("leader"), b"me")

    def test_a_malformed_etcd_address_is_refused_in_words(self):
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            cc.Store("etcd://127.0.0.1", job_id="bad")
        self.assertIn("port", str(caught.exception))


class CommOnEtcd(unittest.TestCase):
    def test_master_port_is_not_needed_with_an_etcd_address(self):
        # Without a GPU, init stops at the device, after the arguments were
        # accepted: an etcd address needs no master_port.
        try:
            comm = cc.Comm(0, 1, ETCD.address, timeout_ms=5000)
        except cc.InvalidArgumentError as e:
            self.fail("the etcd address was refused: %s" % e)
        except cc.Error as e:
            self.assertNotIn("master_port", str(e))
        else:
            comm.destroy()


if __name__ == "__main__":
    unittest.main()
