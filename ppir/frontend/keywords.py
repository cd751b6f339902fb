"""A did-you-mean for a keyword of the loaders' own (``path``, ``placement``, ``max_ops``...)
misspelt by a caller and so taken as a schedule parameter: ``load_text(src, pth=...)``."""

from __future__ import annotations

import inspect
from dataclasses import replace

from ppir.diagnostics import PpirError, did_you_mean


def keyword_typo(e: PpirError, fn, more: dict, declared) -> PpirError:
    """``e`` with a did-you-mean first when it is an error about a parameter (an unknown one,
    or a value no integer) and a name given to ``fn`` by keyword (``more``), one the schedule
    does not take (``declared()``), is close to one of ``fn``'s own keywords:
    ``load_text(src, pth=...)`` meant ``path``.  An error about the value (``torch:NAME``
    checks values before names) becomes one about the name: "unknown parameter 'placment'",
    not "the value of 'placment' must be an integer, got tuple (0, 1)"."""
    if e.kind not in ("unknown-parameter", "bad-define"):
        return e
    own = [p.name for p in inspect.signature(fn).parameters.values() if p.kind != p.VAR_KEYWORD]
    taken = declared()
    for name in more:
        close = [] if name in taken else did_you_mean(name, own)
        if close:
            d = e.diagnostics[0]
            why = f"{fn.__name__}'s own keyword; {name}= was taken as a schedule parameter"
            hint = f"{close[0]} ({why})"
            if e.kind == "bad-define":  # the value does not matter: the name is the mistake
                message = f"unknown parameter '{name}'"
                d = replace(d, kind="unknown-parameter", message=message, span=None, hints=())
            return PpirError([replace(d, hints=(hint, *d.hints)), *e.diagnostics[1:]], e.exit_code)
    return e
