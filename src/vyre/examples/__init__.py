"""Real programs written in vyre's IR: the workloads the tests check against libraries
nobody here wrote (hashlib, numpy) and the benchmarks compare with hand-written CUDA C.

Each builder returns a `Program`; ``*_expected`` helpers compute the answer independently
(numpy, hashlib). They use only `vyre.ir`, except `vyre.examples.literal_search` (import it by
name): multi-pattern literal search written as a fused speculative program and a two-stage
pair, which also routes its dispatches through `vyre.driver.dispatch_prefilter_confirm`.
"""

from .linalg import matmul_grid, matmul_tiled
from .parallel import (
    bitonic_expected,
    bitonic_sort_workgroup,
    histogram_expected,
    histogram_grid,
    histogram_privatised,
    scan_expected,
    scan_workgroup,
)
from .philox import philox4x64, philox_expected, philox_state
from .sha256 import digests_expected, pad_messages, random_messages, sha256_blocks, sha256_config
from .sha256_bytes import (
    sha256_bytes,
    sha256_bytes_config,
    sha256_bytes_expected,
    sha256_bytes_inputs,
)

__all__ = ["bitonic_expected", "bitonic_sort_workgroup", "digests_expected", "histogram_expected",
           "histogram_grid", "histogram_privatised", "matmul_grid", "matmul_tiled", "pad_messages",
           "philox4x64", "philox_expected", "philox_state", "random_messages", "scan_expected",
           "scan_workgroup", "sha256_blocks", "sha256_bytes", "sha256_bytes_config",
           "sha256_bytes_expected", "sha256_bytes_inputs", "sha256_config"]
