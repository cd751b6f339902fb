"""Names a .pps file cannot bind, refused where they are bound: ``next`` (as an op's
microbatch it means the next one of the chunk, so a binding of it could never be read there),
the statement and operator keywords (:data:`KEYWORDS`: ``let if = 0`` bound a name no
expression can read) and, as a function's name, the ops (``F(m)`` as a statement always runs
the op) and the builtins (a call of ``min`` always calls the builtin)."""

from __future__ import annotations

from ppir.diagnostics import error
from ppir.frontend.scope import IMPURE_BUILTINS, PURE_BUILTINS
from ppir.ir import Span

NEXT = "next"
NEXT_MEANS = (
    "'next' stands only as an op's whole microbatch argument: F(next) is the next "
    "microbatch of that chunk, W(next) the oldest pending weight pass"
)
OPS = {
    "F": "a forward",
    "B": "a full backward",
    "I": "a backward-input pass",
    "W": "a backward-weight pass",
    "FB": "an overlapped forward and backward",
}


KEYWORDS = ("if", "else", "for", "in", "let", "def", "and", "or", "not")
IF_VALUE = (
    "'if' is a statement, not a value: a comparison is 1 or 0, so (c) * a + (1 - (c)) * b is "
    "a where c holds and b elsewhere (min and max help too)"
)


def op_call_hints(name: str, span: Span | None = None) -> list[str]:
    """What a call of an op inside an expression means; where the call starts its line
    (``span``), whether the line before ends with an operator (``let w = P - r -`` then
    ``F(0)`` reads as ``P - r - F(0)``); [] for a name that is no op."""
    if name not in OPS:
        return []
    hint = f"{name}(...) is {OPS[name]}, a statement of its own, not a value"
    if span is not None and span.source is not None:
        line = span.source.splitlines()[span.line - 1] if span.line >= 1 else ""
        if not line[: span.col - 1].strip():
            hint += ": does the line before end with an operator that continues onto this one?"
    return [hint]


def reserved_hints(name: str) -> list[str]:
    """What an undefined ``name`` that is reserved means (``next``, a keyword); [] else."""
    if name == NEXT:
        return [NEXT_MEANS]
    if name == "if":
        return [IF_VALUE]
    return [f"'{name}' is a keyword of the language, not a value"] if name in KEYWORDS else []


def check_binder(name: str, span: Span, what: str) -> None:
    """A located ``reserved-name`` error when ``name`` is ``next`` or a keyword; ``what`` says
    what binds it (``a loop variable``)."""
    if name in KEYWORDS:
        raise error(
            "reserved-name",
            f"'{name}' is a keyword of the language: it cannot name {what}",
            span,
            hints=["choose another name"],
        )
    if name == NEXT:
        raise error(
            "reserved-name",
            f"'next' is reserved: it cannot name {what}",
            span,
            hints=[NEXT_MEANS, "choose another name"],
        )


def check_function_name(name: str, span: Span) -> None:
    """``check_binder`` for a ``def``'s name, and the op and builtin names refused too."""
    check_binder(name, span, "a function")
    if name in PURE_BUILTINS or name in IMPURE_BUILTINS:
        raise error(
            "reserved-name",
            f"a function cannot be named '{name}': {name}(...) always calls the builtin "
            f"{name}, never a function of that name",
            span,
            hints=[f"the builtins: {', '.join(sorted(PURE_BUILTINS | IMPURE_BUILTINS))}"],
        )
    if name in OPS:
        raise error(
            "reserved-name",
            f"a function cannot be named '{name}': the statement {name}(...) runs "
            f"{OPS[name]}, never a function",
            span,
            hints=[f"{', '.join(list(OPS)[:-1])} and FB are ops; choose another name"],
        )
