"""Language and IR support for split backward and overlapped steps.

``FB(...)`` and the ``(0F3;3B1)OVERLAP_F_B`` literal, ``next`` microbatches, ``W(next)`` and
``pending_w()``, ``program r greedy { ... }`` blocks, and how lowering, the verifier, the
estimator and the printers treat an :class:`~ppir.ir.Overlap` as one atomic step.
"""

from __future__ import annotations

import pytest

from ppir.analysis.estimate import estimate
from ppir.analysis.memory import analyze_memory
from ppir.diagnostics import PpirError
from ppir.frontend.expand import expand
from ppir.frontend.loader import load_schedule
from ppir.frontend.parser import parse_text
from ppir.ir import Action, OpKind, Overlap, item_actions
from ppir.ir.printer import format_pps, from_json, to_json
from ppir.passes import LowerComms
from ppir.verify import verify

HEAD = """schedule t(P = 2, M = 4)
ranks P
stages 2 * P
microbatches M
placement vshape
"""


def run(body: str, **params):
    return expand(parse_text(HEAD + body, "t.pps"), params)


def err(body: str, **params) -> PpirError:
    with pytest.raises(PpirError) as e:
        run(body, **params)
    return e.value


def test_overlap_text_round_trips():
    o = Overlap.parse("(0F3;3B1)OVERLAP_F_B")
    assert o.actions == (Action(0, OpKind.F, 3), Action(3, OpKind.B, 1))
    assert str(o) == "(0F3;3B1)OVERLAP_F_B" and item_actions(o) == o.actions
    with pytest.raises(ValueError):
        Overlap((Action(3, OpKind.B, 1), Action(0, OpKind.F, 3)))


def test_next_counters_and_weight_queue():
    s = run("""program r {
  for m in 0 .. M { F(next, 0) }
  for m in 0 .. M { F(next, 1) I(next, 1) }
  I(next, 0) I(next, 0)
  require pending_w() == M + 2 : "queue"
  require pending_w(0) == 2 : "per chunk"
  W(next, 0)
  for k in 0 .. pending_w() { W(next) }
  for m in 2 .. M { B(next, 0) }
}""")
    prog = [str(a) for a in s.programs[0]]
    assert prog[:4] == ["0F0", "0F1", "0F2", "0F3"]
    assert prog[12:14] == ["0I0", "0I1"]
    assert prog[14] == "0W0"  # W(next, 0): the oldest weight pass of chunk 0
    assert prog[15:20] == ["3W0", "3W1", "3W2", "3W3", "0W1"]  # W(next): oldest of any chunk
    assert prog[20:] == ["0B2", "0B3"]


FB_BODY = """program r {
  for m in 0 .. M { F(next, 0) }
  F(next, 1)
  for m in 1 .. M { FB(next, 1, next, 1) }
  B(next, 1)
  for m in 0 .. M { B(next, 0) }
}"""


def test_fb_emits_one_overlapped_item():
    s = run(FB_BODY)
    overlaps = [it for it in s.programs[1] if isinstance(it, Overlap)]
    assert [str(o) for o in overlaps] == [
        "(2F1;2B0)OVERLAP_F_B",
        "(2F2;2B1)OVERLAP_F_B",
        "(2F3;2B2)OVERLAP_F_B",
    ]
    assert len(s.compute_only().programs[1]) == len(s.programs[1])


def test_overlap_is_atomic_so_this_order_is_a_cycle():
    """(2F1;2B0) on rank 1 needs 3B0, which rank 0 runs in (3F1;3B0), which needs the output
    of 2F1: run apart this order would work, as one atomic step it cannot."""
    report = verify(LowerComms().apply(run(FB_BODY)))
    assert [d.kind for d in report.diagnostics] == ["order-cycle"]


def test_lowering_keeps_overlaps_whole():
    s = load_schedule("dualpipev", {"P": 2, "M": 4})
    low = LowerComms().apply(s)
    assert verify(low).ok
    assert [it for p in low.programs for it in p if isinstance(it, Overlap)] == [
        it for p in s.programs for it in p if isinstance(it, Overlap)
    ]
    assert from_json(to_json(low)) == low
    assert expand(parse_text(format_pps(low))).programs == low.programs


def test_overlap_of_a_stage_with_its_own_backward_is_a_cycle():
    text = """ranks 2
stages 2
microbatches 1
rank 0: (0F0;0B0)OVERLAP_F_B
rank 1: 1F0 1B0
"""
    s = expand(parse_text(text, "cyc.pps"))
    assert not verify(LowerComms().apply(s)).ok


def test_estimator_times_an_overlap_as_one_op():
    s = load_schedule("dualpipev", {"P": 2, "M": 4})
    e = estimate(LowerComms().apply(s))
    for r in range(2):
        row = {o.action: o for o in e.ops[r]}
        for it in s.programs[r]:
            if isinstance(it, Overlap):
                f, b = (row[a] for a in it.actions)
                assert f.end == b.start  # parts share one interval, back to back
                assert b.end - f.start == 0.5 + 1.0  # chunk F + chunk B (default: the sum)


def test_greedy_block_builds_orders():
    s = run(
        """program r greedy {
  memory 4
  priority 2 * is_w + is_f
}""",
        P=2,
        M=4,
    )
    assert verify(LowerComms().apply(s)).ok
    assert max(m.peak_chunks for m in analyze_memory(s, i_fraction=0).per_rank) <= 4
    kinds = {a.kind for r in range(2) for a in s.actions(r)}
    assert kinds == {OpKind.F, OpKind.I, OpKind.W}
    fused = run("program r greedy { memory 4 split 0 cost B = 3 }", P=2, M=4)
    assert {a.kind for a in fused.actions(0)} == {OpKind.F, OpKind.B}


@pytest.mark.parametrize(
    "body,kind,where",
    [
        ("program r { W(next) }", "no-pending-weight", "t.pps:6:13"),
        ("program r { FB(0, 0, 0) }", "bad-call", "t.pps:6:13"),
        ("program r { for m in 0 .. 5 { F(next, 0) } }", "microbatch-out-of-range", "t.pps:6:31"),
        ("program r greedy { memory 1 }", "memory-too-small", "t.pps:6:20"),
        ("program r greedy { memory 4 memory 5 }", "duplicate-option", "t.pps:6:29"),
        ("program r greedy { cost X = 1 }", "unknown-op", "t.pps:6:25"),
        ("program r greedy { cost F = 0 }", "bad-cost", "t.pps:6:20"),
        ("program r greedy { priority nope }", "undefined-name", "t.pps:6:29"),
        # no op statement runs in these blocks: pending_w() would always be 0
        ("program r greedy { priority pending_w() }", "pending-w-outside-program", "t.pps:6:29"),
        ("program r pattern { let k = pending_w(0) }", "pending-w-outside-program", "t.pps:6:29"),
    ],
)
def test_diagnostics_point_at_the_source(body, kind, where):
    e = err(body)
    assert e.kind == kind, e.render()
    assert e.render().startswith(where), e.render()


def test_fb_of_two_forwards_is_rejected():
    text = "rank 0: (0F0;0F1)OVERLAP_F_B\n"
    with pytest.raises(PpirError) as e:
        parse_text(text, "x.pps")
    assert e.value.render().startswith("x.pps:1:")
