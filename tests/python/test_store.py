"""cc.Store and cc.Server against a real server on loopback."""

import threading
import time
import unittest

import cc

LOOPBACK = "127.0.0.1"


class StoreBasics(unittest.TestCase):
    def setUp(self):
        self.server = cc.Server(LOOPBACK)
        self.store = cc.Store(LOOPBACK, self.server.port, timeout_ms=5000)

    def tearDown(self):
        self.store.close()
        self.server.stop()

    def test_values_round_trip_as_bytes(self):
        self.store.set("text", "grüße")
        self.store.set(b"binary", b"\x00\x01\xff\x00")
        self.store.set("empty", b"")
        self.store.set("array", bytearray(b"abc"))
        self.assertEqual(self.store.get("text"), "grüße".encode("utf-8"))
        self.assertEqual(self.store.get("binary"), b"\x00\x01\xff\x00")
        self.assertEqual(self.store.get("empty"), b"")
        self.assertEqual(self.store.get("array"), b"abc")

    def test_a_value_larger_than_the_first_buffer_comes_back_whole(self):
        value = bytes(range(256)) * 4000  # 1,024,000 bytes: under the 1 MiB limit
        self.store.set("big", value)
        self.assertEqual(self.store.get("big"), value)

    def test_a_value_over_the_limit_is_refused_in_words(self):
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            self.store.set("huge", b"x" * ((1 << 20) + 1))
        self.assertIn("over the limit", str(caught.exception))

    def test_get_waits_for_a_key_set_later(self):
        def later():
            with cc.Store(LOOPBACK, self.server.port) as other:
                time.sleep(0.2)
                other.set("late", "here")
        t = threading.Thread(target=later)
        t.start()
        self.assertEqual(self.store.get("late", timeout_ms=5000), b"here")
        t.join()

    def test_get_of_a_missing_key_times_out_in_words(self):
        with self.assertRaises(cc.TimeoutError) as caught:
            self.store.get("never", timeout_ms=0)
        self.assertIn("key 'never' is not set", str(caught.exception))
        self.assertIn("(get without waiting)", str(caught.exception))
        with self.assertRaises(cc.TimeoutError) as caught:
            self.store.get("never", timeout_ms=150)
        self.assertIn("within 150 ms", str(caught.exception))

    def test_add_is_atomic_across_connections(self):
        def adder():
            with cc.Store(LOOPBACK, self.server.port) as s:
                for _ in range(50):
                    s.add("counter", 2)
        threads = [threading.Thread(target=adder) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(self.store.add("counter", 0), 400)
        self.assertEqual(self.store.add("counter", -401), -1)

    def test_wait_names_the_missing_keys(self):
        self.store.set("a", "1")
        self.store.wait(["a"])
        self.store.wait("a")
        with self.assertRaises(cc.TimeoutError) as caught:
            self.store.wait(["a", "b", "c"], timeout_ms=150)
        words = str(caught.exception)
        self.assertIn("b", words)
        self.assertIn("c", words)

    def test_jobs_do_not_see_each_other(self):
        with cc.Store(LOOPBACK, self.server.port, "job-one") as one, \
                cc.Store(LOOPBACK, self.server.port, "job-two") as two:
            one.set("k", "1")
            two.set("k", "2")
            self.assertEqual(one.get("k"), b"1")
            self.assertEqual(two.get("k"), b"2")
            one.set("only-one", "x")
            with self.assertRaises(cc.TimeoutError):
                two.get("only-one", timeout_ms=0)

    def test_arguments_are_checked_in_words(self):
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            self.store.set(5, "x")
        self.assertIn("key must be a str or bytes, not int", str(caught.exception))
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            self.store.set("k", 3.5)
        self.assertIn("value must be bytes-like or a str, not float", str(caught.exception))
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            self.store.get("k", timeout_ms=-3)
        self.assertIn("timeout_ms must be None", str(caught.exception))
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            self.store.set("k" * 2000, "x")
        self.assertIn("over the limit of 1024 bytes", str(caught.exception))

    def test_a_closed_store_says_so(self):
        self.store.close()
        self.store.close()
        with self.assertRaises(cc.InvalidUsageError) as caught:
            self.store.get("k")
        self.assertIn("closed", str(caught.exception))

    def test_delete_and_compare_set(self):
        s = self.store
        self.assertTrue(s.compare_set("lock", None, "owner-1"))
        self.assertFalse(s.compare_set("lock", None, "owner-2"))
        self.assertEqual(s.get("lock"), b"owner-1")
        self.assertFalse(s.compare_set("lock", "owner-2", "owner-3"))
        self.assertTrue(s.compare_set("lock", "owner-1", b"owner-3"))
        self.assertEqual(s.get("lock"), b"owner-3")
        s.delete("lock")
        s.delete("lock")  # absent: still success
        with self.assertRaises(cc.TimeoutError):
            s.get("lock", timeout_ms=0)
        self.assertTrue(s.compare_set("lock", None, "again"))


class Retention(unittest.TestCase):
    def test_keys_outlive_the_last_connection_until_the_job_ttl(self):
        with cc.Server(LOOPBACK, job_ttl_ms=300) as server:
            with cc.Store(LOOPBACK, server.port, "kept", timeout_ms=5000) as s:
                s.add("counter", 100)
            with cc.Store(LOOPBACK, server.port, "kept", timeout_ms=5000) as s:
                self.assertEqual(s.get("counter", timeout_ms=0), b"100")
            time.sleep(1.0)  # no connection for longer than the TTL
            with cc.Store(LOOPBACK, server.port, "kept", timeout_ms=5000) as s:
                with self.assertRaises(cc.TimeoutError):
                    s.get("counter", timeout_ms=0)


class ServerLife(unittest.TestCase):
    def test_port_zero_takes_a_free_port_each_time(self):
        with cc.Server(LOOPBACK) as a, cc.Server(LOOPBACK) as b:
            self.assertGreater(a.port, 0)
            self.assertNotEqual(a.port, b.port)

    def test_a_taken_port_is_refused_in_words(self):
        with cc.Server(LOOPBACK) as a:
            with self.assertRaises(cc.Error) as caught:
                cc.Server(LOOPBACK, a.port)
            self.assertIn(str(a.port), str(caught.exception))

    def test_a_token_keeps_strangers_out(self):
        with cc.Server(LOOPBACK, token="s3cret") as server:
            with cc.Store(LOOPBACK, server.port, token="s3cret") as good:
                good.set("k", "v")
                self.assertEqual(good.get("k"), b"v")
            with self.assertRaises(cc.AuthError):
                cc.Store(LOOPBACK, server.port, token="wrong", timeout_ms=2000)

    def test_clients_of_a_stopped_server_get_an_error(self):
        server = cc.Server(LOOPBACK)
        store = cc.Store(LOOPBACK, server.port, timeout_ms=2000)
        store.set("k", "v")
        server.stop()
        server.stop()
        self.assertFalse(server.running)
        with self.assertRaises(cc.Error):
            store.get("k")
        store.close()

    def test_detach_hands_over_the_handle(self):
        server = cc.Server(LOOPBACK)
        handle = server.detach()
        self.assertIsInstance(handle, int)
        self.assertFalse(server.running)
        with self.assertRaises(cc.InvalidUsageError):
            server.detach()
        with cc.Store(LOOPBACK, server.port) as store:  # still serving: we own it now
            store.set("k", "v")
        api = cc._library.api()
        api.check(api.cc_server_stop(handle))


if __name__ == "__main__":
    unittest.main()
