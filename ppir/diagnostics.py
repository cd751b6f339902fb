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
from dataclasses import dataclass, field

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


def quote(span: Span, indent: str = "") -> list[str]:
    """The source line of a span with carets under it (empty when the span carries no source)."""
    text = span.source
    if text is None:
        return []
    lines = text.splitlines()
    if not 1 <= span.line <= len(lines):
        return []
    src = lines[span.line - 1].expandtabs(1)
    start = max(span.col - 1, 0)
    end = span.end_col - 1 if span.end_line == span.line else len(src)
    width = max(1, min(end, len(src)) - start) if start < len(src) else 1
    num = str(span.line)
    pad = " " * len(num)
    return [
        f"{indent}{num} | {src}",
        f"{indent}{pad} | {' ' * start}{'^' * width}",
    ]


class PpirError(Exception):
    """The root of every error ppir reports to users."""

    def __init__(self, diagnostics: Diagnostic | list[Diagnostic], exit_code: int = EXIT_USAGE):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        self.exit_code = exit_code
        super().__init__(self.diagnostics[0].message if self.diagnostics else "error")

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)

    @property
    def kind(self) -> str:
        return self.diagnostics[0].kind


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
        raise error("bad-output", f"cannot write {path}: {e}") from None


def did_you_mean(word: str, candidates) -> list[str]:
    """A hint list with the closest candidate, or nothing."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
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
