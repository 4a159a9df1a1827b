"""The WebGPU driver (wgpu-py): WGSL generated from `vyre.lower`, run on any wgpu adapter —
Vulkan, Metal, D3D12, OpenGL, and CPU adapters such as lavapipe/llvmpipe. Importing this
package imports no wgpu."""

from vyre.driver.install import install_hint
from vyre.driver.registry import BackendRegistration

REGISTRATION = BackendRegistration(
    id="wgpu",
    precedence=60,
    factory="vyre.drivers.wgpu.backend:WgpuBackend",
    summary="WGSL through wgpu-py (Vulkan, Metal, D3D12, GL; lavapipe/llvmpipe on CPUs)",
    requires=f"{install_hint('wgpu')} and a wgpu adapter (Debian CPU: apt-get install "
             "mesa-vulkan-drivers libvulkan1)",
)
