"""Expansion reads a name bound at the top level once (a constant): no other scope can bind it
again (a loop variable, a let in a block, a def parameter, the rank variable or a greedy
priority's names that would hide it are ``rebinding`` errors, tests/test_bindings.py), and a
name used before its top-level binding is still an error."""

from __future__ import annotations

import pytest

from ppir.diagnostics import PpirError
from ppir.frontend.expand import expand
from ppir.frontend.parser import parse_text

HEAD = "schedule t(P = 2, M = 4)\nranks P\nstages P\nmicrobatches M\nplacement looped\n"


def _ops(body: str, rank: int = 0) -> list[str]:
    s = expand(parse_text(HEAD + body, "t.pps"))
    return [str(a) for a in s.programs[rank]]


def test_top_level_names_beside_inner_ones():
    body = """let k = 3
let j = 1
def f(n) = n + j
program r {
  F(k)
  for i in 0 .. 2 { F(f(i)) }
  if r == 0 { let z = 0  B(f(z) + z) }
  B(j - 1)  B(k) B(2) F(0) B(0)
}"""
    # F(3); the loop's i (f adds the top j = 1): F(1) F(2); the block's z = 0: f(0) + 0 = 1
    assert _ops(body) == ["0F3", "0F1", "0F2", "0B1", "0B0", "0B3", "0B2", "0F0", "0B0"]


@pytest.mark.parametrize(
    "body",
    [
        "let k = 3\nprogram r { for k in 0 .. 2 { F(k) B(k) } }",
        "let j = 1\nprogram r { if r == 0 { let j = 0 } F(j) B(j) }",
        "let k = 3\ndef f(k) = k\nprogram r { F(f(0)) B(0) }",
        "let r = 7\nprogram r { F(r) B(r) }",  # microbatch 7 would be out of range
        "let mb = 0\nprogram r greedy { priority mb }",
    ],
)
def test_a_top_level_name_is_never_shadowed(body):
    with pytest.raises(PpirError) as e:
        _ops(body)
    assert e.value.kind == "rebinding"


def test_a_name_used_before_its_top_level_binding_is_undefined():
    body = "def f(m) = m + late\nlet x = f(1)\nlet late = 2\nprogram r { F(0) B(0) }"
    with pytest.raises(PpirError) as e:
        _ops(body)
    assert e.value.kind == "undefined-name" and "late" in str(e.value)
