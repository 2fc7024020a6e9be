"""cc_config_t for ctypes.

The layout follows include/cc/cc.h field for field. `size` tells libcc how
much of the struct this binding knows, so a newer libcc that appended fields
treats the missing ones as undefined (their CC_* variable or default), and an
older one ignores nothing it needs. Fields left None stay undefined.
"""

import ctypes
import os

from ._errors import invalid_argument as _invalid

CONFIG_MAGIC = 0xCC0C0F19
UNDEF_INT = -(2 ** 31)  # CC_CONFIG_UNDEF_INT (INT32_MIN)
# The version of cc.h this struct was written from (CC_VERSION_CODE 0.1.0).
HEADER_VERSION = 100

RENDEZVOUS = {"embedded": 1, "external": 2}
FAST_ALLREDUCE = {"off": 0, "auto": 1, "require": 2, False: 0, True: 1}


class ConfigStruct(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("device", ctypes.c_int),
        ("timeout_ms", ctypes.c_int),
        ("job_id", ctypes.c_char_p),
        ("token", ctypes.c_char_p),
        ("rendezvous", ctypes.c_int),
        ("heartbeat_ms", ctypes.c_int),
        ("heartbeat_misses", ctypes.c_int),
        ("fast_allreduce", ctypes.c_int),
        ("fast_allreduce_plan", ctypes.c_char_p),
        ("job_ttl_ms", ctypes.c_int),
        ("tls_ca", ctypes.c_char_p),
        ("tls_server_name", ctypes.c_char_p),
        ("tls_cert", ctypes.c_char_p),
        ("tls_key", ctypes.c_char_p),
        ("tls_client_ca", ctypes.c_char_p),
    ]

# The TLS keywords: PEM file paths (a str or a path), or the server's name.
TLS_FIELDS = ("tls_ca", "tls_server_name", "tls_cert", "tls_key", "tls_client_ca")


def _int_field(name, value, lowest):
    if value is None:
        return UNDEF_INT
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid("%s must be an int, not %r" % (name, value))
    if value < lowest or value > 2 ** 31 - 1:
        raise _invalid("%s=%d is out of range (%d .. 2147483647)" % (name, value, lowest))
    return value


def _text_field(name, value):
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _invalid("%s must be a non-empty str, not %r" % (name, value))
    return value.encode("utf-8")


def _tls_field(name, value):
    """None: the CC_TLS_* variable decides; "": none, whatever it says."""
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise _invalid("%s must be a str or a path, not %r" % (name, value))
    return value.encode("utf-8")


def _choice(name, value, choices):
    if value is None:
        return UNDEF_INT
    key = value.lower() if isinstance(value, str) else value
    if key not in choices:
        raise _invalid("%s=%r is not one of %s" % (
            name, value, ", ".join(repr(c) for c in choices if isinstance(c, str))))
    return choices[key]


def make(device=None, timeout_ms=None, job_id=None, token=None, rendezvous=None,
         heartbeat_ms=None, heartbeat_misses=None, fast_allreduce=None, fast_allreduce_plan=None,
         job_ttl_ms=None, tls_ca=None, tls_server_name=None, tls_cert=None, tls_key=None,
         tls_client_ca=None):
    """A filled cc_config_t; None leaves a field to its CC_* variable or default.
    The struct keeps the bytes of its strings alive."""
    config = ConfigStruct()
    config.size = ctypes.sizeof(ConfigStruct)
    config.magic = CONFIG_MAGIC
    config.version = HEADER_VERSION
    config.device = _int_field("device", device, 0)
    config.timeout_ms = _int_field("timeout_ms", timeout_ms, 0)
    config.job_id = _text_field("job_id", job_id)
    config.token = _text_field("token", token)
    config.rendezvous = _choice("rendezvous", rendezvous, RENDEZVOUS)
    config.heartbeat_ms = _int_field("heartbeat_ms", heartbeat_ms, 1)
    config.heartbeat_misses = _int_field("heartbeat_misses", heartbeat_misses, 1)
    config.fast_allreduce = _choice("fast_allreduce", fast_allreduce, FAST_ALLREDUCE)
    config.fast_allreduce_plan = _text_field("fast_allreduce_plan", fast_allreduce_plan)
    config.job_ttl_ms = _int_field("job_ttl_ms", job_ttl_ms, 0)
    config.tls_ca = _tls_field("tls_ca", tls_ca)
    config.tls_server_name = _tls_field("tls_server_name", tls_server_name)
    config.tls_cert = _tls_field("tls_cert", tls_cert)
    config.tls_key = _tls_field("tls_key", tls_key)
    config.tls_client_ca = _tls_field("tls_client_ca", tls_client_ca)
    return config
