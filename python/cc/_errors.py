"""cc's errors as Python exceptions.

Every failing libcc call becomes an instance of a `cc.Error` subclass chosen by
its result code, carrying the code and libcc's own message (`cc_last_error()`:
who, what, what to do). Argument problems found in Python before libcc is
called (a CPU array, a wrong dtype) are `InvalidArgumentError`s in the same
form, so callers catch one family.
"""

import builtins

# cc_result_t, as in include/cc/cc.h. Values are fixed and never reordered.
SUCCESS = 0
ERR_INVALID_ARGUMENT = 1
ERR_INVALID_USAGE = 2
ERR_NO_DEVICE = 3
ERR_CUDA = 4
ERR_NCCL = 5
ERR_SYSTEM = 6
ERR_RENDEZVOUS = 7
ERR_AUTH = 8
ERR_MISMATCH = 9
ERR_TIMEOUT = 10
ERR_PEER_FAILED = 11
ERR_ABORTED = 12
ERR_INTERNAL = 13
ERR_BUFFER_TOO_SMALL = 14

CODE_NAMES = {
    SUCCESS: "CC_SUCCESS",
    ERR_INVALID_ARGUMENT: "CC_ERR_INVALID_ARGUMENT",
    ERR_INVALID_USAGE: "CC_ERR_INVALID_USAGE",
    ERR_NO_DEVICE: "CC_ERR_NO_DEVICE",
    ERR_CUDA: "CC_ERR_CUDA",
    ERR_NCCL: "CC_ERR_NCCL",
    ERR_SYSTEM: "CC_ERR_SYSTEM",
    ERR_RENDEZVOUS: "CC_ERR_RENDEZVOUS",
    ERR_AUTH: "CC_ERR_AUTH",
    ERR_MISMATCH: "CC_ERR_MISMATCH",
    ERR_TIMEOUT: "CC_ERR_TIMEOUT",
    ERR_PEER_FAILED: "CC_ERR_PEER_FAILED",
    ERR_ABORTED: "CC_ERR_ABORTED",
    ERR_INTERNAL: "CC_ERR_INTERNAL",
    ERR_BUFFER_TOO_SMALL: "CC_ERR_BUFFER_TOO_SMALL",
}


class Error(Exception):
    """A cc failure: `code` is the cc_result_t, `message` libcc's message."""

    def __init__(self, code, message):
        self.code = code
        self.code_name = CODE_NAMES.get(code, "cc result %d" % code)
        self.message = message or self.code_name
        super().__init__(self.message)

    def __str__(self):
        return self.message


class InvalidArgumentError(Error, ValueError):
    """A value out of range, a NULL buffer, an array cc cannot use."""


class InvalidUsageError(Error):
    """A call in the wrong state, or one the loaded libcc does not have."""


class NoDeviceError(Error):
    """No usable CUDA device."""


class CudaError(Error):
    """A CUDA runtime call failed."""


class NcclError(Error):
    """An NCCL call failed."""


class SystemCallError(Error, OSError):
    """An operating-system call failed."""


class RendezvousError(Error, ConnectionError):
    """The rendezvous server could not be reached or refused the rank."""


class AuthError(Error):
    """The rendezvous token was refused."""


class MismatchError(Error):
    """Ranks disagree (world size, rank, NCCL version, GPU)."""


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 (cc.TimeoutError by design)
    """A deadline passed."""


class PeerFailedError(Error):
    """Another rank of the job failed or vanished."""


class AbortedError(Error):
    """The communicator was aborted."""


class InternalError(Error):
    """A bug in cc."""


class BufferTooSmallError(Error):
    """An output buffer is smaller than the value."""


class MissingFunctionError(InvalidUsageError):
    """The libcc loaded lacks a function this binding offers (an older build)."""


class LibraryNotFoundError(Error, ImportError):
    """No libcc could be loaded."""


_CLASSES = {
    ERR_INVALID_ARGUMENT: InvalidArgumentError,
    ERR_INVALID_USAGE: InvalidUsageError,
    ERR_NO_DEVICE: NoDeviceError,
    ERR_CUDA: CudaError,
    ERR_NCCL: NcclError,
    ERR_SYSTEM: SystemCallError,
    ERR_RENDEZVOUS: RendezvousError,
    ERR_AUTH: AuthError,
    ERR_MISMATCH: MismatchError,
    ERR_TIMEOUT: TimeoutError,
    ERR_PEER_FAILED: PeerFailedError,
    ERR_ABORTED: AbortedError,
    ERR_INTERNAL: InternalError,
    ERR_BUFFER_TOO_SMALL: BufferTooSmallError,
}


def error_for(code, message):
    """The exception for a result code (a code this binding does not know
    yet, from a newer libcc, is a plain `Error`)."""
    return _CLASSES.get(code, Error)(code, message)


def invalid_argument(message):
    """An argument refused in Python, before libcc is called."""
    return InvalidArgumentError(ERR_INVALID_ARGUMENT, message)
