"""Resident buffers of the engine: allocating, uploading, reading back and freeing them (the
contract's `allocate_resident`, `upload_resident`, `read_resident` and `free_resident`, which
`EngineBackend` hands to the functions here).

The rules are the engine's: sizes are checked against the device's declared limits before
anything is allocated, an upload must be exactly the allocated size, every copy is enqueued
under the queue lock and waited for through the engine's `wait_fence`, and a freed buffer's
device memory goes only once no bound dispatch holds it. Like `vyre.driver.engine.resident`,
this module reaches the engine only through a declared interface (`Engine`) and imports
nothing of `vyre.driver.engine.core`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..backend import Resource
from ..config import DEFAULT
from ..dispatch_shape import padded
from ..errors import InvalidInput, InvalidProgram, LimitExceeded
from ..inputs import raw_words
from . import resident
from .plan import Limits


@runtime_checkable
class Engine(resident.Engine, Protocol):
    """What resident buffers need of the engine: the resident dispatches' interface, plus
    ownership checks and the declared limits."""

    def own(self, resource: Resource) -> Resource: ...

    def limits(self) -> Limits: ...


def allocate(engine: Engine, byte_len: int) -> Resource:
    """A resident buffer of ``byte_len`` bytes (contents undefined)."""
    if isinstance(byte_len, bool) or not isinstance(byte_len, int):
        raise InvalidProgram(f"allocate_resident({byte_len!r}): the size is not an int.",
                             "pass the size in bytes as an int.", backend=engine.id())
    if byte_len < 0 or byte_len > engine.limits().max_buffer_bytes:
        raise LimitExceeded("buffer_bytes", f"allocate_resident({byte_len}) is outside 0.."
                            f"{engine.limits().max_buffer_bytes} bytes.", "allocate a size this "
                            "device supports (max_storage_buffer_bytes()).", backend=engine.id())
    with engine.lock:
        engine.usable()
        try:
            handle = engine.device.alloc(padded(byte_len))
        except BaseException as exc:
            raise engine.failure(exc) from None
    return Resource(engine.id(), id(engine), byte_len, handle)


def upload(engine: Engine, resource: Resource, data: Any) -> None:
    """Copy ``data`` (host bytes or words, or a device array where the device reads them)
    into ``resource``, and wait for the copy."""
    engine.own(resource)
    dev = engine.device
    words = raw_words(data, "resident upload", engine.id(), device_ok=dev.reads_device_arrays)
    if words is None:
        d = dev.device_input(None, data, "resident upload")
        _check_upload(engine, resource, d.nbytes)
        with engine.lock:
            if d.stream is not None:
                dev.order_after(d.stream)
            if d.nbytes:
                dev.copy(resource.handle, dev.view(d.ptr, d.nbytes, data), d.nbytes)
            fence = dev.fence()
    else:
        _check_upload(engine, resource, words.nbytes)
        host = None
        size = padded(words.nbytes)
        with engine.lock:
            if words.nbytes:
                if dev.synchronous and size == words.nbytes:
                    dev.upload(resource.handle, words, size)
                else:
                    host = dev.host_alloc(size)
                    host.stage(words)
                    dev.upload(resource.handle, host, size)
            fence = dev.fence()
    engine.wait_fence(fence, None, (), (), DEFAULT)


def _check_upload(engine: Engine, resource: Resource, nbytes: int) -> None:
    if nbytes != resource.byte_len:
        raise InvalidInput("input_size", f"upload of {nbytes} bytes into a {resource.byte_len}-byte "
                           "resident buffer.", "upload exactly the allocated size.", backend=engine.id())


def read(engine: Engine, resource: Resource) -> bytes:
    """The bytes of ``resource``, after everything enqueued before."""
    engine.own(resource)
    dev = engine.device
    size = padded(resource.byte_len)
    host = dev.host_alloc(size)
    with engine.lock:
        engine.usable()
        if resource.byte_len:
            dev.download(host, resource.handle, size)
        fence = dev.fence()
    engine.wait_fence(fence, None, (), (), DEFAULT)
    return host.words.tobytes()[: resource.byte_len]


def free(engine: Engine, resource: Resource) -> None:
    """Mark ``resource`` freed (every later use is an error with a Fix), drop the cached
    bindings that hold it, and release its memory once no bound dispatch holds it."""
    engine.own(resource)
    resource.freed = True
    for holder in list(resource.holders):
        holder.stale = True   # its next launch checks, and refuses
        if getattr(holder, "cached", False):
            holder.release()
    free_if_unheld(engine, resource)


def free_if_unheld(engine: Engine, resource: Resource) -> None:
    """Release a freed resource's device memory once no bound dispatch holds it."""
    if resource.freed and not resource.holders and resource.handle is not None:
        handle, resource.handle = resource.handle, None
        with engine.lock:
            try:
                engine.device.free(handle)
            except Exception:
                pass
