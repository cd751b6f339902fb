"""Reading a schedule's text: a file as UTF-8 (byte-order mark and bad bytes handled, the
latter located), or a built-in by name; a name that is neither gets the near misses as hints."""

from __future__ import annotations

import difflib
import os
import re

from ppir.diagnostics import did_you_mean, error
from ppir.ir import Span
from ppir.schedules import builtin_display_path, builtin_names, builtin_source

SUFFIXES = (".pps", ".csv", ".json")
"""The file types a schedule argument can name: ppir's language, torch's CSV, ``ppir.program``."""

UTF8_BOM = b"\xef\xbb\xbf"
"""The byte-order mark some editors (Windows ones) write at the start of a UTF-8 file."""


def read_text(path: str) -> str:
    """The UTF-8 text of a file, without one leading byte-order mark (:data:`UTF8_BOM`: lines
    and columns count from the first character after it), a lone CR read as a line's end; a
    ``bad-input`` error otherwise,
    located at the first byte that is not UTF-8 (line and column counted in the characters
    before it)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise error("bad-input", f"cannot read {path}: {e.strerror or e}") from None
    data = data.removeprefix(UTF8_BOM)
    if b"\r" in data:  # a lone CR ends a line (classic Mac files), as it does for Python
        data = re.sub(rb"\r(?!\n)", b"\n", data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        line_start = data.rfind(b"\n", 0, e.start) + 1
        col = len(data[line_start : e.start].decode("utf-8", "replace")) + 1
        shown = data.decode("utf-8", "replace")
        raise error(
            "bad-encoding",
            f"byte 0x{data[e.start]:02x} is not UTF-8 text ({e.reason})",
            Span(path, line, col, line, col + 1, shown),
            hints=["schedules are UTF-8 text files"],
        ) from None


def read_source(spec: str, builtin: bool = False) -> tuple[str, str]:
    """(display path, text) of a .pps schedule given as a path or a built-in name: an existing
    file first, then a built-in (a directory is never a schedule); ``builtin``: the built-in of
    that name, whatever the working directory holds."""
    if not builtin and os.path.exists(spec):
        if not os.path.isdir(spec):
            return spec, read_text(spec)
        if spec not in builtin_names():
            raise error("bad-input", f"{spec} is a directory, not a schedule file")
    if spec in builtin_names():
        return builtin_display_path(spec), builtin_source(spec)
    looks_like_path = os.sep in spec or spec.lower().endswith(SUFFIXES)
    what = "no such file" if looks_like_path else "no such file or built-in schedule"
    files = [spec + x for x in SUFFIXES if os.path.isfile(spec + x)]
    if not files and looks_like_path:
        files = _near_file(spec)
    raise error(
        "bad-input",
        f"{what}: '{spec}'",
        hints=[f"did you mean the file '{f}'?" for f in files]
        + did_you_mean(spec, builtin_names())
        + ([] if looks_like_path else [f"built-ins: {', '.join(builtin_names())}"]),
    )


def _near_file(spec: str) -> list[str]:
    """The schedule file (``.pps``, ``.csv``, ``.json``) in ``spec``'s folder whose name is
    closest to its name (``chimeera.pps`` for ``chimera.pps``), as a one-item list, or []."""
    folder, name = os.path.split(spec)
    try:
        names = [
            n
            for n in os.listdir(folder or ".")
            if n.lower().endswith(SUFFIXES) and os.path.isfile(os.path.join(folder or ".", n))
        ]
    except OSError:  # no such folder, or not readable: nothing to suggest
        return []
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return [os.path.join(folder, close[0])] if close else []
