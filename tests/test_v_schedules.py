"""V-Half and V-Min (Qi et al., NeurIPS'24) are the authors' schedules.

Reference: the authors' own code, ported in ``tests/peers/zbv_greedy.py`` (their building
blocks, weight placement, reordering and squeezing).  ppir's built-ins state the building block
in a ``program r pattern`` block and build the rest with :mod:`ppir.synth.pattern`.
"""

from __future__ import annotations

import pytest
from peers.zbv_greedy import authors_schedule

from ppir.analysis.config import make_config
from ppir.analysis.estimate import estimate
from ppir.analysis.memory import analyze_memory
from ppir.diagnostics import PpirError
from ppir.frontend.expand import expand
from ppir.frontend.loader import load_schedule
from ppir.frontend.parser import parse_text
from ppir.passes import LowerComms
from ppir.verify import verify

# F = I = W = 1 per chunk: ppir's costs are per rank share (two chunks)
UNIT = make_config({"costs": {"F": 2, "B": 4, "I": 2, "W": 2}})
GRID = [(P, M) for P in range(2, 9) for M in (2 * P, 4 * P)]
MEMORY = {"v_half": lambda P: 2 * ((P + 2) // 2), "v_min": lambda P: 2 * ((P + 4) // 3)}


def orders(name, P, M):
    s = load_schedule(name, {"P": P, "M": M})
    return [[str(a) for a in s.programs[r]] for r in range(P)]


@pytest.mark.parametrize("name", ["v_half", "v_min"])
@pytest.mark.parametrize("P,M", GRID)
def test_step_time_and_bubble_equal_the_authors(name, P, M):
    span, _, rate = authors_schedule(name, P, M)
    s = load_schedule(name, {"P": P, "M": M})
    e = estimate(LowerComms().apply(s), UNIT)
    assert e.step_time == span  # rank 0 starts at 0 and has the longest span
    assert max(row[-1].end - row[0].start for row in e.ops) == span
    assert e.bubble_fraction_of_total == pytest.approx(rate, abs=1e-12)
    peaks = [m.peak_chunks for m in analyze_memory(s, i_fraction=0).per_rank]
    assert max(peaks) == MEMORY[name](P)  # the paper's (P+2)//2 and (P+4)//3 A


def test_v_half_figures_from_the_issue():
    """P=8, M=32 at unit costs: 0.0813 (the greedy order shipped before had 0.131)."""
    e = estimate(LowerComms().apply(load_schedule("v_half", {"P": 8, "M": 32})), UNIT)
    assert round(e.bubble_fraction_of_total, 4) == 0.0813


def _orders_match(name, ms):
    for P in range(2, 9):
        for M in sorted(m for m in ms(P) if m >= 1):
            assert orders(name, P, M) == authors_schedule(name, P, M)[1], (P, M)


@pytest.mark.parametrize("name", ["v_half", "v_min"])
def test_orders_are_the_authors(name):
    """Beyond the grid: short pipelines, where the stable phase is short or missing."""
    _orders_match(name, lambda P: {1, P - 1, P + 1, 2 * P + 1})


@pytest.mark.slow
@pytest.mark.parametrize("name", ["v_half", "v_min"])
def test_orders_are_the_authors_every_m(name):
    _orders_match(name, lambda P: range(1, 4 * P + 1))


@pytest.mark.parametrize("name", ["v_half", "v_min"])
def test_verify_every_small_case(name):
    for P in range(2, 7):
        for M in (1, P - 1, P + 1, 2 * P + 1):
            s = load_schedule(name, {"P": P, "M": M})
            assert verify(LowerComms().apply(s), strict=True).diagnostics == []


def test_v_half_beats_1f1b_at_half_its_memory():
    for P in (4, 6, 8):
        M = 3 * P
        ours = estimate(LowerComms().apply(load_schedule("v_half", {"P": P, "M": M})))
        ref = estimate(LowerComms().apply(load_schedule("1f1b", {"P": P, "M": M})))
        assert max(r.idle for r in ours.per_rank) < max(r.idle for r in ref.per_rank) / 2


HEAD = """schedule t(P = 2, M = 3)
ranks P
stages 2 * P
microbatches M
placement vshape
"""


def run(body):
    return expand(parse_text(HEAD + body, "t.pps"))


def test_a_pattern_block_by_hand():
    """A hand-written V block (P=2, M=3): every pass once, weight passes added, deadlock-free;
    the stable phase keeps the block's order (rank 1: F, f, B, b in slots 1, 2, 5, 6)."""
    s = run("""program r pattern {
  F(m, 0) at r + 6 * m
  F(m, 1) at 3 - r + 6 * m
  I(m, 1) at 4 + r + 6 * m
  I(m, 0) at 7 - r + 6 * m
}""")
    assert verify(LowerComms().apply(s)).ok
    keys = [a.key for r in range(2) for a in s.actions(r)]
    assert len(keys) == len(set(keys)) == 3 * 4 * 3
    assert [str(a) for a in s.programs[1]][:4] == ["1F0", "2F0", "2I0", "1I0"]


@pytest.mark.parametrize(
    "body,kind,where",
    [
        ("program r pattern { W(m, 0) at m }", "unknown-op", "t.pps:6:21"),
        ("program r pattern { F(m, 2) at m }", "chunk-out-of-range", "t.pps:6:26"),
        ("program r pattern { F(m, 0) at -1 + m }", "bad-slot", "t.pps:6:21"),
        ("program r pattern { F(m, 0) at m  F(m, 0) at m + 9 }", "duplicate-slot", "t.pps:6:35"),
        ("program r pattern { F(m, 0) at 6 * m }", "incomplete-pattern", "t.pps:6:1"),
        (
            "program r pattern { F(m, 0) at 4 * m  F(m, 1) at 4 * m + 2  I(m, 1) at 4 * m + 1"
            "  I(m, 0) at 4 * m + 3 }",
            "pattern-conflict",
            "t.pps:6:",
        ),
    ],
)
def test_pattern_diagnostics(body, kind, where):
    with pytest.raises(PpirError) as e:
        run(body)
    assert e.value.kind == kind, e.value.render()
    assert e.value.render().startswith(where), e.value.render()


@pytest.mark.parametrize(
    "f1,message",
    [("8 * m", "both take slot 0"), ("8 * m + 1", "consumes 2F0, which comes at slot 1")],
)
def test_pattern_conflict_says_which_passes(f1, message):
    with pytest.raises(PpirError) as e:
        run(
            f"program r pattern {{ F(m, 0) at 8 * m  F(m, 1) at {f1}  I(m, 1) at 8 * m + 5"
            "  I(m, 0) at 8 * m + 7 }"
        )
    text = e.value.render()
    assert message in text and "note:" in text, text
