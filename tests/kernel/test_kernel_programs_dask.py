"""The user-style kernels of `test_kernel_programs` on the dask backend (a real LocalCluster
of two workers, the fixture of tests/test_dask.py), against numpy: every one of them, so the
ten programs of issue 25 run on every backend. Elementwise kernels are split over the
workers, atomic ones merged, the rest (workgroup-shared scans, 2-D, n-body) run whole."""

from __future__ import annotations

import pytest

pytest.importorskip("distributed")

from kernel import test_kernel_programs as P
from test_dask import dask_backend  # noqa: F401  (the module-scoped LocalCluster fixture)

PROGRAMS = sorted(name for name in vars(P) if name.startswith("test_"))


@pytest.mark.parametrize("name", PROGRAMS)
def test_user_kernel_on_dask(name, dask_backend):  # noqa: F811
    getattr(P, name)(dask_backend)
