"""Expansion reads a name bound at the top level once (a constant) only when no other scope
can bind it: shadowing by a loop variable, a let in a block, a def parameter, the rank
variable or a greedy priority's names still wins, and a name used before its top-level
binding is still an error."""

from __future__ import annotations

import pytest

from ppir.diagnostics import PpirError
from ppir.frontend.expand import expand
from ppir.frontend.parser import parse_text

HEAD = "schedule t(P = 2, M = 4)\nranks P\nstages P\nmicrobatches M\nplacement looped\n"


def _ops(body: str, rank: int = 0) -> list[str]:
    s = expand(parse_text(HEAD + body, "t.pps"))
    return [str(a) for a in s.programs[rank]]


def test_a_top_level_name_and_its_shadows():
    body = """let k = 3
let j = 1
def f(k) = k + j
program r {
  F(k)
  for k in 0 .. 2 { F(f(k)) }
  if r == 0 { let j = 0  B(f(j) + j) }
  B(j - 1)  B(k) B(2) F(0) B(0)
}"""
    # F(3); the loop's k (f adds the top j = 1): F(1) F(2); the block's j = 0: f(0) + 0 = 1
    assert _ops(body) == ["0F3", "0F1", "0F2", "0B1", "0B0", "0B3", "0B2", "0F0", "0B0"]


def test_the_rank_variable_shadows_a_top_level_name():
    body = "let r = 7\nprogram r { F(r) B(r) }"  # microbatch 7 would be out of range
    assert _ops(body, 0) == ["0F0", "0B0"] and _ops(body, 1) == ["1F1", "1B1"]


def test_a_name_used_before_its_top_level_binding_is_undefined():
    body = "def f(m) = m + late\nlet x = f(1)\nlet late = 2\nprogram r { F(0) B(0) }"
    with pytest.raises(PpirError) as e:
        _ops(body)
    assert e.value.kind == "undefined-name" and "late" in str(e.value)
