"""How cc reads arrays: host memory refused with a message; the pointer, count,
dtype, device and stream read from __cuda_array_interface__ (v2, v3) and
DLPack (versioned and not), with the DLPack deleter called exactly once."""

import array
import gc
import unittest

import cc
from cc import _arrays

import helpers

PTR = 0x7F00_0000_1000  # a device address as a producer would report it; never touched

try:
    import numpy
except ImportError:
    numpy = None


class HostMemoryIsRefused(unittest.TestCase):
    def assert_refused(self, x, *phrases):
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            cc.array_info(x)
        words = str(caught.exception)
        self.assertEqual(caught.exception.code, 1)
        for phrase in phrases:
            self.assertIn(phrase, words)
        return words

    def test_python_buffers(self):
        for x, name in ((b"abc", "bytes"), (bytearray(4), "bytearray"),
                        (memoryview(b"ab"), "memoryview")):
            self.assert_refused(x, "x is a %s in host memory" % name, "cc needs a CUDA array")

    def test_something_that_is_no_array(self):
        self.assert_refused([1.0, 2.0], "x is a list, which is not an array cc can read")
        self.assert_refused(array.array("f", [1.0]), "array.array", "not an array cc can read")

    @unittest.skipIf(numpy is None, "numpy is not installed for this Python")
    def test_numpy_arrays(self):
        self.assert_refused(numpy.ones(4, dtype=numpy.float32), "numpy.ndarray", "CPU memory",
                            "move it to the GPU first")

    def test_a_dlpack_producer_in_host_memory_is_refused_before_export(self):
        cpu = helpers.DLPackProducer(1, 0, PTR, [4], 2, 32)
        self.assert_refused(cpu, "lives in CPU memory (DLPack device CPU)", "move it to the GPU")
        self.assertEqual(cpu.stream_args, [])  # never asked to export
        pinned = helpers.DLPackProducer(3, 0, PTR, [4], 2, 32)
        self.assert_refused(pinned, "CUDA host (pinned) memory")


