"""Diagnostics: one root exception type and a renderer in the compiler style.

Every user mistake ppir detects becomes a :class:`Diagnostic` rendered as::

    path:line:col: error: message
     12 |   F(i, 3)
        |   ^^^^^^^
    hint: ...
    note: path:line:col: related place

:class:`PpirError` carries one or more diagnostics and the exit code the CLI should use:
``EXIT_INVALID`` (1) when a schedule was understood but is wrong, ``EXIT_USAGE`` (2) when the
input could not be used at all (syntax, parameters, files).  Anything else escaping to the CLI is a
bug in ppir.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from unicodedata import combining, east_asian_width

from ppir.ir import Span

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


@dataclass(frozen=True)
class Note:
    message: str
    span: Span | None = None


@dataclass(frozen=True)
class Diagnostic:
    """One finding.  ``kind`` is a stable kebab-case identifier (used by JSON output and tests)."""

    kind: str
    message: str
    span: Span | None = None
    severity: str = "error"
    hints: tuple[str, ...] = ()
    notes: tuple[Note, ...] = ()
    extra: str = ""  # pre-formatted block (e.g. a rank x step grid), printed after the notes

    def render(self) -> str:
        where = f"{self.span}: " if self.span else "ppir: "
        lines = [f"{where}{self.severity}: {self.message}"]
        if self.span:
            lines.extend(quote(self.span))
        for h in self.hints:
            lines.append(f"hint: {h}")
        for n in self.notes:
            loc = f"{n.span}: " if n.span else ""
            lines.append(f"note: {loc}{n.message}")
            if n.span:
                lines.extend(quote(n.span, indent="  "))
        if self.extra:
            lines.append(self.extra.rstrip("\n"))
        return "\n".join(lines)

    def to_json(self) -> dict:
        def span_json(s: Span | None):
            if s is None:
                return None
            return {
                "path": s.path,
                "line": s.line,
                "col": s.col,
                "end_line": s.end_line,
                "end_col": s.end_col,
            }

        return {
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "span": span_json(self.span),
            "hints": list(self.hints),
            "notes": [{"message": n.message, "span": span_json(n.span)} for n in self.notes],
        }


QUOTE_WIDTH = 100  # at most this many source characters are shown per quoted line


def quote(span: Span, indent: str = "", width: int = QUOTE_WIDTH) -> list[str]:
    """The source line of a span with carets under it (empty when the span carries no source).

    Lines are counted as the parser counts them (``\n`` only).  A line longer than ``width``
    is shown as a window of ``width`` characters around the caret, cut ends marked ``...``;
    control characters show as ``?``, and carets are placed by display width (a CJK character
    takes two columns), so that they stay under the text they mark."""
    src = _source_line(span.source, span.line) if span.source is not None else None
    if src is None:
        return []
    src = _printable(src.expandtabs(1))
    start = max(span.col - 1, 0)
    end = span.end_col - 1 if span.end_line == span.line else len(src)
    width_c = max(1, min(end, len(src)) - start) if start < len(src) else 1
    if len(src) > width:
        lo = max(0, min(start - width // 3, len(src) - width))
        hi = lo + width
        head, tail = ("..." if lo else ""), ("..." if hi < len(src) else "")
        width_c = max(1, min(width_c, hi - start))
        src = head + src[lo:hi] + tail
        start = start - lo + len(head)
    num = str(span.line)
    pad = " " * len(num)
    lead, marked = _columns(src[:start]), max(1, _columns(src[start : start + width_c]))
    return [
        f"{indent}{num} | {src}",
        f"{indent}{pad} | {' ' * lead}{'^' * marked}",
    ]


def _columns(text: str) -> int:
    """How many terminal columns ``text`` takes: two for an East Asian wide or fullwidth
    character, none for a combining mark, one for any other."""
    if text.isascii():
        return len(text)
    return sum(2 if east_asian_width(c) in ("W", "F") else 0 if combining(c) else 1 for c in text)


def _source_line(text: str, line: int) -> str | None:
    """Line ``line`` (1-based) of ``text``, lines split at ``\n`` as lark counts them."""
    starts = _line_starts(text)
    if not 1 <= line <= len(starts):
        return None
    a = starts[line - 1]
    b = starts[line] - 1 if line < len(starts) else len(text)
    return text[a:b].rstrip("\r")


@lru_cache(maxsize=8)
def _line_starts(text: str) -> tuple[int, ...]:
    out, i = [0], text.find("\n")
    while i >= 0:
        out.append(i + 1)
        i = text.find("\n", i + 1)
    return tuple(out)


_CONTROL = {c: "?" for c in [*range(32), 127]}


def _printable(line: str) -> str:
    return line.translate(_CONTROL)


class PpirError(Exception):
    """The root of every error ppir reports to users."""

    def __init__(self, diagnostics: Diagnostic | list[Diagnostic], exit_code: int = EXIT_USAGE):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        self.exit_code = exit_code
        super().__init__(self.diagnostics[0].message if self.diagnostics else "error")

    def render(self) -> str:
        return "\n".join(d.render() for d in group_repeats(self.diagnostics))

    def __str__(self) -> str:
        """The rendered diagnostics (``file:line:col: error: ...``, the source line, hints), so
        that an uncaught error in a library call shows where, as the command line does."""
        return self.render() if self.diagnostics else self.message

    @property
    def message(self) -> str:
        """The first diagnostic's message alone (no location or hints)."""
        return self.diagnostics[0].message if self.diagnostics else "error"

    @property
    def kind(self) -> str:
        return self.diagnostics[0].kind if self.diagnostics else "error"


