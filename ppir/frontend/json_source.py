"""Where values sit in the text of a JSON file, for diagnostics: the span of the value at a
path of keys and indices (:func:`json_span`), and of each item of a list at once
(:func:`json_item_spans`, what locates every action of a ``ppir.program/1`` file)."""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from itertools import accumulate
from json.decoder import scanstring

from ppir.ir import Span


def json_span(path: str, text: str, where: tuple, memo: dict | None = None) -> Span | None:
    """The span of the value at ``where`` (object keys and list indices, from the top) in the
    JSON ``text``, which parses; None when there is no such value.  Of a repeated key, the last
    (the one ``json.loads`` keeps).  ``memo`` keeps the containers scanned, for the next call."""
    memo = {} if memo is None else memo
    at = _value_at(text, where, memo)
    return None if at is None else _span(path, text, _line_starts(text, memo), *at)


def json_item_spans(path: str, text: str, where: tuple, memo: dict | None = None) -> list[Span]:
    """The span of each item of the list at ``where`` (as :func:`json_span`; empty when there
    is no list there), in one scan of it."""
    memo = {} if memo is None else memo
    at = _value_at(text, where, memo)
    if at is None or text[at[0]] != "[":
        return []
    if at[0] not in memo:
        memo[at[0]] = _members(text, at[0])
    starts = _line_starts(text, memo)
    return [_span(path, text, starts, *item) for item in memo[at[0]].values()]


def _value_at(text: str, where: tuple, memo: dict) -> tuple[int, int] | None:
    """(start, end) of the value at ``where``; None when there is none."""
    at = (_SKIP.match(text).end(), len(text))
    for step in where:
        if at[0] not in memo:
            memo[at[0]] = _members(text, at[0])
        at = memo[at[0]].get(step)
        if at is None:
            return None
    return at


def _span(path: str, text: str, starts: list[int], pos: int, end: int) -> Span:
    """The span of the value from ``pos`` to ``end`` (``starts``: where each line of ``text``
    starts): its width when it fits on its line, else 1."""
    line = bisect_right(starts, pos)
    col = pos - starts[line - 1] + 1
    same_line = line == len(starts) or starts[line] > end
    return Span(path, line, col, line, col + (end - pos if same_line else 1), text)


def _line_starts(text: str, memo: dict) -> list[int]:
    """Where each line of ``text`` starts, kept in ``memo`` (under the key -1, which no
    container's position takes) for the text's next span.  Not an lru_cache on the text: a
    cache keyed by an equal but distinct 10 MB string compares the two on every lookup, which
    made a second load of one large program take minutes."""
    if -1 not in memo:
        lines = text.split("\n")
        memo[-1] = [n + k for k, n in enumerate(accumulate(map(len, lines), initial=0))][
            : len(lines)
        ]
    return memo[-1]


_SKIP = re.compile(r"[ \t\n\r]*")
_DECODE = json.JSONDecoder().raw_decode


def _members(text: str, pos: int) -> dict:
    """Where each member's value starts and ends, of the object (by key) or list (by index) at
    ``pos`` (empty for a scalar)."""
    opener, out = text[pos], {}
    if opener not in "{[":
        return out
    pos = _SKIP.match(text, pos + 1).end()
    while text[pos] not in "}]":
        if opener == "{":
            key, pos = scanstring(text, pos + 1)
            pos = _SKIP.match(text, _SKIP.match(text, pos).end() + 1).end()  # past the ':'
        else:
            key = len(out)
        end = _DECODE(text, pos)[1]
        out[key] = (pos, end)
        pos = _SKIP.match(text, end).end()
        if text[pos] == ",":
            pos = _SKIP.match(text, pos + 1).end()
    return out
