"""A loop whose range is empty is no error (1F1B's warm-up is empty on the last rank), but when an
op is missing the verifier points at each loop of that rank that would have emitted it and ran
zero times (goldens: verify/empty_loop*.err)."""

from __future__ import annotations

from ppir import load_schedule
from ppir.frontend.loader import load_text
from ppir.verify import verify


def test_an_empty_loop_of_a_valid_schedule_is_recorded_but_reported_nowhere():
    s = load_schedule("1f1b", {"P": 4, "M": 8})
    assert verify(s).ok
    # the warm-up of the last rank: range 0 .. 0, emitting F
    [(rank, emits, span, why)] = [e for e in s.empty_loops if e[0] == 3 and e[1] == "F"]
    assert (rank, span.line) == (3, 15) and "0 .. 0" in why


def test_only_loops_that_emit_the_missing_kind_on_its_rank_get_a_note():
    src = """schedule s(P = 2, M = 2)
ranks P
microbatches M
program r {
  for m in 0 .. M { F(m) }
  for m in r .. 0 { F(m) }
  for m in 0 .. M - 1 { B(m) }
  for m in M .. M - 1 { B(m) }
}
"""
    errors = verify(load_text(src, path="s.pps")).errors
    assert [str(d.span.line) + d.message[:3] for d in errors] == ["5" + "0B1", "5" + "1B1"]
    for d in errors:
        rank = 0 if d.message.startswith("0B1") else 1
        # the statement that runs the stage's other backwards (microbatch 0), then the B loop of
        # its own rank, not the (also empty) F loop on line 6
        assert [(n.span.line, n.span.col, n.span.end_col) for n in d.notes] == [
            (7, 25, 29),
            (8, 12, 22),
        ]
        assert d.notes[0].message == f"stage {rank}'s other backwards run here ({rank}B0)"
        assert d.notes[1].message == (
            f"this loop would emit B but its range is empty on rank {rank}: 2 .. 1 (with M = 2)"
        )
