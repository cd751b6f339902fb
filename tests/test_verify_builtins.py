"""Every built-in, compiled as 'ppir compile' runs it and lowered with the lockstep strategy
alone, passes its own verifier with no warning.

The default run covers P in 2..8, every v in 1..4 and M in {1, P-1, P, 2P-1, 2P, 3P+1, 4P}; the
``slow`` run (``pytest -m slow``) covers every M in 1..4P.  Parameter sets that a schedule's
``require`` rejects are skipped (interleaved_vshape requires an even v: see
test_verify_corpus.test_vshape_odd_v_order_cycle).
"""

from __future__ import annotations

from functools import cache

import pytest

from ppir.diagnostics import PpirError
from ppir.frontend.expand import expand
from ppir.frontend.loader import read_source
from ppir.frontend.parser import parse_text
from ppir.passes import LowerComms
from ppir.pipeline import compile
from ppir.schedules import builtin_names
from ppir.verify import verify

WITH_V = {"interleaved_1f1b", "interleaved_vshape", "interleaved_zb", "looped_bfs"}


@cache
def _module(name: str):
    path, text = read_source(name)
    return parse_text(text, path)


def _params(full: bool):
    for name in builtin_names():
        for P in range(2, 9):
            few = {1, P - 1, P, 2 * P - 1, 2 * P, 3 * P + 1, 4 * P}
            ms = range(1, 4 * P + 1) if full else sorted(few)
            for M in ms:
                for v in range(1, 5) if name in WITH_V else [None]:
                    yield name, P, M, v


def _check(name: str, P: int, M: int, v: int | None) -> bool:
    """True when the case was checked; False when the schedule's requires reject it."""
    params = {"P": P, "M": M} | ({"v": v} if v else {})
    try:
        s = expand(_module(name), params)
    except PpirError as e:
        if e.kind == "require-failed":
            return False
        raise
    report = verify(LowerComms().apply(s), strict=True)
    assert report.diagnostics == [], "\n".join(d.render() for d in report.diagnostics)
    c = compile(s, strict=True)
    assert c.ok and c.report.diagnostics == [], "\n".join(d.render() for d in c.report.diagnostics)
    return True


def _group(name, cases):
    return [c for c in cases if c[0] == name]


@pytest.mark.parametrize("name", builtin_names())
def test_builtins_verify(name):
    checked = sum(_check(*case) for case in _group(name, _params(full=False)))
    assert checked >= 5, f"{name}: only {checked} parameter sets were accepted and checked"


@pytest.mark.slow
@pytest.mark.parametrize("name", builtin_names())
def test_builtins_verify_full_sweep(name):
    checked = sum(_check(*case) for case in _group(name, _params(full=True)))
    assert checked >= 5, f"{name}: only {checked} parameter sets were accepted and checked"


def test_require_kind_name():
    """The skip above relies on this kind name."""
    with pytest.raises(PpirError) as e:
        expand(_module("interleaved_1f1b"), {"P": 4, "M": 6, "v": 2})
    assert e.value.kind == "require-failed"