def error(
    kind: str,
    message: str,
    span: Span | None = None,
    *,
    hints=(),
    notes=(),
    exit_code: int = EXIT_USAGE,
) -> PpirError:
    """Shorthand: a PpirError holding one error diagnostic."""
    return PpirError(
        Diagnostic(kind, message, span, hints=tuple(hints), notes=tuple(notes)), exit_code
    )


def write_output(path: str, text: str) -> None:
    """Write a command's output file; a ``bad-output`` error (exit 2) when that fails."""
    try:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as e:
        raise cannot_write(path, e) from None


def cannot_write(path: str, e: OSError) -> PpirError:
    """The ``bad-output`` error (exit 2) for an output file that could not be written, for
    writers other than :func:`write_output` (a chart that matplotlib saves)."""
    return error("bad-output", f"cannot write {path}: {e.strerror or e}")


def given_twice(key: str, first, second) -> str:
    """The message for a key given twice with two values in one ``KEY=VALUE`` list (``--cost
    F=1,F=2``, ``--model seq=4096,seq=2048``, ``--module-opt``): both values named, as ``-D``
    names both; the same value twice is accepted, as ``-D P=4 -D P=4`` is."""
    return f"'{key}' is given twice ({key}={first}, then {key}={second})"


def rank_list(ranks, limit: int = 8, noun: str = "rank") -> str:
    """Ranks in a message, as the verifier names them: ``rank 2``, ``ranks 0 and 1``, ``ranks
    0, 1 and 3``; past ``limit`` of them the first ``limit`` and a count, as repeated
    diagnostics are listed (``ranks 0, 1, ..., 7, ... (8 more)``).  ``noun="stage"`` names
    stages alike (``stages 0 and 2``)."""
    shown = [str(r) for r in ranks]
    if not shown:
        return f"no {noun}"
    if len(shown) == 1:
        return f"{noun} {shown[0]}"
    many = _plural(noun)
    if len(shown) > limit:
        return f"{many} {', '.join(shown[:limit])}, ... ({len(shown) - limit} more)"
    return f"{many} {', '.join(shown[:-1])} and {shown[-1]}"


def did_you_mean(word: str, candidates) -> list[str]:
    """A hint list with the closest candidate, or nothing.  A candidate that differs only in
    case comes first ('V' for 'v' scores 0 by similarity alone); with none close by
    similarity, the one candidate the word begins ('sel' for 'selective')."""
    candidates = list(candidates)
    same = [c for c in candidates if isinstance(c, str) and c != word and c.lower() == word.lower()]
    close = same or difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    if not close and len(word) >= 2:  # a word cut short: 'sel' for 'selective', when unique
        starts = [
            c for c in candidates if isinstance(c, str) and c.lower().startswith(word.lower())
        ]
        close = starts if len(starts) == 1 else []
    return [f"did you mean '{close[0]}'?"] if close else []


