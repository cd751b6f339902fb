"""The sizes the front end accepts, checked before any work that grows with them.

* Integers: literals (in ``.pps`` expressions, ``rank N:`` lines, action text, CSV cells and
  ``-D`` values) and every value computed from them lie in ``-(2**63 - 1) .. 2**63 - 1``, so
  no number is too long to print and no loop of products can grow without bound.
* Sizes: ranks, stages and microbatches are each at most ``--max-steps`` (they are looped
  over), and a complete schedule needs a forward and a backward of every (stage, microbatch),
  so ``2 * stages * microbatches`` must not exceed ``--max-ops``.  Both are checked as soon as
  the sizes are known, before any program is expanded or verified.
* Loops: each entry counts its trips (and the ops its body emits on every trip) against the
  caps, times how often the loops around it are sure to enter it again
  (:mod:`ppir.frontend.trips`), so a nest over a cap is refused before it runs.
"""

from __future__ import annotations

from ppir.diagnostics import error
from ppir.ir import Span

DEFAULT_MAX_OPS = 5_000_000  # --max-ops
DEFAULT_MAX_STEPS = 100_000_000  # --max-steps
MAX_INT = 2**63 - 1
_MAX_DIGITS = len(str(MAX_INT))


def show_int(text: str) -> str:
    """A literal as written, shortened when it is long (``12345678...6789 (5,000 digits)``)."""
    if len(text) <= 24:
        return text
    return f"{text[:8]}...{text[-4:]} ({len(text):,} digits)"


def int_literal(text: str, span: Span | None) -> int:
    """The value of a decimal literal (digits only); a located ``integer-too-large`` error
    beyond :data:`MAX_INT` (Python's own limit on long digit strings is never reached)."""
    digits = text.lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS or int(digits) > MAX_INT:
        raise error(
            "integer-too-large",
            f"integer {show_int(text)} is too large: ppir integers are at most 2**63 - 1",
            span,
        )
    return int(digits)


def check_int(value: int, what: str, span: Span | None) -> int:
    """``value`` when it lies in ppir's integer range, else a located ``integer-overflow``."""
    if -MAX_INT <= value <= MAX_INT:
        return value
    raise error(
        "integer-overflow",
        f"{what} overflows: ppir integers lie within -(2**63 - 1) .. 2**63 - 1",
        span,
    )


def check_size(what: str, n: int, cap: int, span: Span | None, option: str = "--max-steps"):
    """Ranks, stages and microbatches are looped over: each counts against ``--max-steps``."""
    if n > cap:
        raise error(
            "too-large",
            f"{what} = {n:,} exceeds the expansion cap of {cap:,}",
            span,
            hints=[f"the cap is {option}"],
        )


def check_work(
    need: int, what: str, max_ops: int, span: Span | None, each: str = "a forward and a backward"
) -> None:
    """Refuse ``what`` when its smallest complete schedule, ``need`` ops, is over ``--max-ops``:
    every (stage, microbatch) runs ``each`` (a forward and a backward), and every rank holds a
    stage."""
    if need > max_ops:
        raise error(
            "too-large",
            f"{what} need at least {need:,} ops ({each} of each), over the cap of {max_ops:,}",
            span,
            hints=["the cap is --max-ops"],
        )


def show_value(v: int) -> str:
    """An integer for a message, however large."""
    if -MAX_INT <= v <= MAX_INT:
        return str(v)
    return f"{'-' if v < 0 else ''}<a {int(v.bit_length() * 0.30103) + 1:,}-digit number>"


def read_int(text: str) -> int:
    """``text`` as ppir reads an integer given as text (``-D`` values, every integer option):
    int()'s syntax (a sign, ``_`` between digits, blanks around) in ASCII digits only, where
    int() alone reads Arabic-Indic and other Unicode digits ('٤' is 4).  Otherwise a
    ValueError saying what it must be: ``must be an integer[ in ASCII digits], got 'TEXT'``."""
    t = text.strip()
    try:
        if not t.isascii():
            raise ValueError(t)
        return int(t)
    except ValueError:
        digits = "" if t.isascii() else " in ASCII digits"
        raise ValueError(f"must be an integer{digits}, got {show_int(text)!r}") from None


def define_value(define: str, name: str, text: str, flag: str = "-D") -> int:
    """The integer of ``-D NAME=TEXT`` (``define`` is the whole argument and ``flag`` the
    option that gave it, ``-D2`` for ``ppir viz``'s second schedule, for messages)."""
    t = text.strip()
    core = t.lstrip("+-").replace("_", "")
    huge = core.isascii() and core.isdigit() and len(core.lstrip("0")) > _MAX_DIGITS
    try:
        v = None if huge else read_int(text)
    except ValueError as e:
        raise error("bad-define", f"{flag} {show_int(define)}: the value of '{name}' {e}") from None
    if v is None or not -MAX_INT <= v <= MAX_INT:
        raise error(
            "bad-define",
            f"{flag} {name}={show_int(t)}: out of range (ppir integers are at most 2**63 - 1)",
        )
    return v
