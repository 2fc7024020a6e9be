"""cc.Store (the key-value store on a rendezvous server) and cc.Server (an
embedded rendezvous server, the same one cc-rendezvous runs)."""

import ctypes

from . import _config, _library
from ._errors import ERR_BUFFER_TOO_SMALL, invalid_argument
from ._handle import OwnedHandle


def _key(key, name="key"):
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    raise invalid_argument("%s must be a str or bytes, not %s" % (name, type(key).__name__))


def _value(value, name="value"):
    if isinstance(value, str):
        return value.encode("utf-8")
    try:
        return bytes(memoryview(value))
    except TypeError:
        raise invalid_argument("%s must be bytes-like or a str, not %s"
                               % (name, type(value).__name__)) from None


def _timeout(timeout_ms):
    """None: the store's default deadline (-1 to libcc); 0: do not wait."""
    if timeout_ms is None:
        return -1
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
        raise invalid_argument("timeout_ms must be None (the store's deadline) or an int >= 0, "
                               "not %r" % (timeout_ms,))
    return min(timeout_ms, 2 ** 31 - 1)


class Store(OwnedHandle):
    """A connection to the key-value store of job `job_id` on a rendezvous
    server: Store(addr, port, job_id=None, timeout_ms=None, token=None) or
    Store("tcp://host:port", ...), or in an etcd cluster:
    Store("etcd://host:port[,host:port...]", job_id=...) (with both the port
    is not used; CC_ETCD_* give etcd's auth file and CA).
    TLS to cc's server: tls_ca= (the CA the server's certificate is checked
    against; TLS on), tls_server_name=, and tls_cert= with tls_key= where the
    server requires client certificates (mTLS); None: CC_TLS_CA etc.,
    "": none whatever they say.
    Values are bytes (a str is stored as UTF-8). Not thread-safe: one
    connection per thread, or a lock around it."""

    _FREE = "cc_store_close"

    def __init__(self, addr, port=0, job_id=None, *, timeout_ms=None, token=None, tls_ca=None,
                 tls_server_name=None, tls_cert=None, tls_key=None):
        api = _library.api()
        if not isinstance(addr, str):
            raise invalid_argument("addr must be a str (a host name, an address, tcp://... or "
                                   "etcd://...), "
                                   "not %r" % (addr,))
        if isinstance(port, bool) or not isinstance(port, int):
            raise invalid_argument("port must be an int, not %r" % (port,))
        config = _config.make(timeout_ms=timeout_ms, token=token, tls_ca=tls_ca,
                              tls_server_name=tls_server_name, tls_cert=tls_cert, tls_key=tls_key)
        handle = ctypes.c_void_p()
        api.check(api.cc_store_connect(ctypes.byref(handle), addr.encode("utf-8"), port,
                                       None if job_id is None else _key(job_id, "job_id"),
                                       ctypes.byref(config)))
        self._api = api
        self._handle = handle.value
        self.addr, self.port = addr, port

    def _gone(self):
        return "this cc.Store is closed"

    def set(self, key, value):
        """Sets key to value (bytes, or a str stored as UTF-8)."""
        data = _value(value)
        self._api.check(self._api.cc_store_set(self._h(), _key(key), data, len(data)))

    def get(self, key, timeout_ms=None):
        """The value of key as bytes, waiting until it exists (timeout_ms None:
        the store's deadline; 0: do not wait). cc.TimeoutError past it."""
        k, h = _key(key), self._h()
        length = ctypes.c_size_t(0)
        cap = 1024
        while True:
            buf = ctypes.create_string_buffer(cap)
            r = self._api.cc_store_get(h, k, buf, cap, ctypes.byref(length), _timeout(timeout_ms))
            if r == ERR_BUFFER_TOO_SMALL and length.value > cap:
                cap = length.value  # the key exists now: the second get does not wait
                continue
            self._api.check(r)
            return buf.raw[:length.value]

    def add(self, key, delta=1):
        """Atomically adds delta to the integer under key (absent = 0); returns
        the new value."""
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise invalid_argument("delta must be an int, not %r" % (delta,))
        result = ctypes.c_int64(0)
        self._api.check(self._api.cc_store_add(self._h(), _key(key), delta, ctypes.byref(result)))
        return result.value

    def wait(self, keys, timeout_ms=None):
        """Waits until every key exists; cc.TimeoutError naming the missing ones."""
        if isinstance(keys, (str, bytes)):
            keys = [keys]
        encoded = [_key(k, "keys[%d]" % i) for i, k in enumerate(keys)]
        array = (ctypes.c_char_p * max(1, len(encoded)))(*encoded)
        self._api.check(self._api.cc_store_wait(self._h(), array, len(encoded),
                                                _timeout(timeout_ms)))

    def delete(self, key):
        """Deletes key; deleting an absent key succeeds."""
        self._api.check(self._api.cc_store_delete(self._h(), _key(key)))

    def compare_set(self, key, expected, desired):
        """Sets key to desired if its value equals expected (expected None:
        only if key is absent). Returns whether it did."""
        want = _value(desired, "desired")
        had = None if expected is None else _value(expected, "expected")
        swapped = ctypes.c_int(0)
        self._api.check(self._api.cc_store_compare_set(
            self._h(), _key(key), had, 0 if had is None else len(had), want, len(want),
            ctypes.byref(swapped)))
        return bool(swapped.value)

    def close(self):
        """Closes the connection; closing twice is harmless."""
        self._free()


