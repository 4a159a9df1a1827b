"""The distributed driver (Dask): one Program partitioned by workgroup ranges across the
workers of a Dask cluster, each running its best local backend. ``is_distributed()`` is
true. Never picked implicitly: acquire it by name (``acquire("dask")``). Importing this
package imports no dask."""

from vyre.driver.install import install_hint
from vyre.driver.registry import BackendRegistration

REGISTRATION = BackendRegistration(
    id="dask",
    precedence=800,
    factory="vyre.drivers.dask.backend:DaskBackend",
    summary="partitions dispatches across a Dask cluster (LocalCluster by default)",
    requires=f"{install_hint('dask')} (dask.distributed); VYRE_DASK_SCHEDULER for a real cluster",
    implicit=False,
)
