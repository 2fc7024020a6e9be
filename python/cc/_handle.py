"""What cc.Comm, cc.Store and cc.Server share: a libcc handle the object
owns and frees once, on request (destroy, close, stop), at the end of a
`with` block, or when the object is garbage-collected (errors ignored
there). Freeing twice is harmless."""

from ._errors import ERR_INVALID_USAGE, InvalidUsageError


class OwnedHandle:
    """Subclasses set _api, _handle, _FREE (the libcc function that frees
    the handle) and _gone() (the message when the handle is already freed)."""

    _handle = None
    _FREE = None

    def _gone(self):
        raise NotImplementedError

    def _h(self):
        """The live handle; InvalidUsageError once freed."""
        handle = self._handle
        if handle is None:
            raise InvalidUsageError(ERR_INVALID_USAGE, self._gone())
        return handle

    def _free(self):
        handle, self._handle = self._handle, None
        if handle is not None:
            self._api.check(getattr(self._api, self._FREE)(handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._free()

    def __del__(self):
        if self._handle is not None:
            try:
                self._free()
            except Exception:
                pass