class CudaArrayInterface(unittest.TestCase):
    def test_version_2_reads_pointer_count_dtype(self):
        x = helpers.FakeCudaArray(shape=(4, 8), typestr="<f4", data=(PTR, False), version=2)
        info = cc.array_info(x)
        self.assertEqual((info.ptr, info.count, info.dtype, info.stream, info.source),
                         (PTR, 32, _arrays.FLOAT32, None, "cuda_array_interface"))

    def test_every_type_string_cc_carries(self):
        for typestr, dtype in (("|i1", _arrays.INT8), ("|u1", _arrays.UINT8),
                               ("<i4", _arrays.INT32), ("<u4", _arrays.UINT32),
                               ("<i8", _arrays.INT64), ("<u8", _arrays.UINT64),
                               ("<f2", _arrays.FLOAT16), ("<f8", _arrays.FLOAT64)):
            x = helpers.FakeCudaArray(shape=(3,), typestr=typestr, data=(PTR, False), version=3)
            self.assertEqual(cc.array_info(x).dtype, dtype, typestr)

    def test_version_3_carries_the_producer_stream(self):
        x = helpers.FakeCudaArray(shape=(2,), typestr="<f4", data=(PTR, False), version=3,
                                  stream=0xABC0)
        self.assertEqual(cc.array_info(x).stream, 0xABC0)
        v2 = helpers.FakeCudaArray(shape=(2,), typestr="<f4", data=(PTR, False), version=2,
                                   stream=0xABC0)
        self.assertIsNone(cc.array_info(v2).stream)  # v2 has no stream field

    def test_stream_zero_is_refused(self):
        x = helpers.FakeCudaArray(shape=(2,), typestr="<f4", data=(PTR, False), version=3,
                                  stream=0)
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            cc.array_info(x)
        self.assertIn("names stream 0, which the interface forbids", str(caught.exception))

    def test_strides_contiguous_accepted_strided_refused(self):
        ok = helpers.FakeCudaArray(shape=(4, 8), typestr="<f4", data=(PTR, False),
                                   strides=(32, 4), version=3)
        self.assertEqual(cc.array_info(ok).count, 32)
        unit = helpers.FakeCudaArray(shape=(1, 8), typestr="<f4", data=(PTR, False),
                                     strides=(999, 4), version=3)  # extent 1: any stride
        self.assertEqual(cc.array_info(unit).count, 8)
        strided = helpers.FakeCudaArray(shape=(4, 8), typestr="<f4", data=(PTR, False),
                                        strides=(4, 16), version=3)
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            cc.array_info(strided)
        self.assertIn("not C-contiguous (shape (4, 8), strides (4, 16) bytes)",
                      str(caught.exception))

    def test_types_cc_cannot_carry_say_what_to_do(self):
        cases = (("<c8", "view a complex array as its real dtype"),
                 ("|b1", "view a bool array as uint8"),
                 ("<V2", "pass such arrays through DLPack"),
                 (">f4", "big-endian"))
        for typestr, phrase in cases:
            x = helpers.FakeCudaArray(shape=(2,), typestr=typestr, data=(PTR, False), version=3)
            with self.assertRaises(cc.InvalidArgumentError) as caught:
                cc.array_info(x)
            self.assertIn(phrase, str(caught.exception), typestr)

    def test_malformed_interfaces(self):
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            cc.array_info(helpers.FakeCudaArray(shape=(2,), data=(PTR, False)))
        self.assertIn("lacks 'typestr'", str(caught.exception))
        masked = helpers.FakeCudaArray(shape=(2,), typestr="<f4", data=(PTR, False),
                                       mask=object(), version=3)
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            cc.array_info(masked)
        self.assertIn("masked array", str(caught.exception))

    def test_read_only_arrays_cannot_receive(self):
        x = helpers.FakeCudaArray(shape=(2,), typestr="<f4", data=(PTR, True), version=3)
        self.assertEqual(_arrays.view(x, "x", writable=False).ptr, PTR)
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            _arrays.view(x, "out", writable=True)
        self.assertIn("out is read-only", str(caught.exception))

    def test_an_empty_array_may_have_no_pointer(self):
        x = helpers.FakeCudaArray(shape=(0, 4), typestr="<f4", data=(0, False), version=3)
        info = cc.array_info(x)
        self.assertEqual((info.ptr, info.count), (0, 0))

    def test_device_from_a_cupy_style_device_attribute(self):
        class Device:
            id = 3
        x = helpers.FakeCudaArray(shape=(2,), typestr="<f4", data=(PTR, False), version=3)
        x.device = Device()
        self.assertEqual(cc.array_info(x).device, 3)


