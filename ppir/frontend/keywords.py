"""Parameters given by keyword or flag: the one error for a parameter a schedule does not take
(:func:`check_known`, whatever kind of schedule), and a did-you-mean for a keyword of the
loaders' own (``path``, ``placement``, ``max_ops``...) misspelt by a caller and so taken as a
schedule parameter: ``load_text(src, pth=...)``."""

from __future__ import annotations

import inspect
from dataclasses import replace

from ppir.diagnostics import PpirError, did_you_mean, error
from ppir.frontend.limits import show_value


def given(flag: str, name: str, value) -> str:
    """How a parameter was (or is to be) given, for messages: ``-D P=4`` with the CLI's flag,
    ``P=4`` when ``flag`` is empty (the Python API); an integer however large is shortened
    (:func:`ppir.frontend.limits.show_value`: ``Q=<a 61-digit number>``).  ``value`` is text
    already shown (``'...'``, a shortened integer) for messages that word it themselves."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = show_value(value)
    return f"{flag} {name}={value}" if flag else f"{name}={value}"


def given_value(flag: str, name: str, value) -> str:
    """:func:`given` for a value as the caller passed it: an integer as a number, anything
    else as its repr, as every message quotes an offending value, so that a text value, one
    with blanks or an empty one, shows: ``Q='x'``, ``--over Q=' 1..4'``, ``Q=''``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return given(flag, name, value)
    return given(flag, name, repr(value))


def first_unknown(params: dict, declared) -> str | None:
    """The first name of ``params`` not ``declared``: the one :func:`check_known` names."""
    return next((name for name in params if name not in declared), None)


def check_known(params: dict, declared, where: str, flag: str, what: str = "", hints=()) -> None:
    """An ``unknown-parameter`` error for the first of ``params`` not ``declared``, in one
    wording whatever reads the schedule (a .pps header, ``torch:NAME``, a CSV or JSON file):
    ``unknown parameter 'Q' (-D Q=4) for schedule '1f1b'`` (``flag`` as :func:`given` takes
    it), with a did-you-mean and what the schedule takes (``what``, for a file that takes
    none: ``a CSV schedule takes no parameters: it is one fixed program``), then ``hints``."""
    name = first_unknown(params, declared)
    if name is not None:
        takes = f"its parameters: {', '.join(declared) or 'none'}"
        if what and not declared:
            takes = f"{what} takes no parameters: it is one fixed program"
        raise error(
            "unknown-parameter",
            f"unknown parameter '{name}' ({given_value(flag, name, params[name])}) for {where}",
            hints=[*did_you_mean(name, declared), takes, *hints],
        )


def keyword_typo(e: PpirError, fn, params: dict, more: dict, declared) -> PpirError:
    """``e`` with a did-you-mean first when it is an unknown parameter (every loader checks
    the names before their values, :func:`check_known`), the one it names (the first of
    ``params``, all that were passed, not ``declared()``) was given to ``fn`` by keyword
    (``more``) and is close to one of ``fn``'s own keywords: ``load_text(src, pth=...)``
    meant ``path``.  A hint about another name would sit under the wrong one:
    ``load('1f1b', Q=1, placment=...)`` names Q."""
    if e.kind != "unknown-parameter":
        return e
    name = first_unknown(params, declared())
    if name not in more:
        return e
    own = [p.name for p in inspect.signature(fn).parameters.values() if p.kind != p.VAR_KEYWORD]
    close = did_you_mean(name, own)
    if not close:
        return e
    d = e.diagnostics[0]
    hint = f"{close[0]} ({fn.__name__}'s own keyword; {name}= was taken as a schedule parameter)"
    return PpirError([replace(d, hints=(hint, *d.hints)), *e.diagnostics[1:]], e.exit_code)
