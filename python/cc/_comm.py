"""cc.Comm: a communicator, and cc.group().

A collective's path does, in order: read the arrays (pointers, counts,
dtypes: no CUDA call for a torch tensor), check them against each other and
the communicator's device, pick the stream, and make one libcc call, which
only enqueues. Nothing in it synchronises the host, allocates device memory,
or calls a CUDA API that stream capture forbids, so a collective may be
captured into a CUDA graph and replayed (cc.h's rules for graphs apply).
"""

import ctypes
import os
import sys

from . import _arrays, _config, _library
from ._errors import invalid_argument
from ._handle import OwnedHandle

SUM, PROD, MAX, MIN, AVG = "sum", "prod", "max", "min", "avg"
_OPS = {"sum": 0, "prod": 1, "product": 1, "max": 2, "min": 3, "avg": 4, "average": 4}


def _op_code(op):
    if isinstance(op, str):
        code = _OPS.get(op.lower())
        if code is not None:
            return code
    elif isinstance(op, int) and not isinstance(op, bool) and 0 <= op < 5:
        return op
    raise invalid_argument("op=%r is not a reduction cc has: use 'sum', 'prod', 'max', 'min' "
                           "or 'avg'" % (op,))


def _int_arg(name, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_argument("%s must be an int, not %r" % (name, value))
    return value


class _Group:
    """cc_group_start on entry, cc_group_end on exit (also when the body
    raised, so the thread's nesting stays balanced; the body's error wins)."""

    def __enter__(self):
        api = _library.api()
        api.check(api.cc_group_start())
        return self

    def __exit__(self, exc_type, exc, tb):
        api = _library.api()
        r = api.cc_group_end()
        if exc_type is None:
            api.check(r)
        return False


def group():
    """Fuses the operations issued inside `with cc.group():` (per thread; may
    nest), as ncclGroupStart/End: needed for send/recv pairs that would
    otherwise wait on each other, and cheaper for many small collectives."""
    return _Group()


class Comm(OwnedHandle):
    """A communicator of `world_size` ranks, this process being `rank`.

    Comm(rank, world_size, master_addr, master_port=0, timeout_ms=None,
         device=None, job_id=None, token=None, rendezvous=None,
         heartbeat_ms=None, heartbeat_misses=None, fast_allreduce=None,
         fast_allreduce_plan=None, tls_ca=None, tls_server_name=None,
         tls_cert=None, tls_key=None, tls_client_ca=None)
    joins the rendezvous at master_addr:master_port, or at "tcp://host:port"
    (rank 0 hosts it unless rendezvous="external"), or in the etcd cluster
    master_addr names ("etcd://host:port[,host:port...]"; with both forms
    master_port is unused) and initialises NCCL on `device` (default
    LOCAL_RANK % device count). Blocking. Options left None come from their
    CC_* variable or cc's default. The tls_* options are PEM file paths for
    TLS on the rendezvous connection (tls_ca: TLS on) and on rank 0's
    embedded server (tls_cert, tls_key, tls_client_ca), as CC_TLS_* are;
    "": none, whatever CC_TLS_* say. Comm.from_env() reads rank, size, local
    rank and address from the environment (torchrun, Open MPI, Slurm, cc-run).

    Destroy it with destroy() or a `with` block; abort() stops it from any
    thread. Calls on one Comm must come from one thread at a time.
    """

    _FREE = "cc_comm_destroy"

    def __init__(self, rank, world_size, master_addr, master_port=0, *, timeout_ms=None,
                 device=None, job_id=None, token=None, rendezvous=None, heartbeat_ms=None,
                 heartbeat_misses=None, fast_allreduce=None, fast_allreduce_plan=None,
                 tls_ca=None, tls_server_name=None, tls_cert=None, tls_key=None,
                 tls_client_ca=None):
        api = _library.api()
        _int_arg("rank", rank)
        _int_arg("world_size", world_size)
        _int_arg("master_port", master_port)
        if not isinstance(master_addr, str):
            raise invalid_argument("master_addr must be a str (a host name, an address, "
                                   "tcp://... or etcd://...), not %r" % (master_addr,))
        config = _config.make(device=device, timeout_ms=timeout_ms, job_id=job_id, token=token,
                              rendezvous=rendezvous, heartbeat_ms=heartbeat_ms,
                              heartbeat_misses=heartbeat_misses, fast_allreduce=fast_allreduce,
                              fast_allreduce_plan=fast_allreduce_plan, tls_ca=tls_ca,
                              tls_server_name=tls_server_name, tls_cert=tls_cert, tls_key=tls_key,
                              tls_client_ca=tls_client_ca)
        handle = ctypes.c_void_p()
        api.check(api.cc_comm_init(ctypes.byref(handle), rank, world_size,
                                   master_addr.encode("utf-8"), master_port,
                                   ctypes.byref(config)))
        self._adopt(api, handle.value)

    @classmethod
    def from_env(cls, **config):
        """A Comm from the launcher's environment (CC_RANK/RANK/..., see the
        README's table); a missing or malformed variable is an
        InvalidArgumentError naming it. Keyword options as for Comm()."""
        api = _library.api()
        made = _config.make(**config)
        handle = ctypes.c_void_p()
        api.check(api.cc_comm_init_from_env(ctypes.byref(handle), ctypes.byref(made)))
        return cls._wrap(api, handle.value)

    @classmethod
    def _wrap(cls, api, handle):
        comm = cls.__new__(cls)
        comm._adopt(api, handle)
        return comm

    def _adopt(self, api, handle):
        self._api = api
        self._handle = handle
        value = ctypes.c_int(0)
        api.check(api.cc_comm_rank(handle, ctypes.byref(value)))
        self._rank = value.value
        api.check(api.cc_comm_size(handle, ctypes.byref(value)))
        self._size = value.value
        api.check(api.cc_comm_device(handle, ctypes.byref(value)))
        self._device = value.value

    # ------------------------------------------------------------- identity

    @property
    def rank(self):
        return self._rank

    @property
    def size(self):
        return self._size

    @property
    def device(self):
        """The CUDA device ordinal this communicator runs on."""
        return self._device

    @property
    def handle(self):
        """The cc_comm_t as an int (for C code sharing this communicator)."""
        return self._h()

    def _gone(self):
        return "this cc.Comm (rank %d of %d) was destroyed; create a new one" % (self._rank,
                                                                                 self._size)

    def __repr__(self):
        state = "destroyed" if self._handle is None else "cuda:%d" % self._device
        return "cc.Comm(rank=%d, size=%d, %s)" % (self._rank, self._size, state)

    # ------------------------------------------------------------- life

    def destroy(self):
        """Compares every rank's calls up to its last, leaves the rendezvous
        cleanly and frees the communicator. Blocking: waits for the other
        ranks' destroy, up to the communicator's deadline. Raises
        cc.MismatchError naming the first op whose calls differ when they
        do (the communicator is freed all the same); destroying twice is
        harmless."""
        self._free()

    def abort(self):
        """Stops pending work and tells the other ranks; later calls raise
        cc.AbortedError. Safe from any thread; destroy() still frees it."""
        self._api.check(self._api.cc_comm_abort(self._h()))

    def split(self, color, key=None, **config):
        """Ranks passing the same color form a new Comm, ordered by key
        (default: this rank). A negative color returns None. Collective."""
        _int_arg("color", color)
        key = self._rank if key is None else _int_arg("key", key)
        made = _config.make(**config)
        handle = ctypes.c_void_p()
        self._api.check(self._api.cc_comm_split(self._h(), color, key, ctypes.byref(handle),
                                                ctypes.byref(made)))
        return None if not handle.value else Comm._wrap(self._api, handle.value)

    def shrink(self, timeout_ms=0):
        """A new Comm of the surviving ranks after a failure, renumbered
        densely in order (cc_comm_shrink); timeout_ms 0: the communicator's
        deadline."""
        handle = ctypes.c_void_p()
        self._api.check(self._api.cc_comm_shrink(self._h(), _int_arg("timeout_ms", timeout_ms),
                                                 ctypes.byref(handle)))
        return Comm._wrap(self._api, handle.value)

    def regrow(self, world_size, timeout_ms=0):
        """A new Comm of world_size ranks once replacements have joined
        (cc_comm_regrow); survivors keep their numbers."""
        handle = ctypes.c_void_p()
        self._api.check(self._api.cc_comm_regrow(self._h(), _int_arg("world_size", world_size),
                                                 _int_arg("timeout_ms", timeout_ms),
                                                 ctypes.byref(handle)))
        return Comm._wrap(self._api, handle.value)

    @property
    def generation(self):
        """0 for a first communicator, counting up with each shrink/regrow."""
        value = ctypes.c_int(0)
        self._api.check(self._api.cc_comm_generation(self._h(), ctypes.byref(value)))
        return value.value

    def check(self):
        """Raises the error this Comm's next call would (PeerFailedError,
        TimeoutError, AbortedError) once it has failed; returns None while it
        works (cc_comm_check). After waiting for a stream, no error means the
        collectives that stream ran on this Comm completed on every rank."""
        self._api.check(self._api.cc_comm_check(self._h()))

    def dump_trace(self, dir=None):
        """Writes this Comm's flight recorder (its last CC_TRACE_BUFFER calls,
        their streams and times) as JSON into dir, or CC_TRACE_DIR when dir is
        None, one file per rank that `cc-doctor trace DIR` reads
        (cc_comm_dump_trace). Works on a failed Comm too."""
        path = None if dir is None else os.fsencode(dir)
        self._api.check(self._api.cc_comm_dump_trace(self._h(), path))

    def failed_ranks(self):
        """After a shrink or regrow: the previous generation's ranks this Comm
        left out or replaced; on a generation-0 Comm: the ranks announced as
        failed so far (cc_comm_failed_ranks)."""
        cap = max(self._size, 1)
        while True:
            ranks = (ctypes.c_int * cap)()
            count = ctypes.c_int(0)
            self._api.check(self._api.cc_comm_failed_ranks(self._h(), ranks, cap,
                                                           ctypes.byref(count)))
            if count.value <= cap:
                return list(ranks[:count.value])
            cap = count.value  # a shrunk Comm names more ranks than it has

    # ------------------------------------------------------------- arrays

    def _check_device(self, v, name):
        if v.device is not None and v.device != self._device:
            raise invalid_argument(
                "%s is on cuda:%d but this communicator (rank %d) runs on cuda:%d: move it "
                "there, or create the Comm with device=%d" % (name, v.device, self._rank,
                                                              self._device, v.device))

    def _views(self, x, out, stream, writes_x):
        """Views of x and out (out None: in place), checked against the
        device, and the launch stream."""
        s = None if stream is None else _arrays.stream_handle(stream)
        vx = _arrays.view(x, "x", s, writable=writes_x)
        self._check_device(vx, "x")
        if out is None:
            vo = vx
        else:
            vo = _arrays.view(out, "out", s, writable=True)
            self._check_device(vo, "out")
            if vo.dtype != vx.dtype:
                raise invalid_argument("out has dtype %s but x has %s: they must match"
                                       % (_arrays.DTYPE_NAMES[vo.dtype],
                                          _arrays.DTYPE_NAMES[vx.dtype]))
        launch = s if s is not None else _arrays.launch_stream(None, vx)
        if vx.source != "torch" or vo.source != "torch":
            _arrays.order((vx,) if vo is vx else (vx, vo), launch, self._device)
        return vx, vo, launch

    def _same_count(self, vx, vo, factor_x, factor_out, what):
        if vx.count * factor_x != vo.count * factor_out:
            raise invalid_argument("%s (x has %d elements, out has %d, %d ranks)"
                                   % (what, vx.count, vo.count, self._size))

    def _views_same_size(self, x, out, stream, name):
        """_views for an operation writing out, or x itself when out is None;
        out must be as large as x."""
        vx, vo, s = self._views(x, out, stream, out is None)
        if vo is not vx:
            self._same_count(vx, vo, 1, 1, "%s needs out as large as x" % name)
        return vx, vo, s

    # ------------------------------------------------------------- collectives

    def allreduce(self, x, out=None, *, op=SUM, stream=None):
        """Reduces x across ranks into out (None: in place). Returns out or x."""
        code = _op_code(op)
        vx, vo, s = self._views_same_size(x, out, stream, "allreduce")
        self._api.check(self._api.cc_allreduce(vx.ptr, vo.ptr, vx.count, vx.dtype, code,
                                               self._h(), s))
        return x if out is None else out

    def broadcast(self, x, out=None, *, root=0, stream=None):
        """Copies root's x into every rank's out (None: into x)."""
        _int_arg("root", root)
        vx, vo, s = self._views_same_size(x, out, stream, "broadcast")
        self._api.check(self._api.cc_broadcast(vx.ptr, vo.ptr, vx.count, vx.dtype, root,
                                               self._h(), s))
        return x if out is None else out

    def reduce(self, x, out=None, *, op=SUM, root=0, stream=None):
        """Reduces x across ranks into root's out (None: into x)."""
        code = _op_code(op)
        _int_arg("root", root)
        vx, vo, s = self._views_same_size(x, out, stream, "reduce")
        self._api.check(self._api.cc_reduce(vx.ptr, vo.ptr, vx.count, vx.dtype, code, root,
                                            self._h(), s))
        return x if out is None else out

    def allgather(self, x, out, *, stream=None):
        """Gathers every rank's x into out (size * len(x) elements, rank order)."""
        vx, vo, s = self._views(x, self._required(out), stream, False)
        self._same_count(vx, vo, self._size, 1,
                         "allgather needs out of world size times x's elements")
        self._api.check(self._api.cc_allgather(vx.ptr, vo.ptr, vx.count, vx.dtype, self._h(), s))
        return out

    def reducescatter(self, x, out, *, op=SUM, stream=None):
        """Reduces x (size * len(out) elements) and leaves block `rank` in out."""
        code = _op_code(op)
        vx, vo, s = self._views(x, self._required(out), stream, False)
        self._same_count(vx, vo, 1, self._size,
                         "reducescatter needs x of world size times out's elements")
        self._api.check(self._api.cc_reducescatter(vx.ptr, vo.ptr, vo.count, vx.dtype, code,
                                                   self._h(), s))
        return out

    def alltoall(self, x, out, *, stream=None):
        """Sends block i of x to rank i; out's block j comes from rank j. Both
        hold size equal blocks. Not in place."""
        vx, vo, s = self._views(x, self._required(out), stream, False)
        self._same_count(vx, vo, 1, 1, "alltoall needs x and out of one size")
        if vx.count % self._size:
            raise invalid_argument("alltoall needs x's %d elements to split into %d equal blocks"
                                   % (vx.count, self._size))
        self._api.check(self._api.cc_alltoall(vx.ptr, vo.ptr, vx.count // self._size, vx.dtype,
                                              self._h(), s))
        return out

    def send(self, x, peer, *, stream=None):
        """Sends x to rank peer (which calls recv). Pair it inside cc.group()
        when both sides also receive."""
        _int_arg("peer", peer)
        vx, _, s = self._views(x, None, stream, False)
        self._api.check(self._api.cc_send(vx.ptr, vx.count, vx.dtype, peer, self._h(), s))

    def recv(self, x, peer, *, stream=None):
        """Receives into x from rank peer."""
        _int_arg("peer", peer)
        vx, _, s = self._views(x, None, stream, True)
        self._api.check(self._api.cc_recv(vx.ptr, vx.count, vx.dtype, peer, self._h(), s))
        return x

    def barrier(self, *, stream=None):
        """A stream-ordered barrier (it returns once queued; the stream waits).
        Without stream=, torch's current stream on this device when torch is
        loaded, else the legacy default stream."""
        if stream is not None:
            s = _arrays.stream_handle(stream)
        else:
            torch = sys.modules.get("torch")
            s = torch.cuda.current_stream(self._device).cuda_stream if torch is not None else 0
        self._api.check(self._api.cc_barrier(self._h(), s))

    def _required(self, out):
        if out is None:
            raise invalid_argument("out is required: this collective cannot run in place")
        return out
