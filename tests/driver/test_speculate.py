"""`vyre.driver.speculate`: the seed's speculation policy, number for number.

Expected values are worked out by hand from the issue's formulas (floor(c*10^6/(c+r)), the
EMA ``old + ((obs - old) >> 2)`` with Python's flooring shift, hysteresis at 0.75x/1.25x),
never read back from the code under test.
"""

from __future__ import annotations

import struct
import threading

import pytest

from vyre import reference
from vyre.driver import (
    DispatchConfig,
    DispatchFailed,
    InvalidProgram,
    UnsupportedFeature,
    VyreBackend,
)
from vyre.driver.speculate import (
    COUNTER_TAIL_BYTES,
    DEFAULT_THRESHOLD_PCT,
    AdaptiveSpeculator,
    SpeculationMode,
    SpeculationReport,
    SpeculativeDispatchPlan,
    dispatch_prefilter_confirm,
    encode_counter_tail,
    parse_counter_tail,
)
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

R = SpeculationReport
U32_MAX = 2**32 - 1


# ------------------------------------------------------------------------------ the report
def test_default_threshold_is_fifteen_percent():
    assert DEFAULT_THRESHOLD_PCT == 15 and COUNTER_TAIL_BYTES == 8


def test_empty_report_has_zero_rate_and_is_never_worthwhile():
    r = R()
    assert (r.attempted_tiles, r.commit_rate_ppm, r.commit_rate_pct) == (0, 0, 0)
    assert not r.worthwhile(1) and r.worthwhile(0)


@pytest.mark.parametrize("committed, rolled, ppm", [
    (1, 3, 250_000), (0, 1024, 0), (1024, 0, 1_000_000), (1, 2, 333_333), (2, 1, 666_666),
    (1, 999_999, 1), (1, 1_000_000, 0), (U32_MAX, U32_MAX, 500_000), (U32_MAX, 0, 1_000_000),
    (1, U32_MAX, 0), (U32_MAX, 1, 999_999),
])
def test_commit_rate_is_floored_parts_per_million(committed, rolled, ppm):
    r = R(committed, rolled)
    assert r.commit_rate_ppm == ppm == committed * 10**6 // (committed + rolled)
    assert r.commit_rate_pct == ppm // 10_000


def test_attempted_tiles_is_exact_beyond_u32():
    assert R(U32_MAX, U32_MAX).attempted_tiles == 8_589_934_590


def test_worthwhile_compares_ppm_with_whole_percent():
    r = R(20, 80)                      # exactly 20 %
    assert r.worthwhile(20) and not r.worthwhile(21) and not r.worthwhile(25)
    assert R(1024, 0).worthwhile(99) and R(1024, 0).worthwhile(100)
    assert not R(U32_MAX, U32_MAX).worthwhile(51)
    assert R(149_999, 850_001).worthwhile(14) and not R(149_999, 850_001).worthwhile(15)
    assert R().worthwhile() is False and R(15, 85).worthwhile() is True   # default threshold 15


@pytest.mark.parametrize("bad", [-1, 2**32, True, 1.0, "3", None])
def test_report_refuses_a_count_that_is_not_u32(bad):
    with pytest.raises(InvalidProgram, match="Fix:") as err:
        R(bad, 0)
    assert err.value.code == 1006
    with pytest.raises(InvalidProgram):
        R(0, bad)


# ------------------------------------------------------------------------------ the tail
def test_parse_reads_the_last_two_little_endian_words():
    buf = bytearray(32)
    buf[24:28] = (42).to_bytes(4, "little")
    buf[28:32] = (100).to_bytes(4, "little")
    assert parse_counter_tail(bytes(buf)) == R(42, 100)
    assert parse_counter_tail(memoryview(buf)) == R(42, 100)
    assert parse_counter_tail(buf) == R(42, 100)


@pytest.mark.parametrize("n", [0, 1, 4, 7, 9, 10, 11, 13, 15, 4097])
def test_parse_gives_nothing_for_short_or_unaligned_lengths(n):
    assert parse_counter_tail(b"\xff" * n) is None


