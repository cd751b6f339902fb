"""The text of a list of parameter values, ``--over NAME=V1,V2,...``: the one reading of
fuzz's and sweep's --over (:func:`split_option`), of a list's values (:func:`value_items`,
split by :func:`split_values`) and of a value given twice (:func:`refuse_repeats`), for the
commands and the strategies (:mod:`ppir.testing.space`) alike."""

from __future__ import annotations

from ppir.diagnostics import error


def value_items(text: str, shown: str, kind: str = "bad-range") -> list[str]:
    """The values of a list (:func:`split_values`), refusing an empty one, ``1,2,,4``, in one
    wording for fuzz's and sweep's --over and the strategies; ``shown`` names the list."""
    items = split_values(text)
    if not all(x.strip() for x in items):
        raise error(
            kind,
            f"{shown} has an empty value",
            hints=["separate the values with single commas, e.g. 1,2,4"],
        )
    return items


def refuse_repeats(values: list, shown: str, kind: str = "bad-range") -> None:
    """The one rule of a list of values (fuzz's --over, sweep's --over, the strategies): a value
    given twice is refused, naming it (sweep measured it twice, a row each; fuzz drew it as one
    choice): ``'4,4' lists 4 twice``; ``shown`` is the list as the caller names it."""
    seen = set()
    for v in values:
        if v in seen:
            raise error(kind, f"{shown} lists {v} twice", hints=["give each value once"])
        seen.add(v)


def split_values(text: str) -> list[str]:
    """``"1,2,4"`` -> ``["1", "2", "4"]``: a value list split at its top-level commas only, so
    ``"min(P,3),8"`` is two values.  The one splitter of ``NAME=V1,V2,...`` lists ('ppir fuzz',
    'ppir sweep', the strategies); items are not stripped, unbalanced parentheses are left to
    the caller's parser to report."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(depth - 1, 0)
        elif c == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    return [*items, text[start:]]


def split_option(text: str, syntax: str, kind: str = "bad-range") -> tuple[str, str]:
    """(NAME, VALUES) of ``--over NAME=VALUES``, the one check of fuzz's and sweep's: an error
    naming the option as given when it is not NAME=... (``syntax``: what it takes, e.g.
    ``NAME=V1,V2,...``) or has no values after '=' (one wording for both commands).  A
    ``syntax`` that leads with ``NAME=LO..HI`` (fuzz's, whose ranges may read parameters)
    takes range examples; sweep's, which leads with its lists, list examples."""
    name, eq, values = text.partition("=")
    name = name.strip()
    ranges = syntax.startswith("NAME=LO..HI")
    if not eq or not name.isidentifier():
        example = "P=2..16 --over M=P..8P" if ranges else "v=1,2,4"
        raise error(kind, f"--over {text}: expected {syntax}", hints=[f"e.g. --over {example}"])
    if not values.strip():
        example = f"{name}=2..16, or a list of values, --over " if ranges else ""
        raise error(
            kind,
            f"--over {text}: no values after '='",
            hints=[f"e.g. --over {example}{name}=1,2,4"],
        )
    return name, values
