"""Speculative dispatch: a fused prefilter + confirmer program that commits or falls back.

Owns the policy and the host side of the seeds' ``supports_speculation`` capability:

* `SpeculationMode` (``DispatchConfig.speculation``): ``AUTO`` (the default: ask the
  speculator, where the backend supports speculation), ``FORCE`` (always the fused program; `UnsupportedFeature` on a backend without
  speculation) and ``DISABLE`` (always the two-stage pair).
* `SpeculationReport`: the two counters a fused program writes, ``committed_tiles`` (tiles
  whose prefilter passed, so the confirmer's output stands) and ``rolled_back_tiles`` (tiles
  the confirmer ran on that the prefilter rejected: work thrown away), and their commit rate
  in integer parts per million.
* `AdaptiveSpeculator`: an integer EMA of the commit rate with hysteresis that decides, dispatch
  by dispatch, whether the fused path is still paying for itself.
* The counter tail (`parse_counter_tail` / `encode_counter_tail`): the last 8 bytes of the
  designated output, ``committed`` then ``rolled_back`` as little-endian u32.
* `dispatch_prefilter_confirm`: routes one dispatch of a `SpeculativeDispatchPlan` to the
  fused program or to the prefilter followed by the caller's compaction + confirmation.

It does not own any workload: a fused program and its two-stage twin are ordinary vyre
Programs (`vyre.examples.literal_search` is one). All arithmetic is on Python ints with the
seed's integer rules (``>>`` floors like i64's), so the numbers match upstream bit for bit.
"""

from __future__ import annotations

import enum
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import DispatchFailed, InvalidProgram, UnsupportedFeature

if TYPE_CHECKING:
    from vyre.ir.program import Program

    from .backend import VyreBackend
    from .config import DispatchConfig

DEFAULT_THRESHOLD_PCT = 15
"""Commit rate (whole percent) below which the fused path stops paying (the seed's default)."""

COUNTER_TAIL_BYTES = 8
EMA_SHIFT = 2          # alpha = 1/4: reacts within ~4 dispatches, ignores one odd dispatch
_PPM = 1_000_000
_U32_MAX = 0xFFFFFFFF


class SpeculationMode(enum.Enum):
    """How `dispatch_prefilter_confirm` picks its path (``DispatchConfig.speculation``)."""

    AUTO = "auto"
    FORCE = "force"
    DISABLE = "disable"

    @classmethod
    def of(cls, value: Any) -> SpeculationMode:
        """``value`` as a mode: a `SpeculationMode`, or its name/value as a string
        (``"auto"``, ``"force"``, ``"disable"``, any case). Anything else is `InvalidProgram`."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            for mode in cls:
                if value.lower() in (mode.value, mode.name.lower()):
                    return mode
        raise InvalidProgram(f"DispatchConfig.speculation={value!r} is not a speculation mode.",
                             "pass vyre.driver.speculate.SpeculationMode.AUTO, FORCE or DISABLE "
                             "(or the strings 'auto', 'force', 'disable').")


def _u32(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _U32_MAX:
        raise InvalidProgram(f"SpeculationReport.{name}={value!r} is not a u32 count.",
                             f"pass {name} as an int in 0..{_U32_MAX}.")
    return value


@dataclass(frozen=True)
class SpeculationReport:
    """Counts from one fused dispatch (u32 each, as the kernel wrote them)."""

    committed_tiles: int = 0
    rolled_back_tiles: int = 0

    def __post_init__(self) -> None:
        _u32("committed_tiles", self.committed_tiles)
        _u32("rolled_back_tiles", self.rolled_back_tiles)

    @property
    def attempted_tiles(self) -> int:
        """Tiles the confirmer ran on (exact: the sum of two u32s, never clamped)."""
        return self.committed_tiles + self.rolled_back_tiles

    @property
    def commit_rate_ppm(self) -> int:
        """``floor(committed * 10^6 / attempted)``; 0 when nothing was attempted."""
        total = self.attempted_tiles
        return self.committed_tiles * _PPM // total if total else 0

    @property
    def commit_rate_pct(self) -> int:
        """The commit rate in whole percent, floored."""
        return self.commit_rate_ppm // 10_000

    def worthwhile(self, threshold_pct: int = DEFAULT_THRESHOLD_PCT) -> bool:
        """Whether the commit rate reaches ``threshold_pct`` (integer comparison in ppm)."""
        return self.commit_rate_ppm >= threshold_pct * 10_000


def threshold_pct(backend: Any) -> int | None:
    """The commit rate (whole percent) from which the fused path pays on ``backend``'s device:
    its capabilities record's ``speculation_threshold_pct`` (None: never, so AUTO keeps to the
    two-stage pair), or the seed's `DEFAULT_THRESHOLD_PCT` for a backend without a record."""
    caps = getattr(backend, "caps", None)   # the engine's and dask's record
    return getattr(caps, "speculation_threshold_pct", DEFAULT_THRESHOLD_PCT)


