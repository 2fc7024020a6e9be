"""Failures raise cc.Error subclasses carrying the result code and libcc's
own message (cc_last_error), the message of the thread that failed."""

import socket
import threading
import unittest

import cc
from cc import _errors


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ResultCodes(unittest.TestCase):
    def test_binding_names_match_libcc_for_every_code(self):
        for code, name in _errors.CODE_NAMES.items():
            self.assertTrue(cc.result_string(code).startswith(name + ":"),
                            "%d: libcc says %r, the binding %s" % (code, cc.result_string(code),
                                                                    name))

    def test_each_code_has_its_class(self):
        expected = {
            1: (cc.InvalidArgumentError, ValueError), 2: (cc.InvalidUsageError,),
            3: (cc.NoDeviceError,), 4: (cc.CudaError,), 5: (cc.NcclError,),
            6: (cc.SystemCallError, OSError), 7: (cc.RendezvousError, ConnectionError),
            8: (cc.AuthError,), 9: (cc.MismatchError,), 10: (cc.TimeoutError, TimeoutError),
            11: (cc.PeerFailedError,), 12: (cc.AbortedError,), 13: (cc.InternalError,),
            14: (cc.BufferTooSmallError,)}
        for code, classes in expected.items():
            e = _errors.error_for(code, "words %d" % code)
            for cls in classes + (cc.Error,):
                self.assertIsInstance(e, cls)
            self.assertEqual((e.code, e.message, str(e)), (code, "words %d" % code,
                                                           "words %d" % code))
            self.assertEqual(e.code_name, _errors.CODE_NAMES[code])

    def test_a_code_from_a_newer_libcc_is_a_plain_error(self):
        e = _errors.error_for(57, "new words")
        self.assertIs(type(e), cc.Error)
        self.assertEqual((e.code, e.code_name, str(e)), (57, "cc result 57", "new words"))


class RealFailures(unittest.TestCase):
    def test_server_refuses_a_bad_port_in_libcc_words(self):
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            cc.Server("127.0.0.1", 70000)
        self.assertEqual(caught.exception.code, 1)
        self.assertIn("cc_server_start: port 70000 is out of range 0..65535", str(caught.exception))

    def test_store_with_no_server_names_the_address(self):
        port = _free_port()
        with self.assertRaises(cc.Error) as caught:
            cc.Store("127.0.0.1", port, timeout_ms=300)
        e = caught.exception
        self.assertIn(e.code, (_errors.ERR_RENDEZVOUS, _errors.ERR_TIMEOUT))
        self.assertIn("127.0.0.1", str(e))
        self.assertIn(str(port), str(e))

    def test_words_belong_to_the_thread_that_failed(self):
        results = {}
        barrier = threading.Barrier(2)

        def bad_port(name, port):
            barrier.wait()
            for _ in range(50):
                try:
                    cc.Server("127.0.0.1", port)
                except cc.Error as e:
                    results.setdefault(name, set()).add(str(e))

        threads = [threading.Thread(target=bad_port, args=("a", 70001)),
                   threading.Thread(target=bad_port, args=("b", -5))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results["a"], {"cc_server_start: port 70001 is out of range 0..65535 "
                                        "(0 = any free port)"})
        self.assertEqual(results["b"], {"cc_server_start: port -5 is out of range 0..65535 "
                                        "(0 = any free port)"})


if __name__ == "__main__":
    unittest.main()
