"""A small seeded run of bench/fuzz_frontend.py (the full one is 6,000 inputs, run by hand):
no traceback, no diagnostic without file:line:col and caret, nothing over the limit."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_frontend", ROOT / "bench/fuzz_frontend.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return module


KNOWN = {"known-capped-summary", "unlocated-lead", "known-slow"}  # counted apart, listed


def test_a_sample_of_the_fuzz_behaves(fuzz):
    cases = fuzz.generate(seed=7, count=160, known=False)
    assert {c.category for c in cases} >= {"mutation", "bytes", "huge", "deep", "size", "repro"}
    results = fuzz.run_cases(cases, limit=30.0)  # the limit guards against hangs only
    bad = [
        (r["index"], r["category"], r["problems"], r["text"][:300])
        for r in results
        if set(r["problems"]) - KNOWN
    ]
    assert not bad, bad


def test_the_generator_is_seeded(fuzz):
    mat = fuzz.Material()
    a = fuzz.generate(seed=3, count=60, mat=mat, known=False)
    b = fuzz.generate(seed=3, count=60, mat=mat, known=False)
    assert [(c.files, c.argv) for c in a] == [(c.files, c.argv) for c in b]
    assert len(a) == 60


@pytest.mark.parametrize(
    "text, escaped, elapsed, problem",
    [
        ("", "Traceback (most recent call last):\n  ...\nTypeError: x", 0.1, "traceback"),
        ("ppir: error: cannot read x: 'utf-8' codec can't decode\n", None, 0.1, "unlocated"),
        ("x.pps: error: nests too deeply\n", None, 0.1, "unlocated"),
        ("x.pps:1:2: error: bad\nhint: no quote\n", None, 0.1, "no-caret"),
        ("x.pps:1:2: error: bad\n1 | " + "x" * 500 + "\n  | ^\n", None, 0.1, "overlong-line"),
        ("", None, 11.0, "over-limit"),
    ],
)
def test_the_fuzz_can_find_each_problem(fuzz, text, escaped, elapsed, problem):
    assert problem in fuzz.classify(2, text, escaped, elapsed, 10.0)


def test_a_located_diagnostic_with_its_caret_and_a_define_message_pass(fuzz):
    ok = "x.pps:1:2: error: bad\n1 | abc\n  |  ^\nppir: error: -D P=x: the value of 'P'\n"
    assert fuzz.classify(2, ok, None, 0.1, 10.0) == []


def test_only_the_listed_reproducers_are_known_slow(fuzz):
    """Over the limit is a problem for every input but the listed valid-but-large reproducers,
    named by their text, never by where their stack was."""
    cases = fuzz.generate(seed=7, count=40)
    known = [c for c in cases if fuzz.is_known_reproducer(c)]
    assert [c.argv for c in known] == [a for _, a in sys.modules["fuzz_inputs"].KNOWN_REPRODUCERS]
    other = fuzz.Case(0, "size", {}, ["gpipe", "-D", "P=65536", "-D", "M=3"])
    assert not fuzz.is_known_reproducer(other)
