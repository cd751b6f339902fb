"""Reading a cost-model TOML file: ``tomllib`` (``tomli`` on Python 3.10), errors at the
parser's ``file:line:col``."""

from __future__ import annotations

import re
import sys

from ppir.diagnostics import error
from ppir.ir import Span


def load_config_file(path: str) -> dict:
    """The nested dict of a TOML config file (``tomllib``; ``tomli`` on Python 3.10); ppir
    errors for unreadable files, and for malformed ones at the parser's ``file:line:col``."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise error("bad-config", f"cannot read cost config {path}: {why}") from None
    return parse_config_text(text, path)


def parse_config_text(text: str, path: str) -> dict:
    """The nested dict of TOML ``text`` (the contents of ``path``), malformed text a ppir error
    at the parser's ``file:line:col``."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 (ppir depends on tomli there)
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line, col, msg = _toml_position(e, text)
        if line is None:
            raise error("bad-config", f"{path}: not valid TOML: {msg}") from None
        span = Span(path, line, col, line, col + 1, source=text)
        raise error("bad-config", f"not valid TOML: {msg}", span) from None


def _toml_position(e: ValueError, text: str) -> tuple[int | None, int | None, str]:
    """(line, column, message without its position) of a TOMLDecodeError: the ``lineno`` and
    ``colno`` attributes where the parser has them (tomli 2.1+, Python 3.14+), else the
    ``(at line X, column Y)`` / ``(at end of document)`` suffix every version writes; line and
    column are None when the error says neither."""
    msg = str(e)
    m = re.search(r" \(at (?:line (\d+), column (\d+)|end of document)\)$", msg)
    if m:
        msg = msg[: m.start()]
    if getattr(e, "lineno", None) is not None and getattr(e, "colno", None) is not None:
        return e.lineno, e.colno, getattr(e, "msg", msg)
    if m is None:
        return None, None, msg
    if m.group(1):
        return int(m.group(1)), int(m.group(2)), msg
    lines = text.split("\n")  # end of document: just past the last character
    return len(lines), len(lines[-1]) + 1, msg


def merge(base: dict, over: dict) -> dict:
    """``over``'s keys replace ``base``'s, section by section (CLI flags over the file)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for sec, table in over.items():
        out.setdefault(sec, {}).update(table)
    return out
