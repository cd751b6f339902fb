"""Parser fuzzing: whatever text comes in, ppir answers with its own diagnostics (PpirError).

Inputs: random text over the characters of the language, and grammar-aware mutations of the
shipped .pps files at the token level (delete, duplicate, swap, insert a token from the files'
vocabulary or a random character, replace a number, truncate).  Most examples mutate a window
of a few lines and are only parsed (a full file costs ~10 ms to parse on a loaded machine);
one test mutates whole files and also expands them with small caps.  5,300 examples in all.
Regression tests pin the crashes this found.
"""

from __future__ import annotations

import re
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppir.diagnostics import PpirError
from ppir.frontend.expand import expand
from ppir.frontend.loader import load_text
from ppir.frontend.parser import parse_text
from ppir.schedules import builtin_names, builtin_source

TOKEN = re.compile(
    r"\s+|#[^\n]*|\"[^\"\n]*\"|\d+[A-Z_]+\d+|[A-Za-z_]\w*|\d+|\.\.|//|==|!="
    r"|<=|>=|.",
    re.S,
)
ALPHABET = 'schedulranksmicbtpoFBIWvP0123456789 \n\t(){}[],:=+-*/%<>!.#"_;é\x00'


@cache
def _sources() -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(TOKEN.findall(builtin_source(n))) for n in builtin_names())


@cache
def _vocab() -> tuple[str, ...]:
    return tuple(sorted({t for src in _sources() for t in src if t.strip()}))


def _parses_or_diagnoses(text: str, expand_too: bool = False) -> None:
    try:
        module = parse_text(text, "<fuzz>")
        if expand_too:
            expand(module, {}, max_ops=2_000, max_steps=20_000)
    except PpirError as e:
        assert e.diagnostics and e.render()


_EDIT = st.tuples(st.sampled_from("dDsirnt"), st.integers(0, 10**6), st.integers(0, 10**6))


def _mutate(tokens: list[str], edits) -> str:
    """Apply (op, a, b) edits: delete, Duplicate, swap, insert a token or a random char,
    replace with a number, truncate."""
    toks = list(tokens) or [""]
    for op, a, b in edits:
        i, j = a % len(toks), b % len(toks)
        if op == "d" and len(toks) > 1:
            del toks[i]
        elif op == "D":
            toks.insert(i, toks[i])
        elif op == "s":
            toks[i], toks[j] = toks[j], toks[i]
        elif op == "i":
            toks.insert(i, _vocab()[b % len(_vocab())])
        elif op == "r":
            toks.insert(i, chr(b % 0x250))
        elif op == "n":
            toks[i] = str(b - 500_000)
        elif op == "t":
            toks = toks[:i] or [""]
    return "".join(toks)


@settings(max_examples=2000)
@given(st.text(ALPHABET, max_size=60))
def test_random_text(text):
    _parses_or_diagnoses(text)


@settings(max_examples=3000)
@given(
    st.integers(0, 4),
    st.integers(0, 40),
    st.integers(1, 6),
    st.lists(_EDIT, min_size=1, max_size=4),
)
def test_mutated_windows_of_shipped_files(which, start, length, edits):
    lines = "".join(_sources()[which]).splitlines(keepends=True)
    start %= len(lines)
    window = "".join(lines[start : start + length])
    _parses_or_diagnoses(_mutate(TOKEN.findall(window), edits))


@settings(max_examples=300)
@given(st.integers(0, 4), st.lists(_EDIT, min_size=1, max_size=3))
def test_mutated_whole_files_parse_and_expand(which, edits):
    _parses_or_diagnoses(_mutate(list(_sources()[which]), edits), expand_too=True)


# ------------------------------------------------------------------ regressions (found here)
BODY = "ranks 1\nmicrobatches 1\nprogram r { F(0) B(0) }\n"


@pytest.mark.parametrize(
    "text",
    [
        "let x = " + "-" * 2000 + "1\n" + BODY,  # RecursionError in lark
        "let x = " + "1+" * 2000 + "1\n" + BODY,
        "ranks 1\nmicrobatches 1\nprogram r { " + "if 1 { " * 400 + "}" * 401,  # VisitError
        "def f(n) = 1 + (1 + (1 + (1 + (1 + (1 + f(n - 1))))))\nlet y = f(5000)\n" + BODY,
    ],
)
def test_deep_nesting_is_a_diagnostic(text):
    with pytest.raises(PpirError) as e:
        load_text(text)
    assert e.value.kind in ("too-deep", "recursion-limit")


@pytest.mark.parametrize(
    "text, what",
    [
        ("ranks 100000000\nmicrobatches 1\nprogram r { }\n", "ranks = 100,000,000"),
        ("ranks 1\nstages 100000000\nmicrobatches 1\nprogram r { }\n", "stages = 100,000,000"),
        ("rank 100000000: 0F0\n", "ranks = 100,000,001"),
        ("rank 0: 99999999999999F0\n", "stages = 100,000,000,000,000"),
    ],
)
def test_huge_sizes_hit_the_step_cap_instead_of_hanging(text, what):
    with pytest.raises(PpirError, match=what) as e:
        load_text(text, max_steps=20_000)
    assert e.value.kind == "too-large"