@pytest.mark.parametrize("n", [8, 12, 16, 4096])
def test_parse_accepts_every_whole_word_length_from_eight(n):
    data = bytes(range(256)) * (n // 256 + 1)
    data = data[:n]
    assert parse_counter_tail(data) == R(*struct.unpack("<II", data[-8:]))


@pytest.mark.parametrize("r", [R(), R(7, 13), R(U32_MAX, 0), R(0, U32_MAX), R(0x01020304, 0xA0B0C0D0)])
def test_encode_is_the_inverse_of_parse(r):
    tail = encode_counter_tail(r)
    assert tail == struct.pack("<II", r.committed_tiles, r.rolled_back_tiles) and len(tail) == 8
    assert parse_counter_tail(bytes(24) + tail) == r
    assert parse_counter_tail(tail) == r


# ------------------------------------------------------------------------------ the EMA
def test_speculator_starts_enabled_seeded_at_the_threshold():
    s = AdaptiveSpeculator(15)
    assert s.should_speculate() and s.commit_rate_ppm == 150_000 and s.samples == 0
    assert (s.threshold_ppm, s.disable_below_ppm, s.enable_at_ppm) == (150_000, 112_500, 187_500)
    assert AdaptiveSpeculator().threshold_ppm == 150_000


def test_one_record_moves_the_ema_a_quarter_of_the_way():
    s = AdaptiveSpeculator(15)
    s.record(R(1, 3))                                  # 250 000 ppm
    assert s.commit_rate_ppm == 150_000 + (100_000 >> 2) == 175_000 and s.samples == 1


def test_the_ema_step_floors_like_an_i64_shift():
    up, down = AdaptiveSpeculator(15), AdaptiveSpeculator(15)
    up.record(R(150_001, 849_999))                     # +1 ppm: 1 >> 2 == 0
    down.record(R(149_999, 850_001))                   # -1 ppm: -1 >> 2 == -1 (floor, not truncation)
    assert up.commit_rate_ppm == 150_000 and down.commit_rate_ppm == 149_999
    d = AdaptiveSpeculator(15)
    d.record(R(149_995, 850_005))                      # -5 >> 2 == -2
    assert d.commit_rate_ppm == 149_998


def test_disable_is_strictly_below_three_quarters_of_the_threshold():
    s = AdaptiveSpeculator(15)
    s.record(R(0, 1))                                  # 150000 - 37500 = 112500: not below
    assert s.commit_rate_ppm == 112_500 and s.should_speculate()
    s.record(R(0, 1))                                  # 112500 - 28125 = 84375
    assert s.commit_rate_ppm == 84_375 and not s.should_speculate()


def test_enable_is_at_or_above_five_quarters_of_the_threshold():
    def off() -> AdaptiveSpeculator:
        s = AdaptiveSpeculator(20)                     # enable at 250 000, disable below 150 000
        s.record(R(0, 1))
        s.record(R(0, 1))                              # 200000 -> 150000 -> 112500
        assert s.commit_rate_ppm == 112_500 and not s.should_speculate()
        return s

    at, under = off(), off()
    at.record(R(662_500, 337_500))                     # 112500 + (550000 >> 2) = 250000
    under.record(R(662_499, 337_501))                  # 112500 + (549999 >> 2) = 249999
    assert at.commit_rate_ppm == 250_000 and at.should_speculate()
    assert under.commit_rate_ppm == 249_999 and not under.should_speculate()


def test_sustained_low_rate_disables_and_sustained_high_rate_reenables():
    s = AdaptiveSpeculator(20)
    for _ in range(20):
        s.record(R(1, 99))
    assert not s.should_speculate() and s.commit_rate_ppm < 150_000
    for _ in range(20):
        s.record(R(80, 20))
    assert s.should_speculate()


def test_hovering_at_the_threshold_never_flaps():
    s = AdaptiveSpeculator(20)
    for _ in range(50):
        s.record(R(20, 80))
        assert s.should_speculate()
    off = AdaptiveSpeculator(20)
    for _ in range(10):
        off.record(R(0, 1))
    for _ in range(50):                                 # 24 % is inside the deadband: stays off
        off.record(R(24, 76))
        assert not off.should_speculate()


def test_a_report_with_nothing_attempted_is_ignored():
    s = AdaptiveSpeculator(15)
    s.record(R(0, 0))
    assert s.commit_rate_ppm == 150_000 and s.samples == 0 and s.should_speculate()


def test_samples_count_every_non_empty_record():
    s = AdaptiveSpeculator(15)
    for i in range(17):
        s.record(R(i + 1, 10))
    s.record(R())
    assert s.samples == 17


@pytest.mark.parametrize("pct", [0, 1, 50, 100])
def test_extreme_thresholds(pct):
    s = AdaptiveSpeculator(pct)
    ema = pct * 10_000
    for _ in range(30):
        s.record(R(0, 5))
        ema += (0 - ema) >> 2                     # floors: the EMA reaches 0, never below
    assert s.commit_rate_ppm == ema >= 0
    assert s.should_speculate() is (pct == 0)     # 0 % never disables: nothing is below 0 ppm


@pytest.mark.parametrize("bad", [-1, 101, 1.5, True, "15", None])
def test_speculator_refuses_a_threshold_that_is_not_a_percent(bad):
    with pytest.raises(InvalidProgram, match="Fix:"):
        AdaptiveSpeculator(bad)


def test_concurrent_records_lose_no_sample():
    s = AdaptiveSpeculator(15)
    threads = [threading.Thread(target=lambda: [s.record(R(3, 1)) for _ in range(500)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ema = 150_000
    for _ in range(4000):
        ema += (750_000 - ema) >> 2
    assert s.samples == 4000 and s.commit_rate_ppm == ema and s.should_speculate()


# ------------------------------------------------------------------------------ the mode
@pytest.mark.parametrize("given, mode", [
    (None, SpeculationMode.AUTO), ("auto", SpeculationMode.AUTO), ("FORCE", SpeculationMode.FORCE),
    ("Disable", SpeculationMode.DISABLE), (SpeculationMode.FORCE, SpeculationMode.FORCE),
])
def test_config_takes_a_mode_or_its_name(given, mode):
    assert DispatchConfig(speculation=given).speculation is mode
    assert DispatchConfig().speculation is SpeculationMode.AUTO


@pytest.mark.parametrize("bad", [1, True, "sometimes", b"force", 0.5])
def test_config_refuses_an_unknown_mode(bad):
    with pytest.raises(InvalidProgram, match="Fix:") as err:
        DispatchConfig(speculation=bad)
    assert err.value.code == 1006


def test_speculation_does_not_change_generated_code():
    assert DispatchConfig(speculation="force").code_key() == DispatchConfig().code_key()
    assert DispatchConfig(speculation="force").with_(speculation="disable").speculation is SpeculationMode.DISABLE


# ------------------------------------------------------------------------------ routing
def _program(value: int) -> Program:
    """Writes ``value`` into out[0..n) (n = the input's length) — a stand-in fused/prefilter."""
    gx = Expr.gid_x()
    return Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("out", 1, DataType.U32)],
                           4, [Node.store("out", gx, Expr.load("a", gx) + value)])


class TailBackend(VyreBackend, external=True):
    """The reference's bytes, with a switchable speculation capability and a call log."""

    def __init__(self, speculation: bool = True) -> None:
        self.speculation, self.calls = speculation, []

    def id(self) -> str:
        return "tail-test"

    def supports_speculation(self) -> bool:
        return self.speculation

    def dispatch(self, program, inputs, config=None):
        self.calls.append(program)
        return reference.run(program, inputs, config)


FUSED, PREFILTER = _program(0), _program(100)


def _inputs(committed: int, rolled: int) -> list[bytes]:
    return [struct.pack("<4I", 9, 8, committed, rolled)]   # out = the input: tail = (committed, rolled)


def _never(_outputs):
    raise AssertionError("the two-stage path must not run")


def test_force_on_a_backend_without_speculation_is_unsupported_feature():
    b = TailBackend(speculation=False)
    with pytest.raises(UnsupportedFeature) as err:
        dispatch_prefilter_confirm(b, AdaptiveSpeculator(), SpeculativeDispatchPlan(FUSED, PREFILTER),
                                   _inputs(1, 1), DispatchConfig(speculation="force"), _never)
    assert err.value.code == 1002 and err.value.backend == "tail-test"
    assert "speculative dispatch" in str(err.value) and "Fix:" in str(err.value) and b.calls == []


def test_force_runs_the_fused_program_strips_the_tail_and_records():
    b, s = TailBackend(), AdaptiveSpeculator()
    out = dispatch_prefilter_confirm(b, s, SpeculativeDispatchPlan(FUSED, PREFILTER), _inputs(3, 1),
                                     DispatchConfig(speculation=SpeculationMode.FORCE), _never)
    assert out.used_speculative_path and out.report == R(3, 1)
    assert out.outputs == [struct.pack("<2I", 9, 8)] and b.calls == [FUSED]
    assert s.samples == 1 and s.commit_rate_ppm == 150_000 + ((750_000 - 150_000) >> 2)


def test_the_tail_stays_when_the_plan_keeps_it():
    out = dispatch_prefilter_confirm(TailBackend(), AdaptiveSpeculator(),
                                     SpeculativeDispatchPlan(FUSED, PREFILTER, 0, strip_counter_tail=False),
                                     _inputs(3, 1), DispatchConfig(speculation="force"), _never)
    assert out.outputs == [struct.pack("<4I", 9, 8, 3, 1)]


def test_force_overrides_a_disabled_speculator():
    s = AdaptiveSpeculator(90)
    for _ in range(16):
        s.record(R(0, 100))
    assert not s.should_speculate()
    out = dispatch_prefilter_confirm(TailBackend(), s, SpeculativeDispatchPlan(FUSED, PREFILTER), _inputs(1, 0),
                                     DispatchConfig(speculation="force"), _never)
    assert out.used_speculative_path


def test_disable_runs_the_prefilter_and_hands_its_outputs_to_the_closure():
    b, s, seen = TailBackend(), AdaptiveSpeculator(), []

    def confirm(prefiltered):
        seen.append(prefiltered)
        return [b"confirmed"]

    out = dispatch_prefilter_confirm(b, s, SpeculativeDispatchPlan(FUSED, PREFILTER), _inputs(3, 1),
                                     DispatchConfig(speculation="disable"), confirm)
    assert (out.outputs, out.report, out.used_speculative_path) == ([b"confirmed"], None, False)
    assert seen == [[struct.pack("<4I", 109, 108, 103, 101)]] and b.calls == [PREFILTER]
    assert s.samples == 0 and s.should_speculate()


@pytest.mark.parametrize("config", [None, DispatchConfig(), DispatchConfig(speculation="auto")])
def test_auto_follows_the_speculator(config):
    s = AdaptiveSpeculator(15)
    paths = []
    for _ in range(4):     # 1 % commit rate: 150000 -> 115000 -> 88750 (off)
        out = dispatch_prefilter_confirm(TailBackend(), s, SpeculativeDispatchPlan(FUSED, PREFILTER),
                                         _inputs(1, 99), config, lambda o: [b"two-stage"])
        paths.append(out.used_speculative_path)
    assert paths == [True, True, False, False] and s.samples == 2


def test_auto_on_a_backend_without_speculation_takes_the_two_stage_path():
    b = TailBackend(speculation=False)
    out = dispatch_prefilter_confirm(b, AdaptiveSpeculator(), SpeculativeDispatchPlan(FUSED, PREFILTER),
                                     _inputs(1, 0), None, lambda o: [b"two-stage"])
    assert not out.used_speculative_path and b.calls == [PREFILTER]


def test_an_empty_fused_report_leaves_the_speculator_alone():
    s = AdaptiveSpeculator()
    out = dispatch_prefilter_confirm(TailBackend(), s, SpeculativeDispatchPlan(FUSED, PREFILTER), _inputs(0, 0),
                                     None, _never)
    assert out.report == R(0, 0) and s.samples == 0


def test_a_missing_counter_output_is_an_error_with_a_fix():
    with pytest.raises(DispatchFailed, match=r"output #1.*Fix: set SpeculativeDispatchPlan\.counter_output_index") as err:
        dispatch_prefilter_confirm(TailBackend(), AdaptiveSpeculator(), SpeculativeDispatchPlan(FUSED, PREFILTER, 1),
                                   _inputs(1, 1), None, _never)
    assert err.value.code == 1005


def test_an_output_without_a_tail_is_an_error_with_a_fix():
    gx = Expr.gid_x()
    short = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("out", 1, DataType.U32, 1)],
                            4, [Node.store("out", gx, Expr.load("a", gx))])
    s = AdaptiveSpeculator()
    with pytest.raises(DispatchFailed, match=r"no two-u32 counter tail.*Fix:") as err:
        dispatch_prefilter_confirm(TailBackend(), s, SpeculativeDispatchPlan(short, PREFILTER), _inputs(1, 1),
                                   None, _never)
    assert err.value.code == 1005 and s.samples == 0


@pytest.mark.parametrize("bad", [-1, True, 1.0, "0"])
def test_plan_refuses_a_bad_counter_index(bad):
    with pytest.raises(InvalidProgram, match="Fix:"):
        SpeculativeDispatchPlan(FUSED, PREFILTER, bad)
