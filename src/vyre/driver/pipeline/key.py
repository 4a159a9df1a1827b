"""Pipeline cache keys: every input that decides the compiled artifact, named."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class PipelineKey:
    backend_id: str
    backend_version: str
    device_fingerprint: bytes
    program_fingerprint: bytes
    code_config: tuple

    def differences(self, other: PipelineKey) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]

    def digest(self) -> bytes:
        import blake3

        h = blake3.blake3()
        for f in fields(self):
            h.update(f.name.encode() + b"=" + repr(getattr(self, f.name)).encode() + b";")
        return h.digest()