@dataclass
class Report:
    """An ordered collection of diagnostics produced by checks (errors and warnings)."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def add(self, d: Diagnostic) -> None:
        self.diagnostics.append(d)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def grouped(self) -> list[Diagnostic]:
        """The diagnostics to print: repeats from one source line merged (:func:`group_repeats`)."""
        return group_repeats(self.diagnostics)

    def render(self) -> str:
        return "\n".join(d.render() for d in self.grouped())


# ------------------------------------------------------------------ grouping repeated findings
# A number in a message: an action's text (torch form, stage first, microbatch last) or a
# standalone integer, named by the word just before it ("rank 3" -> rank).
_SLOT = re.compile(
    r"(?<![\w.])(\d+)(?:SEND_F|RECV_F|SEND_B|RECV_B|F|B|I|W)(\d+)(?!\w)"
    # a number (count() writes 4,096 with commas), or an ordinal (ordinal(): 2nd)
    r"|(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(st|nd|rd|th)?(?!\w|\.\d)"
)
_NAME_AFTER = re.compile(r"\W{0,2}([A-Za-z_]+)")
_COUNTED = re.compile(r"#(\s+)([A-Za-z]+)")  # a blanked number and the word it counts
_NAME_BEFORE = re.compile(r"([A-Za-z_]+)\W{0,2}$")
SHOWN_VALUES = 10  # values listed in a group's note before "... (N more)"


def _template(message: str) -> tuple[str, tuple[str, ...], tuple[int, ...]]:
    """(message with numbers blanked, the name of each number, the numbers)."""
    parts, names, values, last = [], [], [], 0
    for m in _SLOT.finditer(message):
        parts.append(message[last : m.start()])
        if m.group(3) is not None:  # named by the word before; an ordinal by the one after
            if m.group(4):
                name = _NAME_AFTER.match(message, m.end())
            else:
                name = _NAME_BEFORE.search(message, 0, m.start())
            names.append(name.group(1).lower() if name else "value")
            values.append(int(m.group(3).replace(",", "")))
            parts.append("#")
        else:
            names += ["stage", "microbatch"]
            values += [int(m.group(1)), int(m.group(2))]
            parts.append(message[m.end(1) : m.start(2)].join("##"))
        last = m.end()
    parts.append(message[last:])
    # "1 recv" and "2 recvs" are one wording (count() makes the plural): the word a number
    # counts goes into the template in the singular
    template = _COUNTED.sub(lambda w: f"#{w.group(1)}{_singular(w.group(2))}", "".join(parts))
    return template, tuple(names), tuple(values)


def _singular(word: str) -> str:
    """The singular of a plural :func:`_plural` made (other words unchanged)."""
    if word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def group_repeats(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Merge findings that repeat on one source line into one diagnostic.

    Diagnostics group when they have the same kind, severity, file and line and their messages
    differ only in numbers (action text such as ``0F3`` counts as a stage and a microbatch).
    The first one is kept, at its place in the list, with a note naming what varies, by the
    word before each number, in the others (the first one's values are in its message):
    ``the same error for 3 other (rank, microbatch) pairs: (0, 4), (1, 3), ...``.
    Diagnostics without a span are left alone.  No check needs to cooperate.
    """
    groups: dict[tuple, list[int]] = {}
    info: list[tuple[tuple[str, ...], tuple[int, ...]] | None] = []
    for i, d in enumerate(diagnostics):
        if d.span is None:
            info.append(None)
            continue
        template, names, values = _template(d.message)
        info.append((names, values))
        groups.setdefault(_repeat_key(d, template), []).append(i)
    out: list[Diagnostic] = []
    merged = {g[0]: g for g in groups.values() if len(g) > 1}
    dropped = {i for g in merged.values() for i in g[1:]}
    for i, d in enumerate(diagnostics):
        if i in dropped:
            continue
        if i in merged:
            note = _group_note(d.severity, [info[j] for j in merged[i]])
            d = replace(d, notes=d.notes + (Note(note),))
        out.append(d)
    return out


def repeat_key(d: Diagnostic) -> tuple | None:
    """What :func:`group_repeats` merges ``d`` by (None: it stays alone): diagnostics with equal
    keys print as one."""
    return None if d.span is None else _repeat_key(d, _template(d.message)[0])


def _repeat_key(d: Diagnostic, template: str) -> tuple:
    return (d.kind, d.severity, d.span.path, d.span.line, template)


def _group_note(severity: str, members: list) -> str:
    names = members[0][0]
    columns: list[tuple[str, tuple[int, ...]]] = []
    for k, name in enumerate(names):
        col = tuple(values[k] for _, values in members)
        if len(set(col)) > 1 and (name, col) not in columns:
            columns.append((name, col))
    n = len(members)
    if not columns:
        return f"the same {severity} {n} times"
    rows = list(zip(*(col for _, col in columns)))[1:]  # the first is the one printed
    if len(columns) == 1:
        what = columns[0][0]
        shown = [str(r[0]) for r in rows]
    else:
        tuple_word = "pair" if len(columns) == 2 else "tuple"
        what = f"({', '.join(name for name, _ in columns)}) {tuple_word}"
        shown = [f"({', '.join(map(str, r))})" for r in rows]
    more = len(shown) - SHOWN_VALUES
    listed = ", ".join(shown[:SHOWN_VALUES]) + (f", ... ({more} more)" if more > 0 else "")
    return f"the same {severity} for {count(n - 1, 'other ' + what)}: {listed}"


def _plural(word: str) -> str:
    return word + ("es" if word.endswith(("ch", "sh", "s", "x")) else "s")


def count(n: int, noun: str) -> str:
    """``count(2, "stage")`` -> ``"2 stages"``, ``count(1, "microbatch")`` -> ``"1
    microbatch"``, ``count(4096, "rank")`` -> ``"4,096 ranks"``: the one plural of ppir's
    messages (the last word of ``noun`` takes it)."""
    return f"1 {noun}" if n == 1 else f"{n:,} {_plural(noun)}"
