"""vyre.lib — primitives built from vyre Programs: the same bytes on every backend.

    import numpy as np
    import vyre.lib

    x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
    total = vyre.lib.sum(x)          # exact, correctly rounded once (S34)

Every primitive takes numpy, CuPy or torch arrays and returns the same kind; ``backend=``
picks a backend (an id or a backend object; default: the preferred one, as ``@vyre.kernel``
picks it). Results never depend on the backend, the device or the workgroup size
(``workgroup_size=`` is there to prove it). Float sums, dots, scatter-adds and scans use the
exact superaccumulator of `vyre.ir.superacc`. docs/primitives.md has the whole list.
"""

from __future__ import annotations

from .compaction import partition, run_length_encode, select, top_k, unique
from .errors import CODES, LibError
from .histograms import bincount, histogram
from .matmul import matmul
from .radix import argsort, sort
from .reduce import dot, max, min, sum
from .scan import cumsum, exclusive_cumsum
from .scatter import gather, index_add
from .segmented import reduce_by_key, segment_max, segment_min, segment_sum

__all__ = ["CODES", "LibError", "argsort", "bincount", "cumsum", "dot", "exclusive_cumsum", "gather", "histogram", "index_add", "matmul", "max", "min", "partition", "reduce_by_key", "run_length_encode", "segment_max", "segment_min", "segment_sum", "select", "sort", "sum", "top_k", "unique"]
