"""Real programs written in vyre's IR: the workloads the tests check against libraries
nobody here wrote (hashlib, numpy) and the benchmarks compare with hand-written CUDA C.

Each builder returns a `Program`. They use only `vyre.ir`.
"""

from .linalg import matmul_grid, matmul_tiled

__all__ = ["matmul_grid", "matmul_tiled"]
