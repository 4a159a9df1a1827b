"""The CUDA driver (cuda.core + NVRTC): CUDA C generated from `vyre.lower`, compiled to a
cubin for the device's own architecture. Importing this package imports nothing of CUDA."""

from vyre.driver.install import install_hint
from vyre.driver.registry import BackendRegistration

REGISTRATION = BackendRegistration(
    id="cuda",
    precedence=5,
    factory="vyre.drivers.cuda.backend:CudaBackend",
    summary="CUDA C through NVRTC and cuda.core (NVIDIA GPUs)",
    requires=f"{install_hint('cuda')}, an NVIDIA GPU and its driver",
)
