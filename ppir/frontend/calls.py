"""Errors raised inside a call to a ``def``: the recursion cap, and where each call was made.

An error in a function's body points at the body; with several callers it does not say which
call failed.  :func:`add_call_note` adds, for the innermost :data:`CALL_NOTES` calls the error
went through, a note at the call with its argument values (``note: in the call per(2)``)."""

from __future__ import annotations

from dataclasses import replace

from ppir.diagnostics import Note, PpirError, error
from ppir.ir import Span

MAX_CALL_DEPTH = 200
CALL_NOTES = 3
"""At most this many call notes per diagnostic (the innermost calls): a deep recursion would
otherwise add one per level."""


def recursion_limit(name: str, span: Span) -> PpirError:
    return error(
        "recursion-limit",
        f"calls nest deeper than {MAX_CALL_DEPTH} (runaway recursion in '{name}'?)",
        span,
    )


def add_call_note(err: PpirError, name: str, args: tuple, span: Span) -> None:
    """Add to each of ``err``'s diagnostics (but a recursion-limit one, which points at the
    call already) a note at the call ``name(args)`` at ``span``, unless it holds
    :data:`CALL_NOTES` call notes already."""
    call = f"in the call {name}({', '.join(map(str, args))})"
    for i, d in enumerate(err.diagnostics):
        made = sum(1 for n in d.notes if n.message.startswith("in the call "))
        if d.kind != "recursion-limit" and made < CALL_NOTES:
            err.diagnostics[i] = replace(d, notes=(*d.notes, Note(call, span)))
