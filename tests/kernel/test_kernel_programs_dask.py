"""Three of the user-style kernels of `test_kernel_programs` on the dask backend (a real
LocalCluster of two workers, the fixture of tests/test_dask.py): an elementwise stencil (split
over the workers), an atomic histogram (merged) and a 2-D blur (run whole), against numpy."""

from __future__ import annotations

import pytest

pytest.importorskip("distributed")

from kernel import test_kernel_programs as P
from test_dask import dask_backend  # noqa: F401  (the module-scoped LocalCluster fixture)


def test_stencil_on_dask(dask_backend):  # noqa: F811
    P.test_stencil(dask_backend)


def test_histogram_on_dask(dask_backend):  # noqa: F811
    P.test_histogram(dask_backend)


def test_2d_blur_on_dask(dask_backend):  # noqa: F811
    P.test_2d_blur(dask_backend)
