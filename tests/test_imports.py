"""Every driver module imports wherever its vendor package is installed: an import error in
vyre's own code must fail here, not hide behind "backend unavailable" skips."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

MODULES = {
    "vyre.drivers.reference.backend": None,
    "vyre.drivers.opencl.codegen": None,
    "vyre.drivers.opencl.backend": "pyopencl",
    "vyre.drivers.cuda.codegen": None,
    "vyre.drivers.cuda.compiler": None,
    "vyre.drivers.cuda.backend": "cuda.core",
    "vyre.cli.app": None,
    "vyre.conform": None,
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports(module):
    vendor = MODULES[module]
    if vendor and importlib.util.find_spec(vendor.split(".")[0]) is None:
        pytest.skip(f"{vendor} not installed")
    if vendor == "cuda.core":
        try:
            importlib.import_module("cuda.core")
        except ImportError as exc:
            pytest.skip(f"cuda.core not importable: {exc}")
    importlib.import_module(module)
