"""The warm path of `EngineBackend.dispatch_device` (issue 24): what a call needs besides its
data, computed by the first call with one argument signature and kept on the pipeline.

A call's *signature* is what every input check reads from its arguments, apart from
the data: for a device array, its ``__cuda_array_interface__`` typestr, shape and strides
(the only fields `vyre.driver.inputs.cai_span` judges); for a host array, that it is a 1-D
C-contiguous numpy array of the buffer's own dtype (the `InputChecker` fast case) and its
length; the config's grid options; whether the caller allocates the outputs. A call whose
signature equals one that passed every check of the full path passes them again, with the
same shape (`Prepared`), launch, zero fills and argument layout: `DevicePlan` holds those,
and the warm call reads only what depends on the data (pointers, producer streams, the
host inputs' words), checks what the caller's allocator returned, and enqueues. Anything
else takes the full path, whose checks decide (and raise) as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..inputs import DeviceInput, _flat
from .plan import Prepared

PLANS_PER_PIPELINE = 16

_U4 = np.dtype("<u4")
_OTHER: dict[type, bool] = {}   # types the input checks read as host data (numpy subclasses, bytes)


def cai_key(cai: Any) -> tuple:
    """The fields of a ``__cuda_array_interface__`` the input checks judge (typestr, shape,
    strides); raises KeyError/TypeError for a malformed one."""
    return cai["typestr"], cai["shape"], cai.get("strides")


def signature(fast: tuple[np.dtype, ...], inputs: Any, grid: tuple, allocates: bool) -> tuple[tuple, list] | None:
    """(the plan key of a `dispatch_device` call, each input's data: its interface dict for
    a device array, its words for a host array), or None when the call cannot be planned
    (inputs not a list or tuple of such arrays, a malformed interface). ``fast``: each
    input's dtype in the fast case (`InputChecker.fast`)."""
    if (type(inputs) is not list and type(inputs) is not tuple) or len(inputs) != len(fast):
        return None
    key: list[Any] = [grid, allocates]
    parts: list[Any] = []
    try:
        for x, dt in zip(inputs, fast):
            if type(x) is np.ndarray:
                if x.dtype is not dt or x.ndim != 1 or not x.flags.c_contiguous:
                    return None
                key.append(x.shape[0])
                parts.append(x if dt is _U4 else _flat(x))   # as `InputChecker` gives it
                continue
            t = type(x)
            other = _OTHER.get(t)
            if other is None:
                other = _OTHER[t] = issubclass(t, np.ndarray | bytes | bytearray | memoryview)
            if other:   # the full path reads these as host data
                return None
            cai = x.__cuda_array_interface__
            if type(cai) is not dict:
                return None
            key.append((cai["typestr"], cai["shape"], cai.get("strides")))   # `cai_key`
            parts.append(cai)
        return tuple(key), parts
    except Exception:   # no interface, a malformed one, or one that fails to build: the full path says
        return None


class DevicePlan:
    """`dispatch_device` for one pipeline and signature, apart from the data: ``prep`` (the
    shape: launch, zero fills, counts); ``device`` the positions of device inputs; ``host``
    (bound position, input position, padded bytes) of host inputs staged and uploaded;
    ``in_place`` (bound position, input position, its place in ``device``) of device inputs
    the kernel reads in place; ``copied`` the same of device inputs copied into their output
    buffer (READ_WRITE); ``nbytes`` each input's bytes; ``out_keys`` the interface key of
    each array the caller's allocator returned (None: checked in full on every call)."""

    __slots__ = ("copied", "device", "host", "in_place", "nbytes", "out_keys", "prep")

    def __init__(self, prep: Prepared, ins: list[Any], out_keys: tuple[Any, ...]) -> None:
        self.prep = prep
        self.nbytes = tuple(x.nbytes for x in ins)
        self.device = tuple(i for i, x in enumerate(ins) if type(x) is DeviceInput)
        buffers = prep.shape.buffers
        self.host = tuple((pos, i, n) for pos, i, n in prep.copies_in if type(ins[i]) is not DeviceInput and n)
        self.in_place = tuple((pos, i, self.device.index(i)) for pos, i, _ in prep.copies_in
                              if type(ins[i]) is DeviceInput and buffers[pos].output_index is None)
        self.copied = tuple((pos, i, self.device.index(i)) for pos, i, _ in prep.copies_in
                            if type(ins[i]) is DeviceInput and buffers[pos].output_index is not None)
        self.out_keys = out_keys


__all__ = ["PLANS_PER_PIPELINE", "DevicePlan", "cai_key", "signature"]