class DLPack(unittest.TestCase):
    def tearDown(self):
        gc.collect()

    def test_versioned_capsule_is_read_and_deleted_once(self):
        x = helpers.DLPackProducer(2, 1, PTR, [2, 3], 2, 32, byte_offset=64)
        info = cc.array_info(x)
        self.assertEqual((info.ptr, info.count, info.dtype, info.device, info.source),
                         (PTR + 64, 6, _arrays.FLOAT32, 1, "dlpack"))
        self.assertEqual(x.deleted, 1)

    def test_unversioned_producer_is_read_and_deleted_once(self):
        x = helpers.DLPackProducer(2, 0, PTR, [5], 4, 16, supports_versioned=False)
        info = cc.array_info(x)
        self.assertEqual((info.count, info.dtype), (5, _arrays.BFLOAT16))
        self.assertEqual(x.deleted, 1)
        self.assertEqual(len(x.stream_args), 2)  # the 1.0 request, refused, then the legacy one

    def test_every_dlpack_dtype_cc_carries(self):
        cases = (((0, 8), _arrays.INT8), ((1, 8), _arrays.UINT8), ((0, 32), _arrays.INT32),
                 ((1, 32), _arrays.UINT32), ((0, 64), _arrays.INT64), ((1, 64), _arrays.UINT64),
                 ((2, 16), _arrays.FLOAT16), ((2, 64), _arrays.FLOAT64),
                 ((4, 16), _arrays.BFLOAT16), ((10, 8), _arrays.FLOAT8_E4M3),
                 ((12, 8), _arrays.FLOAT8_E5M2))
        for (code, bits), dtype in cases:
            x = helpers.DLPackProducer(2, 0, PTR, [7], code, bits)
            self.assertEqual(cc.array_info(x).dtype, dtype, (code, bits))
            self.assertEqual(x.deleted, 1)

    def test_strides_in_elements(self):
        ok = helpers.DLPackProducer(2, 0, PTR, [4, 8], 2, 32, strides=[8, 1])
        self.assertEqual(cc.array_info(ok).count, 32)
        transposed = helpers.DLPackProducer(2, 0, PTR, [4, 8], 2, 32, strides=[1, 4])
        with self.assertRaises(cc.InvalidArgumentError) as caught:
            cc.array_info(transposed)
        self.assertIn("not C-contiguous (shape (4, 8), strides (1, 4) elements)",
                      str(caught.exception))
        gc.collect()
        self.assertEqual(transposed.deleted, 1)  # refused, but the capsule still freed

    def test_dtypes_cc_cannot_carry(self):
        for code, bits, lanes, phrase in ((6, 8, 1, "view a bool array as uint8"),
                                          (5, 64, 1, "complex"),
                                          (2, 32, 4, "4 lanes")):
            x = helpers.DLPackProducer(2, 0, PTR, [3], code, bits, lanes=lanes)
            with self.assertRaises(cc.InvalidArgumentError) as caught:
                cc.array_info(x)
            self.assertIn(phrase, str(caught.exception))

    def test_the_launch_stream_goes_to_the_producer(self):
        x = helpers.DLPackProducer(2, 0, PTR, [3], 2, 32)
        _arrays.view(x, "x", launch_stream=0x5150)
        cc.array_info(x)
        # A stream of ours, then the legacy default stream (1) when none is known.
        self.assertEqual(x.stream_args, [0x5150, 1])


class Streams(unittest.TestCase):
    def test_stream_arguments(self):
        class TorchLike:
            cuda_stream = 0x1111

        class CupyLike:
            ptr = 0x2222

        class NumbaLike:
            class handle:
                value = 0x3333

        self.assertEqual(_arrays.stream_handle(0), 0)
        self.assertEqual(_arrays.stream_handle(0x42), 0x42)
        self.assertEqual(_arrays.stream_handle(TorchLike()), 0x1111)
        self.assertEqual(_arrays.stream_handle(CupyLike()), 0x2222)
        self.assertEqual(_arrays.stream_handle(NumbaLike()), 0x3333)
        for bad, phrase in ((-1, "never negative"), ("s", "is not a stream"),
                            (True, "is not a stream")):
            with self.assertRaises(cc.InvalidArgumentError) as caught:
                _arrays.stream_handle(bad)
            self.assertIn(phrase, str(caught.exception))

    def test_the_launch_stream_defaults_to_the_producers(self):
        named = helpers.FakeCudaArray(shape=(2,), typestr="<f4", data=(PTR, False), version=3,
                                      stream=0x7777)
        legacy = helpers.FakeCudaArray(shape=(2,), typestr="<f4", data=(PTR, False), version=3,
                                       stream=1)
        silent = helpers.FakeCudaArray(shape=(2,), typestr="<f4", data=(PTR, False), version=2)
        self.assertEqual(_arrays.launch_stream(None, cc.array_info(named)), 0x7777)
        self.assertEqual(_arrays.launch_stream(None, cc.array_info(legacy)), 0)
        self.assertEqual(_arrays.launch_stream(None, cc.array_info(silent)), 0)
        self.assertEqual(_arrays.launch_stream(0x99, cc.array_info(named)), 0x99)


if __name__ == "__main__":
    unittest.main()
