"""The OpenCL driver (PyOpenCL): OpenCL C generated from `vyre.lower`, run on any OpenCL
1.2 device (PoCL on the CPU in CI). Importing this package imports no pyopencl."""

from vyre.driver.install import install_hint
from vyre.driver.registry import BackendRegistration

REGISTRATION = BackendRegistration(
    id="opencl",
    precedence=50,
    factory="vyre.drivers.opencl.backend:OpenCLBackend",
    summary="OpenCL C through PyOpenCL (PoCL on CPUs, any OpenCL 1.2 GPU)",
    requires=f"{install_hint('opencl')} and an OpenCL ICD (Debian: apt-get install "
             "pocl-opencl-icd ocl-icd-libopencl1)",
)
