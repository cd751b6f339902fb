"""``next`` is reserved (as an op's microbatch it is the op counter, so a binding of it could
never be read there) and a function cannot take an op's name (the statement ``F(m)`` always
runs the op): both are refused where they are bound, and ``next`` inside an expression is
told that it stands only as the whole argument (goldens: reserved_*.err, next_in_expression.err)."""

from __future__ import annotations

import pytest

import ppir

HEAD = "schedule t(P = 2, M = 2)\nranks P\nmicrobatches M\n"
BODY = HEAD + "program r {\n  %s\n  for m in 0 .. M { F(m) }\n  for m in 0 .. M { B(m) }\n}\n"
NEXT_HINT = (
    "'next' stands only as an op's whole microbatch argument: F(next) is the next "
    "microbatch of that chunk, W(next) the oldest pending weight pass"
)


def _error(text: str) -> ppir.PpirError:
    with pytest.raises(ppir.PpirError) as e:
        ppir.load_text(text, path="x.pps")
    return e.value


@pytest.mark.parametrize(
    "text, what, line, col",
    [
        (BODY % "let next = 1", "a 'let' binding", 5, 7),
        (HEAD + "let next = 1\nprogram r { F(0) }\n", "a 'let' binding", 4, 5),
        (BODY % "for next in 0 .. 1 { }", "a loop variable", 5, 7),
        (BODY % "def f(a, next) = a", "a function parameter", 5, 12),
        (BODY % "def next(a) = a", "a function", 5, 7),
        ("schedule t(next = 2)\nranks 2\n", "a parameter", 1, 12),
        ("ranks 2\nmicrobatches 2\nprogram next { F(0) }\n", "the rank variable", 3, 9),
        ("ranks 2\nmicrobatches 2\nprogram r pattern { F(next, 0) at 0 }\n",
         "the microbatch variable", 3, 23),
    ],
)  # fmt: skip
def test_binding_next_is_a_located_error_saying_it_is_reserved(text, what, line, col):
    e = _error(text)
    assert e.kind == "reserved-name"
    assert e.message == f"'next' is reserved: it cannot name {what}"
    span = e.diagnostics[0].span
    assert (span.line, span.col, span.end_col - span.col) == (line, col, 4)
    assert e.diagnostics[0].hints == (NEXT_HINT, "choose another name")


def test_the_users_let_next_no_longer_turns_into_f0_silently():
    """It used to expand ``F(next)`` as F(0) whatever ``next`` was bound to."""
    e = _error(HEAD + "program r {\n  let next = 1\n  F(next)\n}\n")
    assert e.kind == "reserved-name" and e.diagnostics[0].span.line == 5


@pytest.mark.parametrize("arg", ["next + 0", "2 * next", "min(next, 1)"])
def test_next_inside_an_expression_is_told_it_must_be_the_whole_argument(arg):
    e = _error(HEAD + f"program r {{\n  F({arg})\n}}\n")
    assert e.kind == "undefined-name" and e.message == "undefined name 'next'"
    assert e.diagnostics[0].span.col == 5 + arg.index("next")
    assert e.diagnostics[0].hints == (NEXT_HINT,)


def test_other_undefined_names_keep_their_did_you_mean():
    e = _error(HEAD + "program r {\n  let count = 0\n  F(cuont)\n}\n")
    assert e.diagnostics[0].hints == ("did you mean 'count'?",)


def test_next_as_the_whole_argument_still_counts_per_chunk():
    s = ppir.load_text(
        HEAD + "program r {\n  F(next)  F(next)  B(next, 0)  B(next)\n}\n", path="x.pps"
    )
    assert [str(a) for a in s.programs[0]] == ["0F0", "0F1", "0B0", "0B1"]


@pytest.mark.parametrize("op", ["F", "B", "I", "W", "FB"])
@pytest.mark.parametrize("where", ["top", "program"])
def test_a_function_named_like_an_op_is_refused(op, where):
    d = f"def {op}(a) = a + 1"
    e = _error(HEAD + d + "\nprogram r { F(0) }\n" if where == "top" else BODY % d)
    assert e.kind == "reserved-name"
    assert e.message.startswith(f"a function cannot be named '{op}': the statement {op}(...) runs ")
    span = e.diagnostics[0].span
    assert (span.line, span.col, span.end_col) == ((4, 5) if where == "top" else (5, 7)) + (
        span.col + len(op),
    )
    assert e.diagnostics[0].hints == ("F, B, I, W and FB are ops; choose another name",)


def test_names_near_the_reserved_ones_still_bind():
    s = ppir.load_text(
        HEAD + "def f(nxt) = nxt\nlet Next = 1\nprogram r {\n  let nexts = 0\n"
        "  for SEND in 0 .. 1 { F(f(nexts))  F(Next) }\n  B(0)  B(1)\n}\n",
        path="x.pps",
    )
    assert [str(a) for a in s.programs[0]][:2] == ["0F0", "0F1"]


@pytest.mark.parametrize("name", ["min", "max", "abs", "stage", "chunks", "rank_of", "pending_w"])
def test_a_function_named_like_a_builtin_is_refused(name):
    # the call always ran the builtin: 'def min(a, b) = a' was accepted and never called
    e = _error(HEAD + f"def {name}(a, b) = a\nprogram r {{ F(0) }}\n")
    assert e.kind == "reserved-name"
    assert e.message == (
        f"a function cannot be named '{name}': {name}(...) always calls the builtin {name}, "
        "never a function of that name"
    )
    span = e.diagnostics[0].span
    assert (span.line, span.col, span.end_col) == (4, 5, 5 + len(name))
