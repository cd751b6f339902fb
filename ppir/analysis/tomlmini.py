"""Read the small TOML files the cost model takes (``tomllib`` on 3.11+, a tiny subset before).

Python 3.10 has no ``tomllib``; rather than require a dependency for a dozen keys, the fallback
parser accepts the subset ``examples/cost_config.toml`` uses: ``[section]`` headers, ``key = value``
lines, ``#`` comments, and values that are strings (``"..."``), integers, floats, booleans or
one-line arrays of those.  Anything else raises :class:`ValueError` with the line number, which
:func:`ppir.analysis.config.load_config_file` turns into a ppir diagnostic.
"""

from __future__ import annotations

import re

try:  # Python 3.11+
    import tomllib as _tomllib
except ModuleNotFoundError:  # pragma: no cover - exercised on 3.10 only
    _tomllib = None

_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def loads(text: str) -> dict:
    """Parse TOML text into nested dicts; ValueError (with a line number) when malformed."""
    if _tomllib is not None:
        try:
            return _tomllib.loads(text)
        except _tomllib.TOMLDecodeError as e:
            raise ValueError(str(e)) from None
    return loads_subset(text)


def loads_subset(text: str) -> dict:
    """The fallback parser (also used by tests, so it does not rot on 3.11)."""
    root: dict = {}
    table = root
    for n, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        if line.startswith("["):
            if not line.endswith("]") or not _KEY.match(line[1:-1].strip()):
                raise ValueError(f"line {n}: expected a [section] header")
            table = root.setdefault(line[1:-1].strip(), {})
            continue
        key, eq, value = line.partition("=")
        key = key.strip()
        if not eq or not _KEY.match(key):
            raise ValueError(f"line {n}: expected key = value")
        if key in table:
            raise ValueError(f"line {n}: duplicate key '{key}'")
        table[key] = _value(value.strip(), n)
    return root


def _strip_comment(line: str) -> str:
    in_str = False
    for i, ch in enumerate(line):
        if ch == '"':
            in_str = not in_str
        elif ch == "#" and not in_str:
            return line[:i]
    return line


def _value(v: str, n: int):
    if v.startswith("[") and v.endswith("]"):
        inner = v[1:-1].strip().rstrip(",")
        return [_value(x.strip(), n) for x in inner.split(",")] if inner else []
    if len(v) >= 2 and v[0] == v[-1] == '"':
        return v[1:-1]
    if v in ("true", "false"):
        return v == "true"
    try:
        return int(v.replace("_", ""))
    except ValueError:
        pass
    try:
        return float(v.replace("_", ""))
    except ValueError:
        raise ValueError(f"line {n}: cannot read value {v!r}") from None
