"""The reference driver: the CPU reference interpreter behind the backend contract.
Precedence 900 and ``reference_oracle=True``: it is never picked implicitly for dispatch."""

from vyre.driver.registry import BackendRegistration

REGISTRATION = BackendRegistration(
    id="reference",
    precedence=900,
    factory="vyre.drivers.reference.backend:backend",
    reference_oracle=True,
    dispatches=True,
    summary="CPU reference interpreter (numpy): defines the bytes every backend must match",
    requires="numpy (always installed)",
)