class Server(OwnedHandle):
    """An embedded rendezvous server on its own thread:
    Server(bind_addr=None, port=0, token=None, job_ttl_ms=None, tls_cert=None,
    tls_key=None, tls_client_ca=None). bind_addr
    None listens on every IPv4 interface ("::" for IPv6); port 0 takes any
    free port, read back from .port. A job's keys outlive its connections for
    job_ttl_ms (None: CC_JOB_TTL_MS, else 1 hour; 0: until stopped). With
    tls_cert and tls_key (None: CC_TLS_CERT, CC_TLS_KEY) it speaks TLS only;
    tls_client_ca (CC_TLS_CLIENT_CA) makes it require client certificates
    from that CA (mTLS). stop()
    (or leaving a `with` block) stops it, and every client still waiting gets
    an error."""

    _FREE = "cc_server_stop"

    def __init__(self, bind_addr=None, port=0, *, token=None, job_ttl_ms=None, tls_cert=None,
                 tls_key=None, tls_client_ca=None):
        api = _library.api()
        if bind_addr is not None and not isinstance(bind_addr, str):
            raise invalid_argument("bind_addr must be None or a str, not %r" % (bind_addr,))
        if isinstance(port, bool) or not isinstance(port, int):
            raise invalid_argument("port must be an int, not %r" % (port,))
        config = _config.make(token=token, job_ttl_ms=job_ttl_ms, tls_cert=tls_cert,
                              tls_key=tls_key, tls_client_ca=tls_client_ca)
        handle = ctypes.c_void_p()
        api.check(api.cc_server_start(ctypes.byref(handle),
                                      None if bind_addr is None else bind_addr.encode("utf-8"),
                                      port, ctypes.byref(config)))
        self._api = api
        self._handle = handle.value
        port_out = ctypes.c_int(0)
        api.check(api.cc_server_port(self._handle, ctypes.byref(port_out)))
        self.port = port_out.value
        self.bind_addr = bind_addr

    @property
    def running(self):
        return self._handle is not None

    def _gone(self):
        return "this cc.Server is stopped or detached"

    def detach(self):
        """Hands the server's cc_server_t (an int) to the caller, who then
        stops it with cc_server_stop; this object no longer owns it."""
        handle = self._h()
        self._handle = None
        return handle

    def stop(self):
        """Stops the server; stopping twice is harmless."""
        self._free()