class AdaptiveSpeculator:
    """Decides, dispatch by dispatch, whether to run the fused speculative program.

    The commit rate's EMA is kept in ppm (integers only): ``new = old + ((obs - old) >> 2)``.
    It is seeded at the threshold with speculation enabled, so the first dispatches take the
    fused path and produce evidence. Hysteresis: speculation turns off when the EMA drops
    below 0.75x the threshold and back on at >= 1.25x (a +-25% deadband against flapping at
    the crossover). A report with no attempted tiles carries no signal and is ignored.
    Thread-safe: concurrent `record` calls never lose a sample.
    """

    def __init__(self, threshold_pct: int = DEFAULT_THRESHOLD_PCT) -> None:
        if isinstance(threshold_pct, bool) or not isinstance(threshold_pct, int) or not \
                0 <= threshold_pct <= 100:
            raise InvalidProgram(f"AdaptiveSpeculator threshold_pct={threshold_pct!r} is not a "
                                 "whole percent.", "pass threshold_pct as an int in 0..100 "
                                 f"(default {DEFAULT_THRESHOLD_PCT}).")
        self._threshold_ppm = threshold_pct * 10_000
        self._ema_ppm = min(self._threshold_ppm, _U32_MAX)
        self._enabled = True
        self._samples = 0
        self._lock = threading.Lock()

    @classmethod
    def for_backend(cls, backend: Any) -> AdaptiveSpeculator:
        """A speculator with ``backend``'s threshold (`threshold_pct`; the seed's default where
        the device says the fused path never pays, since AUTO does not consult it there)."""
        pct = threshold_pct(backend)
        return cls(DEFAULT_THRESHOLD_PCT if pct is None else pct)

    @property
    def threshold_ppm(self) -> int:
        """The threshold in ppm."""
        return self._threshold_ppm

    @property
    def enable_at_ppm(self) -> int:
        """EMA at or above which a disabled speculator turns back on (1.25x threshold)."""
        return self._threshold_ppm + self._threshold_ppm // 4

    @property
    def disable_below_ppm(self) -> int:
        """EMA below which an enabled speculator turns off (0.75x threshold)."""
        return self._threshold_ppm - self._threshold_ppm // 4

    @property
    def commit_rate_ppm(self) -> int:
        """The current EMA of the commit rate, in ppm."""
        return self._ema_ppm

    @property
    def samples(self) -> int:
        """Reports folded into the EMA so far (empty ones excluded)."""
        return self._samples

    def should_speculate(self) -> bool:
        """Whether the next dispatch should take the fused path."""
        return self._enabled

    def record(self, report: SpeculationReport) -> None:
        """Fold one fused dispatch's counters into the EMA and update the decision."""
        if report.attempted_tiles == 0:
            return
        observation = report.commit_rate_ppm
        with self._lock:
            old = self._ema_ppm
            new = min(max(old + ((observation - old) >> EMA_SHIFT), 0), _U32_MAX)
            self._ema_ppm = new
            self._samples += 1
            if not self._enabled and new >= self.enable_at_ppm:
                self._enabled = True
            elif self._enabled and new < self.disable_below_ppm:
                self._enabled = False

    def __repr__(self) -> str:
        state = "on" if self._enabled else "off"
        return (f"<AdaptiveSpeculator {state} ema={self._ema_ppm}ppm threshold="
                f"{self._threshold_ppm}ppm samples={self._samples}>")


def parse_counter_tail(output: bytes | bytearray | memoryview) -> SpeculationReport | None:
    """The report in the last 8 bytes of ``output``; None when ``output`` is shorter than 8
    bytes or its length is not a multiple of 4 (not a u32 buffer with a tail)."""
    data = memoryview(output).cast("B")
    if len(data) < COUNTER_TAIL_BYTES or len(data) % 4:
        return None
    committed, rolled = struct.unpack_from("<II", data, len(data) - COUNTER_TAIL_BYTES)
    return SpeculationReport(committed, rolled)


def encode_counter_tail(report: SpeculationReport) -> bytes:
    """The 8 tail bytes of ``report`` (the inverse of `parse_counter_tail`)."""
    return struct.pack("<II", report.committed_tiles, report.rolled_back_tiles)


