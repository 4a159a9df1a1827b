"""Dispatch results and handles: `TimedDispatchResult`, `PendingDispatch` (non-blocking
dispatch) and `ReadyPending` (the trivially ready handle of the synchronous default)."""

from __future__ import annotations

import abc
from dataclasses import dataclass

OutputBuffers = list  # a caller-owned list of output bytes (dispatch_borrowed_into)


@dataclass
class TimedDispatchResult:
    outputs: list[bytes]
    wall_ns: int
    device_ns: int | None = None
    enqueue_ns: int | None = None
    wait_ns: int | None = None


class PendingDispatch(abc.ABC):
    """A dispatch in flight. Errors raised on the device come back from `await_result`."""

    @abc.abstractmethod
    def is_ready(self) -> bool: ...

    @abc.abstractmethod
    def await_result(self, timeout: float | None = None) -> list[bytes]: ...


def wait_until(ready, timeout: float | None, backend: str, poll_s: float = 0.0002) -> None:
    """Poll ``ready()`` until it is true or ``timeout`` seconds pass (then DispatchFailed)."""
    if timeout is None:
        return
    import time

    from .errors import DispatchFailed

    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise DispatchFailed(f"dispatch not finished after {timeout} s.",
                                 "wait longer or dispatch less work.", backend=backend)
        time.sleep(poll_s)


class ReadyPending(PendingDispatch):
    __slots__ = ("outputs",)

    def __init__(self, outputs: list[bytes]) -> None:
        self.outputs = outputs

    def is_ready(self) -> bool:
        return True

    def await_result(self, timeout: float | None = None) -> list[bytes]:
        return self.outputs