@dataclass(frozen=True)
class SpeculativeDispatchPlan:
    """A prefilter/confirm workload written twice: ``fused_program`` (every tile runs the
    prefilter and the confirmer, output commit-gated on the prefilter, counters in the tail of
    output ``counter_output_index``) and ``prefilter_program`` (the first of the two-stage
    pair; it takes the same inputs and config). ``strip_counter_tail`` drops the 8 tail bytes
    from the returned fused output."""

    fused_program: Program
    prefilter_program: Program
    counter_output_index: int = 0
    strip_counter_tail: bool = True

    def __post_init__(self) -> None:
        idx = self.counter_output_index
        if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
            raise InvalidProgram(f"SpeculativeDispatchPlan.counter_output_index={idx!r} is not an "
                                 "output position.", "pass the index (>= 0, declaration order) of "
                                 "the fused program's output that ends in the counter tail.")


@dataclass(frozen=True)
class SpeculativeDispatchOutcome:
    """What `dispatch_prefilter_confirm` returns: the outputs (fused, or whatever the two-stage
    closure returned), the fused dispatch's report (None on the two-stage path) and which path
    ran."""

    outputs: list[bytes]
    report: SpeculationReport | None
    used_speculative_path: bool


ConfirmTwoStage = Callable[[list[bytes]], list[bytes]]


def _mode(config: Any) -> SpeculationMode:
    return SpeculationMode.of(getattr(config, "speculation", None) or SpeculationMode.AUTO)


def dispatch_prefilter_confirm(backend: VyreBackend, speculator: AdaptiveSpeculator,
                               plan: SpeculativeDispatchPlan, inputs: Sequence[Any],
                               config: DispatchConfig | None,
                               confirm_two_stage: ConfirmTwoStage) -> SpeculativeDispatchOutcome:
    """Run one prefilter/confirm dispatch on the path ``config.speculation`` asks for.

    ``FORCE`` runs the fused program (`UnsupportedFeature`, code 1002, on a backend whose
    ``supports_speculation()`` is False); ``DISABLE`` runs the two-stage pair; ``AUTO`` (the
    default, also for ``config=None``) asks ``speculator.should_speculate()`` on a backend that
    supports speculation and whose device it can pay on (`threshold_pct` is not None), and
    takes the two-stage pair on any other.

    The fused path dispatches ``plan.fused_program`` (``dispatch_borrowed``), reads the report
    from the counter tail of output ``plan.counter_output_index``, strips the tail if the plan
    says so, and records the report in ``speculator``. The two-stage path dispatches
    ``plan.prefilter_program`` with the same inputs and config and returns what
    ``confirm_two_stage(prefilter_outputs)`` returns (the closure compacts the candidates and
    dispatches the confirmer).
    """
    mode = _mode(config)
    if mode is SpeculationMode.FORCE:
        if not backend.supports_speculation():
            raise UnsupportedFeature(
                "speculative dispatch", backend.id(),
                "use SpeculationMode.AUTO or DISABLE on this backend (they fall back to the "
                "two-stage prefilter/confirm pair), or a backend whose supports_speculation() "
                "is True.")
        speculate = True
    elif mode is SpeculationMode.DISABLE:
        speculate = False
    else:
        speculate = (backend.supports_speculation() and threshold_pct(backend) is not None
                     and speculator.should_speculate())
    if not speculate:
        prefiltered = list(backend.dispatch_borrowed(plan.prefilter_program, inputs, config))
        return SpeculativeDispatchOutcome(list(confirm_two_stage(prefiltered)), None, False)

    outputs = list(backend.dispatch_borrowed(plan.fused_program, inputs, config))
    idx = plan.counter_output_index
    if idx >= len(outputs):
        raise DispatchFailed(
            f"speculative dispatch expected the counter tail in output #{idx}, but the fused "
            f"program returned {len(outputs)} output(s).",
            "set SpeculativeDispatchPlan.counter_output_index to the output (declaration order) "
            "that ends in the two-u32 [committed, rolled_back] tail.", backend=backend.id())
    report = parse_counter_tail(outputs[idx])
    if report is None:
        raise DispatchFailed(
            f"speculative dispatch output #{idx} has {len(outputs[idx])} bytes: no two-u32 counter "
            "tail (needs >= 8 bytes, a multiple of 4).",
            "make the fused program end that output in [committed, rolled_back] (u32 each), or "
            "point counter_output_index at the output that does.", backend=backend.id())
    if plan.strip_counter_tail:
        outputs[idx] = bytes(outputs[idx][:-COUNTER_TAIL_BYTES])
    speculator.record(report)
    return SpeculativeDispatchOutcome(outputs, report, True)
